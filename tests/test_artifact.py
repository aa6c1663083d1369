import json

import pandas as pd
import pytest

from raytune_attn import artifact
from raytune_attn.config import InvalidConfig, validate_config
from raytune_attn.problem import Problem
from raytune_attn.tune import results, winners
from raytune_attn.tune.cli import main

P1 = Problem(2, 4, 2, 256, 256, 64, True, "float16")
P2 = Problem(1, 8, 8, 1024, 1024, 128, False, "bfloat16")


def prov(accel="H100", arch="sm90"):
    return {"gpu": f"NVIDIA {accel}", "vendor": "nvidia", "arch": arch, "accelerator_type": accel,
            "triton_version": "3.4.0", "torch_version": "2.8.0", "raytune_attn_version": "0.1.0",
            "kernel_source_hash": "cd" * 32, "cuda_version": "12.4", "driver": "550"}


def rows():
    out = []
    spec = [  # problem, accel, BLOCK_M, status, tflops, latency
        (P1, "H100", 64, "ok", 100.0, 2.0), (P1, "H100", 128, "ok", 120.0, 1.0),
        (P1, "H100", 16, "invalid", None, None),
        (P1, "H100", 32, "stopped", 500.0, 0.1),  # stopped early: never a winner
        (P2, "H100", 64, "ok", 300.0, 1.0), (P2, "H100", 128, "ok", 300.0, 0.9),  # tie: lower latency wins
        (P1, "A100", 64, "ok", 80.0, 3.0),
        (P2, "A100", 64, "error", None, None),  # no ok trial: no entry
    ]
    for i, (p, accel, bm, st, tf, lat) in enumerate(spec):
        arch = "sm90" if accel == "H100" else "sm80"
        out.append(results.trial_row(p, {"BLOCK_M": bm, "BLOCK_N": 32}, {"status": st, "tflops": tf,
                                                                          "latency_ms": lat}, prov(accel, arch),
                                     trial_id=f"t{i}", sweep_id="s"))
    out.append(results.baseline_row(P1, "sdpa_flash", {"tflops": 110.0}, prov(), sweep_id="s"))
    out.append(results.baseline_row(P1, "sdpa_math", {"tflops": 20.0}, prov(), sweep_id="s"))
    out.append(results.baseline_row(P1, "sdpa_cudnn", {"status": "error"}, prov(), sweep_id="s"))
    return out


@pytest.fixture
def results_file(tmp_path):
    return results.write_file(rows(), tmp_path / "RESULTS.parquet")


def test_build_picks_winners_and_baselines(results_file):
    art = winners.build_artifact(results.read_trials(results_file))
    assert art["schema_version"] == artifact.SCHEMA_VERSION
    got = {(e["accelerator_type"], e["problem_key"]): e for e in art["entries"]}
    assert set(got) == {("H100", P1.key), ("H100", P2.key), ("A100", P1.key)}
    e = got[("H100", P1.key)]
    assert e["config"] == {"BLOCK_M": 128, "BLOCK_N": 32} and e["tflops"] == 120.0 and e["n_trials"] == 4
    assert (e["baseline_tflops"], e["baseline_impl"]) == (110.0, "sdpa_flash")
    assert e["arch"] == "sm90" and e["triton_version"] == "3.4.0" and e["problem"] == P1.to_dict()
    assert got[("H100", P2.key)]["config"]["BLOCK_M"] == 128  # the tie went to the lower latency
    assert got[("A100", P1.key)]["baseline_tflops"] is None
    assert art["provenance"]["triton_version"] == "3.4.0" and art["provenance"]["accelerator_type"] == ""
    assert art["checksum"] == artifact.checksum(art)


def test_a_row_without_knobs_never_wins():
    """However fast, a row that recorded no config (a trial cut off before its knobs were set) is not a winner."""
    base = {"status": "ok", "kind": "trial", "latency_ms": 1.0}
    rows = [{**base, "trial_id": "x-final", "tflops": 200.0}, {**base, "trial_id": "y-final", "tflops": 100.0,
                                                                "BLOCK_M": 64}]
    assert winners.pick(rows)["trial_id"] == "y-final"
    assert winners.pick(rows[:1]) is None


def test_write_load_round_trip_is_json(results_file, tmp_path):
    art = winners.build_artifact(results.read_trials(results_file))
    path = artifact.write(art, tmp_path / "best_configs.json")
    assert json.loads(path.read_text()) == art  # plain JSON, nothing pickled
    assert artifact.load(path) == art
    assert artifact.load(tmp_path) == art  # a directory holding best_configs.json


def _tampered(tmp_path, art, change):
    doc = json.loads(json.dumps(art))
    change(doc)
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(doc))
    return p


@pytest.mark.parametrize("change, message", [
    (lambda d: d["entries"][0].update(tflops=9999.0), "checksum mismatch"),
    (lambda d: d.update(schema_version=7), "schema_version 7 is not supported"),
    (lambda d: d.pop("schema_version"), "no schema_version"),
    (lambda d: d.pop("entries"), r"missing key\(s\) \['entries'\]"),
])
def test_bad_artifacts_raise_naming_file_and_problem(results_file, tmp_path, change, message):
    art = winners.build_artifact(results.read_trials(results_file))
    p = _tampered(tmp_path, art, change)
    with pytest.raises(artifact.ArtifactError, match=f"bad.json.*{message}"):
        artifact.load(p)


def test_invalid_config_and_corrupt_json(results_file, tmp_path):
    art = winners.build_artifact(results.read_trials(results_file))
    doc = json.loads(json.dumps(art))
    doc["entries"][0]["config"]["BLOCK_M"] = 48
    doc["checksum"] = artifact.checksum(doc)
    p = tmp_path / "cfg.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(artifact.ArtifactError, match=r"cfg.json: entries\[0\].*invalid config: BLOCK_M=48"):
        artifact.load(p)
    (tmp_path / "trunc.json").write_text(json.dumps(art)[:50])
    with pytest.raises(artifact.ArtifactError, match="trunc.json: not a JSON best-configs artifact"):
        artifact.load(tmp_path / "trunc.json")
    with pytest.raises(FileNotFoundError):
        artifact.load(tmp_path / "none.json")


def test_cli_export(results_file, tmp_path, capsys):
    out = tmp_path / "best_configs.json"
    assert main(["export", str(results_file), "-o", str(out)]) == 0
    art = artifact.load(out)
    assert len(art["entries"]) == 3
    assert "wrote" in capsys.readouterr().out
    assert main(["export", str(results_file), "-o", str(out), "--accelerator-type", "A100"]) == 0
    assert [e["accelerator_type"] for e in artifact.load(out)["entries"]] == ["A100"]
    capsys.readouterr()
    assert main(["export", str(results_file), "-o", str(tmp_path / "x.json"), "--accelerator-type", "A10"]) == 2
    types = sorted(set(pd.read_parquet(results_file)["accelerator_type"]))
    assert capsys.readouterr().err.strip() == (f"raytune-attn: error: --accelerator-type A10: {results_file} has no "
                                               f"rows of it (its types: {', '.join(types)})")
    assert not (tmp_path / "x.json").exists()
    into = tmp_path / "artifacts"  # an existing directory: the artifact is written in it
    into.mkdir()
    assert main(["export", str(results_file), "-o", str(into)]) == 0
    assert len(artifact.load(into / "best_configs.json")["entries"]) == 3


def test_cli_export_user_errors(tmp_path, capsys):
    assert main(["export", str(tmp_path / "missing.parquet"), "-o", str(tmp_path / "x.json")]) == 2
    assert "missing.parquet" in capsys.readouterr().err
    bad = results.write_file([r for r in rows() if r["status"] != "ok"], tmp_path / "bad.parquet")
    assert main(["export", str(bad), "-o", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err
    assert "no trial with status ok" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x.json").exists()


def test_configs_from_before_run_20_load_with_the_eight_warp_warp_specialization_off(results_file, tmp_path):
    # Sweeps before run 20 searched WARP_SPECIALIZE with 8 warps (a no-op in Triton's Hopper pass), which the knob
    # now refuses: such an artifact still loads, with the kernel it measured.
    art = winners.build_artifact(results.read_trials(results_file))
    legacy = {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 2, "WARP_SPECIALIZE": True}
    art["entries"][0]["config"] = legacy
    art["checksum"] = artifact.checksum(art)
    loaded = artifact.load(artifact.write(art, tmp_path / "best_configs.json"))
    assert loaded["entries"][0]["config"] == {**legacy, "WARP_SPECIALIZE": False}
    with pytest.raises(InvalidConfig, match="WARP_SPECIALIZE needs USE_TMA"):
        validate_config(legacy)


@pytest.mark.parametrize(("text", "words"), [
    ("[" * 100_000 + "]" * 100_000, "RecursionError"),
    ('{"schema_version": 1, "entries": [' + "9" * 5000 + "]}", "ValueError"),
    ('{"schema_version": 1, "created": NaN}', "missing key(s)"),  # Python's json reads NaN: the checks refuse it
    (b"\xff\xfe{}", "UnicodeDecodeError"),
])
def test_any_malformed_json_is_an_artifact_error_naming_the_file(tmp_path, text, words):
    p = tmp_path / "odd.json"
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(artifact.ArtifactError) as e:
        artifact.load(p)
    assert str(e.value).startswith(f"{p}: ") and words in str(e.value)


@pytest.mark.parametrize(("change", "words"), [
    ({"created": "yesterday"}, "created must be an ISO 8601 time, got 'yesterday'"),
    ({"entry": {"triton_version": 3.4}}, "entries[0]: 'triton_version' must be a string, got float"),
    ({"entry": {"triton_compatible": ">=3.4,~=3.5"}},
     "entries[0]: triton_compatible: '~=3.5' in '>=3.4,~=3.5' is not a comparison"),
])
def test_bad_fields_are_artifact_errors(results_file, tmp_path, change, words):
    art = winners.build_artifact(results.read_trials(results_file))
    art.update({k: v for k, v in change.items() if k != "entry"})
    art["entries"][0].update(change.get("entry", {}))
    art["checksum"] = artifact.checksum(art)
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(art))
    with pytest.raises(artifact.ArtifactError) as e:
        artifact.load(p)
    assert str(e.value).startswith(f"{p}: ") and words in str(e.value)


@pytest.mark.parametrize(("entry", "running", "applies"), [
    ({"triton_version": "3.4.0"}, "3.4.0", True),
    ({"triton_version": "3.4.0"}, "3.4.1", False),  # the full version, not the major
    ({"triton_version": "3.0.0"}, "3.9.0", False),
    ({"triton_version": ""}, "3.4.0", False),  # unrecorded: matches nothing
    ({}, "3.4.0", False),
    ({"triton_version": "3.4.0", "triton_compatible": ">=3.4, <3.6"}, "3.5.2", True),
    ({"triton_version": "3.4.0", "triton_compatible": ">=3.4,<3.6"}, "3.6.0", False),
    ({"triton_version": "3.4.0", "triton_compatible": ">=3.4,<3.6"}, "3.5.0+git1a2b", True),
    ({"triton_version": "", "triton_compatible": "==3.5"}, "3.5.0", True),
    ({"triton_version": "3.4.0", "triton_compatible": ">3.4,!=3.5.1"}, "3.5.1", False),
])
def test_triton_matches(entry, running, applies):
    assert artifact.triton_matches(entry, running) is applies


def test_merge_newest_created_wins_per_key_ties_by_path(results_file):
    art = winners.build_artifact(results.read_trials(results_file))
    keys = [(e["accelerator_type"], e["problem_key"]) for e in art["entries"]]

    def variant(created, block_m, drop=()):
        entries = [dict(e, config=dict(e["config"], BLOCK_M=block_m)) for e in art["entries"]
                   if (e["accelerator_type"], e["problem_key"]) not in drop]
        return artifact.assemble(entries, created=created)

    old = variant("2025-01-01T00:00:00+00:00", 16)
    new = variant("2025-06-01T00:00:00+02:00", 32, drop=keys[:1])  # lacks the first key: the old entry stays
    merged = artifact.merge([("a.json", old), ("b.json", new)])
    artifact.validate(merged)
    got = {(e["accelerator_type"], e["problem_key"]): e["config"]["BLOCK_M"] for e in merged["entries"]}
    assert got == {keys[0]: 16, **{k: 32 for k in keys[1:]}}
    assert merged["created"] == new["created"]
    tie = variant(old["created"], 64)
    for pair, want in ([("a.json", old), ("b.json", tie)], 16), ([("b.json", old), ("a.json", tie)], 64):
        assert {e["config"]["BLOCK_M"] for e in artifact.merge(pair)["entries"]} == {want}
