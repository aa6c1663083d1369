"""Problem-set files under pipelines/problems/ and their loader."""

import pytest

from raytune_attn.tune.sweep.problems import ProblemSetError, load_problems, parse_problems


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
    ({"schema_version": 1, "problems": []}, "problems: must be a non-empty list"),
    ({"schema_version": 1, "problems": [{"batch": 1, "hq": 3, "hkv": 2, "seqlen": 8, "head_dim": 8,
                                         "causal": True}]}, r"problems\[0\]: .*multiple of hkv"),
    ({"schema_version": 1, "defaults": {"hq": 1, "hkv": 1, "head_dim": 8, "causal": True},
      "problems": [{"batch": 1, "seqlen": 8}, {"batch": 1, "seqlen": 8}]}, r"problems\[1\]: .* repeats problems\[0\]"),
    ({"schema_version": 1, "problems": [{"batch": 1, "heads": 2}]}, r"problems\[0\]: unknown problem field"),
    ({"schema_version": 1, "problems": [1], "extra": 2}, "extra: unknown key"),
])
def test_errors_name_file_and_entry(doc, match):
    with pytest.raises(ProblemSetError, match=match) as e:
        parse_problems(doc, source="f.yaml")
    assert str(e.value).startswith("f.yaml: ")


def test_missing_file():
    with pytest.raises(FileNotFoundError, match="no problem-set file"):
        load_problems("does-not-exist")
