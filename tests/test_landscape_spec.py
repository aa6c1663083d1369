"""benchmarks/landscape_spec: FILE and FILE::KEY, as the replay benchmarks name a landscape."""

from pathlib import Path

from benchmarks.landscape_spec import split_spec


def test_file_alone_means_every_key():
    assert split_spec("tests/data/h200/short_full_landscape.parquet") == (
        Path("tests/data/h200/short_full_landscape.parquet"), None)
    assert split_spec(Path("a/b.parquet")) == (Path("a/b.parquet"), None)


def test_file_and_key():
    key = "dense-b16-hq16-hkv16-sq1024-sk1024-d128-full-bfloat16"
    assert split_spec(f"x/t.parquet::{key}") == (Path("x/t.parquet"), key)
    assert split_spec("x/t.parquet::") == (Path("x/t.parquet"), None)  # an empty key names no key
