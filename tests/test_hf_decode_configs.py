"""benchmarks/hf_decode_configs: the Hugging Face decode call with an explicit paged config is correct for every
config of its grid, and its summary ranks the default among them."""

import json

import pytest

pytest.importorskip("transformers")

from conftest import interpreter_only  # noqa: E402

from benchmarks import hf_decode_configs as hfd  # noqa: E402


@interpreter_only  # --tiny is the CPU form (float32 tensors on the CPU); the GPU form is a benchmark
def test_every_grid_config_matches_sdpa_in_the_integrations_layout(tmp_path):
    assert hfd.main(["--tiny", "--out", str(tmp_path)]) == 0
    import pandas as pd

    rows = pd.read_csv(tmp_path / "hf_decode_configs.csv")
    assert len(rows) == 2 * 5 and rows["ok"].all() and (rows["err"] < 1e-4).all()
    summary = json.loads((tmp_path / "hf_decode_configs.json").read_text())["summary"]
    assert [(s["batch"], s["context"], s["grid_timed"]) for s in summary] == [(1, 37, 4), (2, 37, 4)]
    assert all(1 <= s["default_rank"] <= 5 for s in summary)


def test_summary_names_the_fastest_config_and_the_defaults_place():
    rows = [{"batch": 1, "context": 8, "which": "default", "config": "d", "ok": True, "ms": 2.0}]
    rows += [{"batch": 1, "context": 8, "which": "grid", "config": c, "ok": ok, "ms": ms}
             for c, ok, ms in (("a", True, 1.0), ("b", True, 3.0), ("c", False, float("nan")))]
    (s,) = hfd.summarize(rows, copy_tb_s=None, elt=2)
    assert (s["best_config"], s["default_over_best"], s["default_rank"], s["grid_timed"], s["grid_failed"]) == (
        "a", 2.0, 2, 2, 1)


def test_an_artifacts_paged_entry_is_found_by_bucket_and_its_rows_summarized_again(tmp_path):
    from pathlib import Path

    art = Path(__file__).parents[1] / "docs/benchmarks/h100/paged/best_configs.json"
    find = hfd.artifact_configs(str(art), 16)
    key, cfg = find(32, 4095)
    assert key == "paged-n32q1k2049~4096-bs16-hq32-hkv8-d128-bfloat16-seed0" and cfg["NUM_SEGMENTS"] == 1
    assert find(20, 3000)[0] == key  # the same buckets: up to 32 sequences, up to 4096 keys
    rows = [{"batch": 32, "context": 4095, "which": "default", "config": "d", "ok": True, "ms": 2.0},
            {"batch": 32, "context": 4095, "which": "grid", "config": "g", "ok": True, "ms": 1.0},
            {"batch": 32, "context": 4095, "which": "grid", "config": json.dumps(cfg, sort_keys=True), "ok": True,
             "ms": 1.5}]
    (s,) = hfd.summarize(rows, copy_tb_s=None, elt=2, artifact=find)
    assert (s["artifact_entry"], s["artifact_over_best"]) == (key, 1.5)
    assert "artifact / best time: geometric mean 1.500" in hfd.table([s])
