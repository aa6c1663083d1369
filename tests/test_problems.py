"""Problem-set files under pipelines/problems/ and their loader."""

import pytest

from raytune_attn.tune.sweep.problems import PROBLEMS_DIR, ProblemSetError, load_problems, parse_problems


def test_shipped_sets():
    std = load_problems("standard")
    assert len(std) == 24 and all(p.dtype == "bfloat16" and not p.varlen for p in std)
    assert {p.head_dim for p in std} == {64, 128} and {p.causal for p in std} == {True, False}
    assert all(p.batch * p.seqlen_q == 16384 and p.hq * p.head_dim == 2048 for p in std)
    llama = load_problems("llama3_8b_prefill.yaml")
    assert len(llama) == 15 and len({p.key for p in llama}) == 15
    assert all((p.hq, p.hkv, p.head_dim, p.causal, p.varlen, p.dtype) == (32, 8, 128, True, True, "bfloat16")
               for p in llama)
    assert min(p.seqlen_q for p in llama) == 16 and max(p.seqlen_q for p in llama) == 4096
    assert min(p.batch for p in llama) == 1 and max(p.batch for p in llama) == 128
    tokens = [p.batch * p.seqlen_q for p in llama]
    assert min(tokens) == 1024 and max(tokens) == 512 * 1024
    smoke = load_problems("cpu_smoke")
    assert all(p.dtype == "float32" and p.seqlen_q <= 128 for p in smoke)


def test_entry_forms():
    ps = parse_problems({"schema_version": 1, "defaults": {"hq": 4, "hkv": 2, "head_dim": 64, "causal": False},
                         "problems": [{"batch": 2, "seqlen": 128},
                                      {"batch": 1, "seqlen_q": 16, "seqlen_k": 64},
                                      "dense-b4-hq16-hkv16-sq4096-sk4096-d128-causal-bfloat16",
                                      {"key": "varlen-b2-hq2-hkv1-sq64-sk64-d32-causal-float32"}]})
    assert [p.seqlen_k for p in ps] == [128, 64, 4096, 64]


@pytest.mark.parametrize("doc,match", [
    ({"schema_version": 2, "problems": [{}]}, "schema_version"),
    ({"schema_version": True, "problems": [{}]},
     r"^f\.yaml: schema_version: is True; this loader reads 1 \(an integer\)$"),
    ({"schema_version": 1.0, "problems": [{}]}, r"^f\.yaml: schema_version: is 1\.0; this loader reads 1"),
    ({"problems": [{}]}, r"^f\.yaml: schema_version: missing$"),
    ({"schema_version": 1, "problems": []}, "problems: must be a non-empty list"),
    ({"schema_version": 1, "problems": [{"batch": 1, "hq": 3, "hkv": 2, "seqlen": 8, "head_dim": 8,
                                         "causal": True}]}, r"problems\[0\]: .*multiple of hkv"),
    ({"schema_version": 1, "defaults": {"hq": 1, "hkv": 1, "head_dim": 8, "causal": True},
      "problems": [{"batch": 1, "seqlen": 8}, {"batch": 1, "seqlen": 8}]}, r"problems\[1\]: .* repeats problems\[0\]"),
    ({"schema_version": 1, "problems": [{"batch": 1, "heads": 2}]}, r"problems\[0\]: unknown problem field"),
    ({"schema_version": 1, "defaults": {"hq": 1, "hkv": 1, "head_dim": 8},
      "problems": [{"batch": 1, "seqlen": 8}]}, r"problems\[0\]: missing problem field\(s\) \['causal'\]"),
    ({"schema_version": 1, "problems": [1], "extra": 2}, "extra: unknown key"),
])
def test_errors_name_file_and_entry(doc, match):
    with pytest.raises(ProblemSetError, match=match) as e:
        parse_problems(doc, source="f.yaml")
    assert str(e.value).startswith("f.yaml: ")


SMOKE = "schema_version: 1\ndefaults: {hq: 2, hkv: 2, head_dim: 32, causal: true, dtype: float32}\nproblems:\n"


@pytest.mark.parametrize(("data", "problem"), [
    # a repeated field would be last-wins: batch 3 tuned where the file also says 1
    ((SMOKE + "  - {batch: 1, seqlen: 64, batch: 3}\n").encode(),
     "line 4, column 28: duplicate key 'batch' (first at line 4, column 6); give each key once"),
    ((SMOKE + "  - batch: 1\n    seqlen: 64\n    batch: 3\n").encode(),
     "line 6, column 5: duplicate key 'batch' (first at line 4, column 5)"),
    ((SMOKE.replace("dtype: float32", "dtype: float32, hq: 4") + "  - {batch: 1, seqlen: 64}\n").encode(),
     "line 2, column 71: duplicate key 'hq' (first at line 2, column 12)"),
    (SMOKE.encode() + b"  - {batch: 1, seqlen: 64}  # \xff\n",
     "not UTF-8 text (byte 0xff on line 4); expected a problem-set YAML file, saved as UTF-8"),
    (None, "is a directory; expected a problem-set YAML file"),
])
def test_file_errors_name_the_file(tmp_path, data, problem):
    path = tmp_path / "p.yaml"
    path.mkdir() if data is None else path.write_bytes(data)
    with pytest.raises(ProblemSetError) as e:
        load_problems(path)
    assert str(e.value).startswith(f"{path}: {problem}"), str(e.value)


@pytest.mark.parametrize("data", [b"\xff\xfe", None, (SMOKE + "  - {batch: 1, batch: 1, seqlen: 64}\n").encode()])
def test_cli_tune_bad_problem_file_is_one_line_naming_it(tmp_path, capsys, monkeypatch, data):
    from raytune_attn.tune.cli import main

    monkeypatch.chdir(tmp_path)
    path = tmp_path / "p.yaml"
    path.mkdir() if data is None else path.write_bytes(data)
    assert main(["tune", "--problems", "p.yaml", "--out", "out", "--name", "n"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("raytune-attn: error: p.yaml: "), err
    assert "codec" not in err and "Errno" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.yaml"]  # refused before anything started


@pytest.mark.parametrize("path", sorted(PROBLEMS_DIR.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_committed_problem_set_loads(path):
    assert load_problems(path)


def test_missing_file():
    with pytest.raises(FileNotFoundError, match="no problem-set file"):
        load_problems("does-not-exist")


def test_llama_decode_set():
    from raytune_attn.paged_problem import PagedProblem
    from raytune_attn.paged_runtime import problem_bucket

    ps = load_problems("llama3_8b_decode")
    assert all(isinstance(p, PagedProblem) for p in ps)
    assert {(p.hq, p.hkv, p.head_dim, p.dtype, p.block_size, p.causal) for p in ps} == {(32, 8, 128, "bfloat16",
                                                                                         16, True)}
    decode = [p for p in ps if p.seqlen_q == 1]
    assert {p.batch for p in decode} == {1, 8, 32, 128, 256}
    assert {p.seqlen_k for p in decode} == {1024, 4096, 16384, 32768}
    assert all(min(k for _, k in p.lengths()) > p.seqlen_k // 2 for p in decode)  # one context bucket each
    mixed = [p for p in ps if p.seqlen_q > 1]
    assert mixed and all(len(p.groups) == 2 for p in mixed)
    for p in mixed:
        chunks, rows = p.groups
        assert 512 <= min(q for q, _ in p.lengths()[:chunks.count]) and p.seqlen_q <= 2048
        assert 32 <= rows.count <= 128 and all(q == 1 for q, _ in p.lengths()[chunks.count:])
    assert len({problem_bucket(p) for p in ps}) == len(ps)  # the runtime tells every problem apart
    smoke = load_problems("cpu_paged_smoke")
    assert all(isinstance(p, PagedProblem) and p.dtype == "float32" and p.seqlen_k <= 64 for p in smoke)


def test_paged_entry_forms():
    doc = {"schema_version": 1, "defaults": {"kind": "paged", "hq": 4, "hkv": 2, "head_dim": 64, "block_size": 32},
           "problems": [{"num_seqs": 3, "q_len": 1, "context": [100, 7, 64]},
                        {"num_seqs": 4, "q_len": {"uniform": [1, 4]}, "context": {"uniform": [50, 90]}, "seed": 5},
                        {"mix": [{"num_seqs": 1, "q_len": 40, "context": 30},
                                 {"num_seqs": 2, "q_len": 1, "context": 300}]},
                        {"key": "paged-n2q1k17~40-bs16-hq2-hkv1-d16-float32-seed0"}]}
    fixed, drawn, mixed, keyed = parse_problems(doc)
    assert fixed.lengths() == [(1, 100), (1, 7), (1, 64)] and (fixed.batch, fixed.seqlen_k) == (3, 100)
    lens = drawn.lengths()
    assert lens[0] == (4, 90) and all(1 <= q <= 4 and 50 <= k <= 90 for q, k in lens)  # the first takes the bounds
    assert lens == type(drawn).from_key(drawn.key).lengths()  # the key names the draw: same seed, same lengths
    assert mixed.lengths() == [(40, 40), (1, 300), (1, 300)]  # a context below its q_len is raised to it
    assert keyed.key == "paged-n2q1k17~40-bs16-hq2-hkv1-d16-float32-seed0"
    assert fixed.flops() == 4 * 4 * 64 * (100 + 7 + 64)


@pytest.mark.parametrize("entry,match", [
    ({"kind": "dense"}, "kind must be paged"),
    ({"num_seqs": 2, "q_len": 1, "context": 8, "batch": 2}, "unknown paged problem field"),
    ({"num_seqs": 2, "q_len": 1, "context": [8, 9, 10]}, "context: 3 lengths for 2 sequences"),
    ({"num_seqs": 2, "q_len": 1, "context": {"uniform": [9, 8]}}, "lo <= hi"),
    ({"num_seqs": 2, "q_len": 0, "context": 8}, "q_len: lengths must be positive"),
    ({"num_seqs": 2, "q_len": 1, "context": 8, "block_size": 24}, "block_size=24"),
    ({"num_seqs": 1, "q_len": 1, "context": 8, "mix": []}, "either mix or"),
    ({"mix": [{"num_seqs": 1, "q_len": 1}]}, r"mix\[0\]: a group needs"),
    ({"num_seqs": 2, "q_len": 1, "context": 8, "hkv": 3}, "multiple of hkv"),
    ({"num_seqs": 0, "q_len": 1, "context": 8}, r"^p.yaml: problems\[1\]: num_seqs must be a positive integer, got 0$"),
    ({"mix": [{"num_seqs": 1, "q_len": 1, "context": 8}, {"num_seqs": 2.5, "q_len": 1, "context": 8}]},
     r"problems\[1\]: groups\[1\]: num_seqs must be a positive integer, got 2.5$"),
])
def test_paged_errors_name_the_entry(entry, match):
    doc = {"schema_version": 1, "defaults": {"kind": "paged", "hq": 4, "hkv": 2, "head_dim": 64, "block_size": 16},
           "problems": [{"num_seqs": 1, "q_len": 1, "context": 8}, entry]}
    with pytest.raises(ProblemSetError, match=match) as e:
        parse_problems(doc, source="p.yaml")
    assert str(e.value).startswith("p.yaml: problems[1]: ")
