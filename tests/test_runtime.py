import json
import subprocess
import sys
import warnings

import pytest
import torch
import triton

from raytune_attn import artifact, provenance, runtime
from raytune_attn.config import default_config, validate_config
from raytune_attn.device import DeviceInfo, detect, gpu_model
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
    assert f"tuned on {h100.name} (sm90), not on this {HERE.name}" in msgs[0] and str(path) in msgs[0]
    assert t.n_usable == 0 and t.ignored["device"] == 5
    # the same artifact loaded for a matching device applies
    assert runtime.load_configs(path, device_info=h100).n_usable == 5


@pytest.mark.parametrize("ray_name", ["AMD-Instinct-MI300X-OAM", "GPU"])
def test_entries_apply_by_the_gpu_model_they_recorded_not_by_rays_name(tmp_path, ray_name):
    """A sweep's entries carry the accelerator type Ray placed the trials by (on an MI300X node
    "AMD-Instinct-MI300X-OAM", on a node without the resource "GPU") and the device name torch gave the trial
    ("AMD Instinct MI300X"); the runtime detects "MI300X" from the same name there, and the entries apply. Another
    GPU model of the same arch does not."""
    tuned = DeviceInfo("amd", "gfx942", "AMD Instinct MI300X", ray_name, "6.4", "")
    path = make_artifact(tmp_path, provenance.collect(tuned))
    here = DeviceInfo("amd", "gfx942", "AMD Instinct MI300X", gpu_model("AMD Instinct MI300X"), "6.4", "")
    assert here.accelerator_type == "MI300X" != ray_name
    assert runtime.load_configs(path, device_info=here).n_usable == 5
    other = DeviceInfo("amd", "gfx942", "AMD Instinct MI325X", gpu_model("AMD Instinct MI325X"), "6.4", "")
    with pytest.warns(RuntimeWarning, match="tuned on AMD Instinct MI300X .gfx942., not on this AMD Instinct MI325X"):
        assert runtime.load_configs(path, device_info=other).n_usable == 0


def test_a_fleets_artifact_serves_each_gpu_without_a_warning(tmp_path):
    """Entries tuned on another GPU beside this GPU's (the artifacts of two GPU types merged) are ignored quietly;
    their count is kept. With nothing for this GPU, the load warns."""
    other = DeviceInfo("amd", "gfx942", "AMD Instinct MI300X", "AMD-Instinct-MI300X-OAM", "6.4", "")
    if HERE.vendor == "amd":
        other = DeviceInfo("nvidia", "sm90", "NVIDIA H100 80GB HBM3", "H100", "12.4", "")
    (tmp_path / "here").mkdir()
    (tmp_path / "other").mkdir()
    make_artifact(tmp_path / "here", problems=[E1, E4])
    make_artifact(tmp_path / "other", provenance.collect(other))
    t, msgs = warnings_of(lambda: runtime.load_configs(tmp_path))
    assert msgs == [] and t.n_usable == 2 and t.ignored == {"device": 5}
    assert look(E1) == (full(E1), f"exact:{E1.key}")
    runtime.clear_configs()
    _, msgs = warnings_of(lambda: runtime.load_configs(tmp_path / "other"))
    assert len(msgs) == 1 and f"5 tuned on {other.name}" in msgs[0]


def test_same_gpu_other_arch_is_not_used(tmp_path):
    other = DeviceInfo(HERE.vendor, "sm80" if HERE.arch != "sm80" else "sm90", HERE.name, HERE.accelerator_type,
                       "", "")
    path = make_artifact(tmp_path, provenance.collect(other))
    with pytest.warns(RuntimeWarning, match="not on this"):
        assert runtime.load_configs(path).n_usable == 0


def edited(path, name, change):
    """A copy of the artifact at `path`, written as `name` beside it after `change(doc)` (checksum redone)."""
    doc = json.loads(path.read_text())
    change(doc)
    doc.pop("checksum")
    return artifact.write(doc, path.parent / name)


def warnings_of(fn):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = fn()
    return out, [str(x.message) for x in w if issubclass(x.category, RuntimeWarning)]


def test_another_triton_version_or_none_is_not_used(tmp_path):
    major = triton.__version__.split(".")[0]
    minor = f"{major}.999.0"  # the same major version: still another compiler
    path = make_artifact(tmp_path, triton_versions={E1: minor, E2: ""})
    t, msgs = warnings_of(lambda: (runtime.load_configs(path), runtime.load_configs(path))[0])
    assert len(msgs) == 1, msgs
    assert msgs[0].startswith(f"raytune-attn: 2 of 5 config(s) in {path} do not apply here")
    running = triton.__version__
    assert f"2 tuned with Triton {minor}, an unrecorded version, this process runs Triton {running}" in msgs[0]
    assert t.ignored == {"triton": 2} and t.n_usable == 3
    assert look(E1)[1] == f"nearest:{E3.key}"  # E1 and E2 dropped: only the varlen bucket is left

    def declare(doc):  # the entry declares the running Triton compatible
        for e in doc["entries"]:
            e["triton_compatible"] = f">={major}.0,<{int(major) + 1}"

    ranged = edited(path, "ranged.json", declare)
    t, msgs = warnings_of(lambda: runtime.load_configs(ranged))
    assert not msgs and t.n_usable == 5 and look(E1) == (full(E1), f"exact:{E1.key}")


def test_another_kernel_source_is_not_used(tmp_path):
    path = make_artifact(tmp_path, dict(provenance.collect(HERE), kernel_source_hash="ab" * 32))
    t, msgs = warnings_of(lambda: runtime.load_configs(path))
    here = provenance.kernel_source_hash()
    assert msgs == [f"raytune-attn: 5 of 5 config(s) in {path} do not apply here and are ignored (default configs "
                    f"where no other entry serves a call): 5 measured with another kernel source "
                    f"(kernel_source_hash {'ab' * 6}; this kernel's is {here[:12]})"]
    assert t.n_usable == 0 and look(E1) == (default_config(64), "default")


def test_one_warning_names_every_difference(tmp_path):
    def mix(doc):
        doc["entries"][0]["arch"] = "sm80" if HERE.arch != "sm80" else "sm90"
        doc["entries"][1]["triton_version"] = "3.0.0"
        doc["entries"][2]["kernel_source_hash"] = ""

    path = edited(make_artifact(tmp_path), "mixed.json", mix)
    t, msgs = warnings_of(lambda: runtime.load_configs(path))
    assert len(msgs) == 1 and "3 of 5 config(s) in" in msgs[0] and str(path) in msgs[0]
    for words in ("1 tuned on", "1 tuned with Triton 3.0.0", "1 measured with another kernel source"):
        assert words in msgs[0]
    assert t.ignored == {"device": 1, "triton": 1, "kernel": 1} and t.n_usable == 2


@pytest.mark.parametrize("older_accel", [None, "GPU"], ids=["same name", "untyped older"])
def test_a_directory_of_artifacts_is_merged_newest_first(tmp_path, older_accel):
    """Per problem the newest artifact's entry serves; also where the older one recorded another of Ray's names for
    this GPU model (a node without the accelerator_type resource: "GPU"), which applies here too."""
    base = make_artifact(tmp_path)
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    bigger = {"BLOCK_M": 32, "BLOCK_N": 16, "num_warps": 1, "SPLIT_MASK": False}

    def older(doc):
        doc["created"] = "2000-01-01T00:00:00+00:00"
        if older_accel:
            doc["entries"] = [dict(e, accelerator_type=older_accel) for e in doc["entries"]]

    def newer(doc):
        doc["created"] = "2999-01-01T00:00:00+00:00"
        doc["entries"] = [dict(e, config=bigger) for e in doc["entries"] if e["problem_key"] == E4.key]

    edited(base, "old/best_configs.json", older)
    edited(base, "new/best_configs.json", newer)
    base.unlink()
    t = runtime.load_configs(tmp_path)
    assert t.n_usable == 5 and t.source.startswith("2 artifacts merged (")  # the problems served, each once
    assert look(E4) == (validate_config(bigger, head_dim=32, vendor=HERE.vendor), f"exact:{E4.key}")
    assert look(E1) == (full(E1), f"exact:{E1.key}")  # only in the older artifact: kept


def test_environment_variable(tmp_path, monkeypatch):
    path = make_artifact(tmp_path)
    monkeypatch.setenv(runtime.ENV_VAR, f"file://{path}")
    runtime.clear_configs()
    assert runtime.select_config(**E2.to_dict()) == full(E2)
    assert runtime.active_configs().source == str(path)
    runtime.clear_configs()
    monkeypatch.setenv(runtime.ENV_VAR, str(tmp_path))  # a directory holding best_configs.json
    assert runtime.load_configs().n_usable == 5


def test_file_uris_are_parsed_as_uris(tmp_path):
    """`Path.as_uri()` percent-escapes a space; file://localhost/ is the local host; another host is refused."""
    spaced = tmp_path / "two words"
    spaced.mkdir()
    path = make_artifact(spaced)
    for uri in (path.as_uri(), f"file://localhost{path}"):
        assert runtime.load_configs(uri, device_info=HERE).n_usable == 5, uri
    with pytest.raises(ValueError, match="a file on host 'elsewhere'"):
        runtime.load_configs(f"file://elsewhere{path}")


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


def test_an_empty_path_or_an_unread_scheme_is_refused_by_name(tmp_path, monkeypatch):
    make_artifact(tmp_path)
    monkeypatch.chdir(tmp_path)  # an empty path was the working directory: its artifacts merged without a word
    for given, words in (("", "the path is empty"), ("  ", "the path is empty"),
                         ("s3://bucket/best_configs.json", "scheme 's3' is not read here"),
                         ("https://host/best_configs.json", "scheme 'https' is not read here")):
        with pytest.raises(ValueError, match=words):
            runtime.load_configs(given)
    # An inference-only install has no MLflow: a runs:/ URI says which extra brings it.
    import sys

    monkeypatch.setitem(sys.modules, "raytune_attn.tune.tracking", None)
    with pytest.raises(ImportError, match=r"needs MLflow, which the tune extra installs"):
        runtime.load_configs("runs:/abc/best_configs.json")


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
