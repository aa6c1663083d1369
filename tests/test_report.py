"""`raytune-attn report`: tables per problem in the terminal and PNG plots beside the results."""

import json
import subprocess
import sys

import pytest

from raytune_attn.artifact import tflops_text
from raytune_attn.problem import Problem
from raytune_attn.tune import report, results

P1 = Problem(2, 4, 2, 256, 256, 64, True, "float16")
P2 = Problem(1, 8, 8, 512, 512, 128, False, "bfloat16")


def prov(accel):
    return {"gpu": f"NVIDIA {accel}", "vendor": "nvidia", "arch": "sm90", "accelerator_type": accel}


def make_rows():
    rows = []
    for problem, accel, scale in ((P1, "H100", 1.0), (P2, "H100", 2.0), (P1, "MI300X", 1.5)):
        for searcher, bonus in (("gp", 10.0), ("random", 0.0)):
            for i in range(6):
                ok = i != 2
                rows.append(results.trial_row(
                    problem, {"BLOCK_M": 64 * (1 + i % 2), "BLOCK_N": 32 * (1 + i % 3), "num_warps": 4,
                              "num_stages": 2, "PRE_LOAD_V": bool(i % 2)},
                    {"status": "ok" if ok else "invalid", "reason": None if ok else "smem",
                     "tflops": scale * (100.0 + 3 * i + bonus) if ok else None,
                     "latency_ms": 1.0 / (i + 1) if ok else None, "wall_time_s": 10.0 * (i + 1),
                     "timestamp": 1_700_000_000 + i},
                    prov(accel), sweep_id="s", trial_id=f"{searcher}-{i}", searcher=searcher, seed=0))
        rows.append(results.baseline_row(problem, "sdpa_flash", {"tflops": scale * 100.0, "latency_ms": 1.0},
                                         prov(accel), sweep_id="s"))
        rows.append(results.baseline_row(problem, "sdpa_efficient", {"tflops": scale * 80.0, "latency_ms": 1.2},
                                         prov(accel), sweep_id="s"))
        rows.append(results.baseline_row(problem, "sdpa_cudnn", {"status": "error", "reason": "unsupported"},
                                         prov(accel), sweep_id="s"))
    return rows


@pytest.fixture
def trials_file(tmp_path):
    path = tmp_path / "sweep" / "trials.parquet"
    results.write_file(make_rows(), path)
    return path


def test_summarize_best_config_baselines_speedup(trials_file):
    s = {(x.accelerator_type, x.problem_key): x for x in report.summarize(results.read_trials(trials_file))}
    assert len(s) == 3
    a = s[("H100", P1.key)]
    assert a.best_tflops == pytest.approx(125.0)  # gp, i=5: 100 + 15 + 10
    assert a.best_searcher == "gp" and a.best_config["BLOCK_M"] == 128 and a.best_config["PRE_LOAD_V"] is True
    assert a.best_baseline_impl == "sdpa_flash" and a.best_baseline_tflops == 100.0
    assert a.speedup == pytest.approx(1.25)
    assert a.n_trials == 12 and a.status_counts == {"ok": 10, "invalid": 2}
    assert a.search_s == 60.0
    assert a.searchers["random"]["best_tflops"] == pytest.approx(115.0)
    assert a.baselines["sdpa_cudnn"] != a.baselines["sdpa_cudnn"]  # failed baseline: NaN, not the best
    assert s[("MI300X", P1.key)].speedup == pytest.approx(1.25)
    d = a.to_dict()
    assert d["baselines"]["sdpa_cudnn"] is None and json.dumps(d)


def test_report_text_and_plots_beside_results(trials_file):
    r = report.report(trials_file)
    assert f"{P1.key}  [H100]" in r.text and f"{P2.key}  [H100]" in r.text and "[MI300X]" in r.text
    assert "tuned (gp)" in r.text and "tuned (random)" in r.text and "sdpa_flash" in r.text
    assert "1.25x" in r.text and "failed" in r.text and "Summary" in r.text
    assert "BLOCK_M=128" in r.text
    names = sorted(p.name for p in r.plots)
    assert names == ["trials_convergence.png", "trials_vs_baselines.png"]
    for p in r.plots:
        assert p.parent == trials_file.parent
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 10_000


def test_report_dataset_dir_filters_and_formats(tmp_path):
    out = tmp_path / "trials"
    results.write_trials(make_rows(), out)  # hive-partitioned dataset directory
    r = report.report(out, accelerator_type="MI300X", fmt="json", plots_dir=tmp_path / "plots")
    data = json.loads(r.text)
    assert [d["accelerator_type"] for d in data] == ["MI300X"]
    assert {p.name for p in r.plots} == {"trials_vs_baselines.png", "trials_convergence.png"}
    assert all(p.parent == tmp_path / "plots" for p in r.plots)
    md = report.report(out, problem="d128", fmt="markdown", plots=False)
    assert md.plots == [] and md.text.count(P2.key) == 1 and md.text.startswith("| accelerator |")
    n_keys = len({r["problem_key"] for r in make_rows()})
    with pytest.raises(ValueError, match=f"--problem nope: in none of the {n_keys} problem keys of "):
        report.report(out, problem="nope", plots=False)
    with pytest.raises(ValueError, match=r"--accelerator-type A10: .* has no rows of it \(its types: .*MI300X"):
        report.report(out, accelerator_type="A10", plots=False)
    with pytest.raises(ValueError, match="--format"):
        report.report(out, fmt="html")


@pytest.mark.slow
def test_report_cli(trials_file, tmp_path, capsys):
    from raytune_attn.tune import cli

    cmd = [sys.executable, "-m", "raytune_attn", "report", str(trials_file)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "Summary" in p.stdout and "wrote" in p.stdout
    assert (trials_file.parent / "trials_vs_baselines.png").exists()
    # A user's mistakes (same entry point, in-process): one line naming the file, exit 2.
    assert cli.main(["report", str(tmp_path / "missing.parquet")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "missing.parquet" in err and "Traceback" not in err
    notpq = tmp_path / "x.parquet"
    notpq.write_text("hello")
    assert cli.main(["report", str(notpq), "--no-plots"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "x.parquet" in err
    assert cli.main(["report", str(trials_file), "--format", "markdown", "--no-plots"]) == 0
    assert capsys.readouterr().out.startswith("| accelerator |")


def test_every_knob_has_a_label_and_every_config_renders():
    """The short form names every knob the kernels take: a paged winner (NUM_SEGMENTS) or a space that searches
    LPT_GROUP / BAND_LAUNCH once made the report's table raise KeyError."""
    from raytune_attn.config import KNOBS

    assert set(report.KNOB_LABELS) == set(KNOBS)
    assert len(set(report.KNOB_LABELS.values())) == len(KNOBS)  # no two knobs read alike
    assert report.config_str({"BLOCK_M": 16, "BLOCK_N": 64, "NUM_SEGMENTS": 8, "num_warps": 4, "num_stages": 2},
                             short=True) == "M16 N64 w4 s2 seg8"
    assert report.config_str({"BLOCK_M": 128, "PERSISTENT": True, "LPT_GROUP": 4, "BAND_LAUNCH": False},
                             short=True) == "M128 pers lpt4"
    assert report.config_str({"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 4, "num_stages": 2, "SPLIT_MASK": True,
                              "maxnreg": 0, "LPT_GROUP": 0}, short=True) == "M128 N64 w4 s2 split"
    assert report.config_str({"maxnreg": 168}, short=True) == "nreg168"


def test_report_of_a_paged_sweep(tmp_path):
    from raytune_attn.paged_problem import PagedProblem

    problem = PagedProblem.from_key("paged-n2q1k17~40-bs16-hq2-hkv1-d16-float32-seed0")
    config = {"BLOCK_M": 16, "BLOCK_N": 16, "num_warps": 4, "num_stages": 1}
    rows = [results.trial_row(problem, {**config, "NUM_SEGMENTS": segments},
                              {"status": "ok", "tflops": tflops, "latency_ms": 1 / tflops, "timestamp": 1_700_000_000},
                              prov("H100"), sweep_id="s", trial_id=f"t{segments}", searcher="gp", seed=0)
            for segments, tflops in ((1, 2.0), (2, 3.0), (4, 2.5))]
    path = tmp_path / "trials.parquet"
    results.write_file(rows, path)
    for fmt, shown in (("table", "seg2"), ("markdown", "NUM_SEGMENTS=2")):
        r = report.report(path, fmt=fmt, plots=False)
        assert problem.key in r.text and shown in r.text


def test_interpreter_sized_tflops_print_as_numbers_not_zero(tmp_path):
    config = {"BLOCK_M": 16, "BLOCK_N": 16, "num_warps": 4, "num_stages": 1, "PRE_LOAD_V": False}
    rows = [results.trial_row(P1, config, {"status": "ok", "tflops": 3.245e-05, "latency_ms": 190.0,
                                           "timestamp": 1_700_000_000},
                              prov("CPU"), sweep_id="s", trial_id="t0", searcher="gp", seed=0)]
    path = tmp_path / "trials.parquet"
    results.write_file(rows, path)
    summary_row = next(ln for ln in report.report(path, fmt="table", plots=False).text.splitlines()
                       if ln.startswith("CPU "))
    assert summary_row.split()[2] == "3.2e-05"
    assert [tflops_text(v) for v in (589.34, 0.1, 0.0, 0.0123)] == ["589.3", "0.1", "0.0", "0.012"]


def test_a_plots_dir_that_cannot_be_made_is_refused_before_the_results_are_read(trials_file, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(ValueError, match=r"--plots-dir: cannot make .*a-file/plots"):
        report.report(tmp_path / "missing.parquet", plots_dir=blocker / "plots")  # no result read: no such file
    assert report.report(trials_file, plots=False, plots_dir=blocker / "plots").plots == []
    with pytest.raises(FileNotFoundError):  # a missing results folder is not made for its plots
        report.report(tmp_path / "no" / "trials.parquet")
    assert not (tmp_path / "no").exists()


def test_plots_of_the_working_directory_are_named_after_it(trials_file, monkeypatch):
    """`report .` in a sweep's folder: the PNGs beside it, named after the folder (the name of "." is "")."""
    monkeypatch.chdir(trials_file.parent)
    assert report.plot_paths(".") == (trials_file.parent.parent / "sweep_vs_baselines.png",
                                      trials_file.parent.parent / "sweep_convergence.png")


def test_plots_without_matplotlib_name_the_extra_before_reading(trials_file, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    with pytest.raises(ValueError, match=r"raytune-attn\[plots\].*--no-plots"):
        report.report(trials_file)
    assert report.report(trials_file, plots=False).plots == []
