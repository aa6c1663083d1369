"""benchmarks/paged_bench.py in its --tiny mode (the Triton interpreter on a CPU: correctness only, no timing):
the Parquet it writes has one row per benchmark row and every column, and each method's output is within tolerance
of the benchmark's float32 reference, itself checked here against a float64 attention written independently.

On a GPU machine --tiny runs the same float32 rows on the GPU, untimed, with TF32's tolerance there
(`paged_bench.tolerance`); the tests of an interpreter artifact or CPU tensors are `interpreter_only`."""

import json
import math

import pandas as pd
import pytest
import torch
import triton
from conftest import DEVICE, interpreter_only

from benchmarks import paged_bench, paged_rows
from benchmarks.paged_batch import make_batch, reference
from raytune_attn import artifact, runtime
from raytune_attn.provenance import kernel_source_hash


def _float64_attention(row, batch):
    """Per sequence, per query head, softmax(q k^T * scale) v over its own keys, bottom-right causal."""
    out = torch.zeros((row.total_q, row.hq, row.head_dim), dtype=torch.float64)
    flat_k = batch.k_cache.reshape(-1, row.hkv, row.head_dim).double()
    flat_v = batch.v_cache.reshape(-1, row.hkv, row.head_dim).double()
    q0 = k0 = 0
    for ql, n in zip(row.q_lens, row.contexts, strict=True):
        idx = batch.token_index[k0:k0 + n]
        for h in range(row.hq):
            g = h // (row.hq // row.hkv)
            q = batch.q[q0:q0 + ql, h].double()
            s = q @ flat_k[idx, g].T * row.head_dim ** -0.5
            allowed = torch.arange(n)[None, :] <= torch.arange(ql)[:, None] + (n - ql)
            s = s.masked_fill(~allowed, -math.inf)
            out[q0:q0 + ql, h] = torch.softmax(s, dim=-1) @ flat_v[idx, g]
        q0, k0 = q0 + ql, k0 + n
    return out


def test_reference_is_attention_over_the_paged_keys():
    """The reference the benchmark checks every method against is attention over each sequence's own keys."""
    for row in paged_rows.tiny_rows():
        batch = make_batch(row, "cpu")
        ref = reference(batch).double()
        assert torch.allclose(ref, _float64_attention(row, batch), atol=1e-5), row.name


def test_tiny_mode_writes_checked_rows(tmp_path):
    assert paged_bench.main(["--tiny", "--out", str(tmp_path)]) == 0
    df = pd.read_parquet(tmp_path / "paged_bench.parquet")
    rows = paged_rows.tiny_rows()
    assert list(df["row"]) == [r.name for r in rows]
    assert list(df.columns) == list(paged_bench.COLUMNS)
    assert list(df["kind"]) == [r.kind for r in rows]
    assert list(df["total_k"]) == [sum(r.contexts) for r in rows]
    assert list(df["bytes"]) == [r.bytes_moved() for r in rows]
    for method in ("paged", "sdpa", "varlen"):
        assert df[f"{method}_ok"].tolist() == [True] * len(rows), method
        assert (df[f"{method}_err"] <= paged_bench.tolerance("float32", DEVICE)).all(), method
    assert df["paged_ms"].isna().all()  # --tiny times nothing (the interpreter's times are no GPU's)
    assert (tmp_path / "paged_bench.txt").read_text().count("\n") == len(rows) + 3


@interpreter_only  # the artifact's entry is the interpreter's: a GPU's lookup finds none for its own
def test_tuned_artifact_config_is_timed_beside_the_default(tmp_path):
    """--configs: a row in a tuned entry's bucket runs (and is checked) with that entry's config, a decode row of
    another bucket with the nearest entry's; a row of another query bucket says it has none."""
    key = "paged-n3q1k100-bs16-hq4-hkv2-d16-float32-seed0"  # the bucket of decode-b3-k100
    cfg = {"BLOCK_M": 16, "BLOCK_N": 32, "NUM_SEGMENTS": 2, "num_warps": 2, "num_stages": 1}
    entry = {"accelerator_type": "CPU", "arch": "interpreter", "vendor": "cpu", "problem_key": key, "config": cfg,
             "tflops": 1.0, "n_trials": 1, "triton_version": triton.__version__,
             "kernel_source_hash": kernel_source_hash()}
    path = artifact.write(artifact.assemble([entry]), tmp_path / "best_configs.json")
    try:
        argv = ["--tiny", "--rows", "decode-b1-k40,decode-b3-k100,mixed-*", "--configs", str(path),
                "--out", str(tmp_path)]
        assert paged_bench.main(argv) == 0
    finally:
        runtime.clear_configs()
    df = pd.read_parquet(tmp_path / "paged_bench.parquet").set_index("row")
    tuned = df.loc["decode-b3-k100"]
    assert tuned["tuned_source"] == "bucket:" + key
    assert json.loads(tuned["tuned_config"]) == cfg and json.loads(tuned["paged_config"]) != cfg
    assert tuned["tuned_ok"] and tuned["tuned_err"] <= paged_bench.TOLERANCE["float32"]
    near = df.loc["decode-b1-k40"]
    assert near["tuned_source"] == "nearest:" + key and json.loads(near["tuned_config"]) == cfg
    assert near["tuned_ok"] and near["tuned_err"] <= paged_bench.TOLERANCE["float32"]
    assert df.loc["mixed-p2-d3", "tuned_source"].startswith("default (no tuned entry")


def test_rows_filter_and_bad_pattern(tmp_path, capsys):
    assert paged_bench.main(["--tiny", "--rows", "*-b1-*", "--out", str(tmp_path)]) == 0
    assert list(pd.read_parquet(tmp_path / "paged_bench.parquet")["row"]) == ["decode-b1-k40"]
    assert paged_bench.main(["--tiny", "--rows", "nothing-*", "--out", str(tmp_path)]) == 2
    assert "matches no row" in capsys.readouterr().err


def test_full_table_rows():
    rows = paged_rows.full_rows()
    decode = [r for r in rows if r.kind == "decode"]
    assert {(r.num_seqs, r.max_k) for r in decode} == {(b, k) for b in paged_rows.DECODE_BATCHES
                                                       for k in paged_rows.DECODE_CONTEXTS}
    for r in rows:
        assert (r.hq, r.hkv, r.head_dim, r.block_size, r.dtype) == (32, 8, 128, 16, "bfloat16")
    for r in (r for r in rows if r.kind == "mixed"):
        chunks = [q for q in r.q_lens if q > 1]
        assert 2 <= len(chunks) <= 4 and all(512 <= q <= 2048 for q in chunks)
        assert 32 <= r.q_lens.count(1) <= 128
        assert all(n >= q for q, n in zip(r.q_lens, r.contexts, strict=True))
    assert {r.name for r in rows} >= set(paged_rows.QUICK)


@pytest.mark.parametrize("argv", [["--out", "x", "--tiny", "--quick"], ["--out", "x", "--rep-ms", "0"]])
def test_bad_arguments(argv):
    with pytest.raises(SystemExit):
        paged_bench.parse_args(argv)


def test_flashinfer_metadata_describes_the_same_keys():
    """FlashInfer's page description (indptr, page ids, last page fill) of any run of sequences names exactly the
    cache rows of their keys (FlashInfer itself needs a GPU; its description is checked here)."""
    from benchmarks.paged_baselines import _fi_metadata

    row = paged_rows.tiny_rows()[-1]
    batch = make_batch(row, "cpu")
    bs = row.block_size
    for seqs in (list(range(row.num_seqs)), [0, 1], [2, 3, 4]):
        indptr, ids, last = _fi_metadata(batch, seqs)
        rows = []
        for i in range(len(seqs)):
            pages = ids[indptr[i]:indptr[i + 1]].tolist()
            n = (len(pages) - 1) * bs + int(last[i])
            rows += [pages[j // bs] * bs + j % bs for j in range(n)]
        start = sum(row.contexts[:seqs[0]])
        expect = batch.token_index[start:start + sum(row.contexts[z] for z in seqs)]
        assert rows == expect.tolist()


def test_a_failing_method_or_row_is_reported_and_the_rest_still_runs(tmp_path, monkeypatch):
    from benchmarks import paged_baselines

    def refuse(*args, **kwargs):
        raise RuntimeError("no kernel for this shape")

    monkeypatch.setattr(paged_baselines, "varlen_runner", refuse)
    assert paged_bench.main(["--tiny", "--rows", "*-b1-*", "--out", str(tmp_path)]) == 0
    df = pd.read_parquet(tmp_path / "paged_bench.parquet")
    assert df["varlen_note"].tolist() == ["error: RuntimeError: no kernel for this shape"]
    assert df["paged_ok"].tolist() == [True] and df["sdpa_ok"].tolist() == [True]

    monkeypatch.setattr(paged_bench.Bench, "_paged", refuse)  # the paged kernel itself fails: the run says so
    assert paged_bench.main(["--tiny", "--rows", "*-b1-*", "--out", str(tmp_path)]) == 1
    df = pd.read_parquet(tmp_path / "paged_bench.parquet")
    assert df["note"].tolist() == ["error: RuntimeError: no kernel for this shape"]


@interpreter_only  # CPU tensors, float32 held to 1e-4
def test_prefill_probe_rows_are_checked_against_the_reference():
    """benchmarks/paged_prefill_probe.py's timing loop on an interpreter-sized row: each method's output is checked
    against the float32 reference (the probe records the max error beside each time)."""
    from benchmarks.paged_prefill_probe import time_row

    row = paged_rows.Row("t", "prefill", (5, 7), (9, 30), hq=4, hkv=2, head_dim=16, dtype="float32", block_size=16)
    recs = time_row(row, "test", "cpu", configs=[(16, 16, 4, 2), (32, 32, 4, 2)])
    assert [r["method"] for r in recs] == ["paged", "paged", "varlen", "sdpa"]
    assert all(r["max_err"] < 1e-4 for r in recs)
