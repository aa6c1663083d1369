"""paged_runtime: a paged_attention call's config from the artifact's paged entries by shape bucket, else the
nearest entry of the same query bucket, else the heuristic default; dense and varlen lookups never see a paged entry."""

import pytest
import triton

from raytune_attn import artifact, paged_runtime, runtime
from raytune_attn.config import default_config
from raytune_attn.device import DeviceInfo
from raytune_attn.kernels.paged_config import default_paged_config
from raytune_attn.paged_problem import PagedProblem
from raytune_attn.provenance import kernel_source_hash

DEV = DeviceInfo("nvidia", "sm90", "NVIDIA H100 80GB HBM3", "H100", "12.4", "550")
DECODE = "paged-n32q1k2049~4096-bs16-hq32-hkv8-d128-bfloat16-seed0"
MIXED = "paged-n2q512~2048k2048~8192+n32q1k1025~8192-bs16-hq32-hkv8-d128-bfloat16-seed0"
DENSE = "varlen-b34-hq32-hkv8-sq2048-sk2048-d128-causal-bfloat16"
CFG = {"DECODE": {"BLOCK_M": 16, "BLOCK_N": 32, "NUM_SEGMENTS": 4, "num_warps": 2, "num_stages": 3},
       "MIXED": {"BLOCK_M": 64, "BLOCK_N": 64, "NUM_SEGMENTS": 1, "num_warps": 8, "num_stages": 2}}


def _entry(key, config, **kw):
    return {"accelerator_type": DEV.accelerator_type, "arch": DEV.arch, "vendor": DEV.vendor, "problem_key": key,
            "config": config, "tflops": 1.0, "n_trials": 3, "triton_version": triton.__version__,
            "kernel_source_hash": kernel_source_hash(), **kw}


def _load(tmp_path, entries):
    path = artifact.write(artifact.assemble(entries), tmp_path / "best_configs.json")
    return runtime.load_configs(path, device_info=DEV)


def _call(key, **shape):
    p = PagedProblem.from_key(key)
    args = dict(num_seqs=p.batch, max_seqlen_q=p.seqlen_q, max_seqlen_k=p.seqlen_k, hq=p.hq, hkv=p.hkv,
                head_dim=p.head_dim, dtype=p.dtype, block_size=p.block_size)
    return paged_runtime.lookup(**{**args, **shape})


def test_bucket_rounds_host_ints_up_to_powers_of_two():
    assert [paged_runtime.pow2_bucket(n) for n in (0, 1, 2, 3, 4, 5, 4096, 4097)] == [1, 1, 2, 4, 4, 8, 4096, 8192]
    p = PagedProblem.from_key(MIXED)
    assert paged_runtime.problem_bucket(p) == (64, 2048, 8192, 32, 8, 128, "bfloat16", 16)


def test_lookup_by_bucket_else_default(tmp_path):
    dense_cfg = {"BLOCK_M": 64, "BLOCK_N": 32, "num_warps": 4, "num_stages": 2}
    table = _load(tmp_path, [_entry(DECODE, CFG["DECODE"]), _entry(MIXED, CFG["MIXED"]), _entry(DENSE, dense_cfg)])
    try:
        assert len(table.paged) == 2 and table.n_usable == 1  # the dense table holds no paged entry
        assert _call(DECODE) == (CFG["DECODE"], "bucket:" + DECODE)
        # Any call in the bucket: 17-32 sequences, longest context 2049-4096.
        assert _call(DECODE, num_seqs=17, max_seqlen_k=2049) == (CFG["DECODE"], "bucket:" + DECODE)
        assert _call(MIXED, num_seqs=40, max_seqlen_q=1500)[1] == "bucket:" + MIXED
        # Another sequence count or context bucket: the nearest entry of the same query bucket (the decode one
        # here; the mixed entry's query bucket is 2048), whichever way and however far.
        for shape in ({"num_seqs": 33}, {"max_seqlen_k": 4097}, {"num_seqs": 1, "max_seqlen_k": 65536}):
            assert _call(DECODE, **shape) == (CFG["DECODE"], "nearest:" + DECODE)
        assert _call(MIXED, num_seqs=600, max_seqlen_k=1024) == (CFG["MIXED"], "nearest:" + MIXED)
        # Another query bucket, head layout, block size or dtype: the default for the call.
        for shape in ({"max_seqlen_q": 2}, {"block_size": 32}, {"dtype": "float16"}, {"hkv": 4}):
            cfg, how = _call(DECODE, **shape)
            call = {**dict(num_seqs=32, max_seqlen_q=1, max_seqlen_k=4096, hkv=8), **shape}
            assert how == "default"
            assert cfg == default_paged_config(head_dim=128, group=32 // call["hkv"],
                                               max_seqlen_q=call["max_seqlen_q"], max_seqlen_k=call["max_seqlen_k"],
                                               num_seqs=call["num_seqs"], num_kv_heads=call["hkv"])
        # A varlen call of the mixed problem's summary shape gets the dense entry, never the paged one.
        assert runtime.lookup(batch=34, hq=32, hkv=8, seqlen_q=2048, seqlen_k=2048, head_dim=128, causal=True,
                              dtype="bfloat16", varlen=True)[0]["BLOCK_M"] == 64
        assert "NUM_SEGMENTS" not in runtime.lookup(batch=32, hq=32, hkv=8, seqlen_q=1, seqlen_k=4096,
                                                    head_dim=128, causal=True, dtype="bfloat16", varlen=True)[0]
    finally:
        runtime.clear_configs()
    assert _call(DECODE)[1] == "default"  # no table: the default


def test_entries_of_another_gpu_are_not_used(tmp_path):
    with pytest.warns(RuntimeWarning, match="do not apply here"):
        _load(tmp_path, [_entry(DECODE, CFG["DECODE"], accelerator_type="A100", arch="sm80")])
    try:
        assert _call(DECODE)[1] == "default"
    finally:
        runtime.clear_configs()


def test_one_bucket_two_entries_picks_the_smaller_key(tmp_path):
    other = DECODE.replace("seed0", "seed1")
    _load(tmp_path, [_entry(other, CFG["MIXED"]), _entry(DECODE, CFG["DECODE"])])
    try:
        assert _call(DECODE) == (CFG["DECODE"], "bucket:" + DECODE)
    finally:
        runtime.clear_configs()


def test_nearest_counts_steps_in_both_sequences_and_context(tmp_path):
    near = "paged-n8q1k2049~4096-bs16-hq32-hkv8-d128-bfloat16-seed0"  # 2 steps from n32 k4096 (sequences)
    far = "paged-n128q1k16385~32768-bs16-hq32-hkv8-d128-bfloat16-seed0"  # 2 + 3 steps
    _load(tmp_path, [_entry(far, CFG["MIXED"]), _entry(near, CFG["DECODE"])])
    try:
        assert _call(DECODE) == (CFG["DECODE"], "nearest:" + near)
        assert _call(DECODE, num_seqs=256, max_seqlen_k=32768) == (CFG["MIXED"], "nearest:" + far)
    finally:
        runtime.clear_configs()


def test_an_entry_invalid_for_its_gqa_group_is_refused_naming_it(tmp_path):
    """A paged config is judged with its problem's group (Hq // Hkv) when an artifact is written or read."""
    key = "paged-n32q1k2049~4096-bs16-hq32-hkv1-d128-bfloat16-seed0"  # group 32: a 16-row tile cannot hold it
    with pytest.raises(artifact.ArtifactError, match=r"entries\[0\] \(paged-n32q1k2049.*GQA group"):
        _load(tmp_path, [_entry(key, CFG["DECODE"])])


def test_an_entry_that_cannot_run_on_the_device_names_the_file_and_entry(tmp_path):
    """An entry without a vendor is checked as the interpreter's when read; indexed for an NVIDIA device, an AMD-only
    knob is an ArtifactError naming the file and the entry, not a bare InvalidConfig."""
    entry = _entry(DENSE, {**default_config(128), "waves_per_eu": 2})
    del entry["vendor"]
    with pytest.raises(artifact.ArtifactError, match=r"best_configs.json: entries\[0\] \(varlen-.*exist only on AMD"):
        _load(tmp_path, [entry])
    runtime.clear_configs()
