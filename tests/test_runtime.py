import json
import subprocess
import sys
import warnings

import pytest
import torch
import triton

from raytune_attn import artifact, provenance, runtime
from raytune_attn.config import default_config, validate_config
from raytune_attn.device import DeviceInfo, detect
from raytune_attn.problem import Problem
from raytune_attn.tune import results, winners

E1 = Problem(2, 4, 2, 256, 256, 64, True, "float16")
E2 = Problem(2, 4, 2, 1024, 1024, 64, True, "float16")
E3 = Problem(4, 4, 2, 512, 512, 64, True, "float16", varlen=True)
E4 = Problem(1, 2, 2, 17, 17, 32, True, "float32")
E5 = Problem(2, 2, 1, 17, 17, 32, False, "float32", varlen=True)
CONFIGS = {
    E1: {"BLOCK_M": 64, "BLOCK_N": 64},
    E2: {"BLOCK_M": 128, "BLOCK_N": 128, "num_stages": 3},
    E3: {"BLOCK_M": 32, "BLOCK_N": 32},
    E4: {"BLOCK_M": 16, "BLOCK_N": 16, "num_warps": 2, "SPLIT_MASK": False},
    E5: {"BLOCK_M": 32, "BLOCK_N": 16, "num_warps": 1},
}
HERE = detect()


def make_artifact(tmp_path, prov=None, name="best_configs.json", problems=None, triton_versions=None):
    prov = prov or provenance.collect(HERE)
    rows = []
    for i, p in enumerate(problems or CONFIGS):
        pr = dict(prov, triton_version=(triton_versions or {}).get(p, prov["triton_version"]))
        rows.append(results.trial_row(p, CONFIGS[p], {"status": "ok", "tflops": 10.0 + i}, pr, trial_id=f"t{i}"))
    art = winners.build_artifact(results.read_trials(results.write_file(rows, tmp_path / f"{name}.parquet")))
    return artifact.write(art, tmp_path / name)


@pytest.fixture(autouse=True)
def clean(monkeypatch):
    monkeypatch.delenv(runtime.ENV_VAR, raising=False)
    runtime.clear_configs()
    runtime._warned.clear()
    yield
    runtime.clear_configs()


def look(p: Problem, **change):
    d = dict(p.to_dict(), **change)
    return runtime.lookup(**d)


def full(p):
    return validate_config(CONFIGS[p], head_dim=p.head_dim, vendor=HERE.vendor)


def test_lookup_order_exact_nearest_default(tmp_path):
    t = runtime.load_configs(make_artifact(tmp_path))
    assert t.n_usable == 5
    assert look(E1) == (full(E1), f"exact:{E1.key}")
    assert look(E1, seqlen_q=300, seqlen_k=300) == (full(E1), f"nearest:{E1.key}")
    assert look(E1, seqlen_q=700, seqlen_k=700) == (full(E2), f"nearest:{E2.key}")
    assert look(E1, seqlen_q=64, seqlen_k=64, batch=16) == (full(E1), f"nearest:{E1.key}")
    # the same kind (varlen) is preferred over a closer dense bucket
    assert look(E1, seqlen_q=300, seqlen_k=300, varlen=True)[1] == f"nearest:{E3.key}"
    # GQA ratio 4/4, another head dim, causal flag or dtype: no bucket, the default config
    for change in ({"hkv": 4}, {"head_dim": 128}, {"causal": False}, {"dtype": "bfloat16"}):
        assert look(E1, **change) == (default_config(change.get("head_dim", 64)), "default")
    # the ratio, not the head counts, must match
    assert look(E1, hq=8, hkv=4)[1] == f"nearest:{E1.key}"


def test_select_config_memoised_and_cheap(tmp_path):
    runtime.load_configs(make_artifact(tmp_path))
    kw = dict(E1.to_dict())
    first = runtime.select_config(**kw)
    assert first == full(E1) and runtime.select_config(**kw) is first
    nkw = dict(kw, seqlen_q=333)
    nearest = runtime.select_config(**nkw)
    # A nearest match is memoised too: later calls are one dict lookup, returning the same object (its cost per call
    # is measured by `python -m benchmarks.dispatch_bench`, not here: a timed assertion fails on a loaded machine).
    assert nearest == full(E1) and runtime.select_config(**nkw) is nearest


def test_no_artifact_gives_default():
    assert runtime.select_config(**E1.to_dict()) == default_config(64)
    assert runtime.active_configs() is None


def test_other_gpu_warns_once_and_falls_back(tmp_path):
    # An artifact tuned on a GPU that is not this machine's, whatever this machine is.
    h100 = DeviceInfo("nvidia", "sm90", "NVIDIA H100 80GB HBM3", "H100", "12.4", "550")
    if HERE.accelerator_type == h100.accelerator_type:
        h100 = DeviceInfo("nvidia", "sm90", "NVIDIA H200", "H200", "12.4", "550")
    path = make_artifact(tmp_path, provenance.collect(h100))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        t = runtime.load_configs(path)
        runtime.load_configs(path)
        assert look(E1) == (default_config(64), "default")
    msgs = [str(x.message) for x in w if issubclass(x.category, RuntimeWarning)]
    assert len(msgs) == 1, msgs
    assert f"tuned on {h100.accelerator_type} (sm90)" in msgs[0] and str(path) in msgs[0]
    assert t.n_usable == 0 and t.ignored["device"] == 5
    # the same artifact loaded for a matching device applies
    assert runtime.load_configs(path, device_info=h100).n_usable == 5


def test_same_gpu_other_arch_is_not_used(tmp_path):
    other = DeviceInfo(HERE.vendor, "sm80" if HERE.arch != "sm80" else "sm90", HERE.name, HERE.accelerator_type,
                       "", "")
    path = make_artifact(tmp_path, provenance.collect(other))
    with pytest.warns(RuntimeWarning, match="not on this"):
        assert runtime.load_configs(path).n_usable == 0


def test_other_triton_major_warns_once_and_falls_back(tmp_path):
    major = int(triton.__version__.split(".")[0])
    old = f"{major - 1}.6.0"
    path = make_artifact(tmp_path, triton_versions={E1: old, E2: old})
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        t = runtime.load_configs(path)
        runtime.load_configs(path)
    msgs = [str(x.message) for x in w if issubclass(x.category, RuntimeWarning)]
    assert len(msgs) == 1 and f"Triton {old}" in msgs[0]
    assert t.ignored["triton"] == 2 and t.n_usable == 3
    assert look(E1)[1] == f"nearest:{E3.key}"  # E1 and E2 dropped: only the varlen bucket is left
    same_major = make_artifact(tmp_path, name="minor.json", triton_versions={E1: f"{major}.999.0"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert runtime.load_configs(same_major).n_usable == 5


def test_environment_variable(tmp_path, monkeypatch):
    path = make_artifact(tmp_path)
    monkeypatch.setenv(runtime.ENV_VAR, f"file://{path}")
    runtime.clear_configs()
    assert runtime.select_config(**E2.to_dict()) == full(E2)
    assert runtime.active_configs().source == str(path)
    runtime.clear_configs()
    monkeypatch.setenv(runtime.ENV_VAR, str(tmp_path))  # a directory holding best_configs.json
    assert runtime.load_configs().n_usable == 5


def test_bad_artifact_raises_naming_the_file(tmp_path, monkeypatch):
    good = json.loads(make_artifact(tmp_path).read_text())
    good["entries"][0]["tflops"] = 1e9
    bad = tmp_path / "tampered.json"
    bad.write_text(json.dumps(good))
    with pytest.raises(artifact.ArtifactError, match="tampered.json: checksum mismatch"):
        runtime.load_configs(bad)
    monkeypatch.setenv(runtime.ENV_VAR, str(bad))
    runtime.clear_configs()
    for _ in range(2):  # keeps raising, never silently falls back
        with pytest.raises(artifact.ArtifactError, match="tampered.json"):
            runtime.select_config(**E1.to_dict())
    monkeypatch.delenv(runtime.ENV_VAR)
    with pytest.raises(ValueError, match="RAYTUNE_ATTN_CONFIGS"):
        runtime.load_configs()
    with pytest.raises(FileNotFoundError):
        runtime.load_configs(tmp_path / "nope.json")


def test_api_uses_the_tuned_config(tmp_path, monkeypatch):
    from raytune_attn import api
    from raytune_attn.kernels import flash_attn

    runtime.load_configs(make_artifact(tmp_path))
    seen = []

    def spy(q, k, v, config, **kw):
        seen.append(config)
        return flash_attn.flash_attn_fwd(q, k, v, config, **kw)

    monkeypatch.setattr(api, "flash_attn_fwd", spy)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    dt = torch.float32 if dev == "cpu" else torch.float16
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 17, 32, device=dev, dtype=dt) for _ in range(3))
    out = api.attention(q, k, v, causal=True)
    if dev == "cpu":
        assert seen[-1] == full(E4)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(out, ref, atol=2e-3, rtol=2e-3)
    # varlen: 2 sequences of at most 17 tokens, 2 query heads over 1 kv head
    cu = torch.tensor([0, 17, 29], dtype=torch.int32, device=dev)
    qv = torch.randn(29, 2, 32, device=dev, dtype=dt)
    kv = torch.randn(29, 1, 32, device=dev, dtype=dt)
    api.varlen_attention(qv, kv, kv, cu, cu, 17, 17, causal=False)
    if dev == "cpu":
        assert seen[-1] == full(E5)


@pytest.mark.slow
def test_runtime_imports_neither_ray_nor_mlflow(tmp_path):
    path = make_artifact(tmp_path)
    code = (
        "import sys, raytune_attn\n"
        f"t = raytune_attn.load_configs({str(path)!r})\n"
        "from raytune_attn import runtime\n"
        f"print(runtime.select_config(**{E4.to_dict()!r})['BLOCK_M'])\n"
        "print(sorted(m for m in ('ray', 'mlflow') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["16", "[]"]
