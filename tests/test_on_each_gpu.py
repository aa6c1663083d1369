"""benchmarks/on_each_gpu.sh: one job a GPU, side by side, their files packed into one archive. Run with a stand-in
`nvidia-smi` that lists two GPUs (the script asks it how many there are); the jobs are shell commands."""

import os
import shlex
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
SCRIPT = ROOT / "benchmarks" / "on_each_gpu.sh"
pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def _run(tmp_path: Path, *jobs: str) -> subprocess.CompletedProcess:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'GPU 0: stand-in'\necho 'GPU 1: stand-in'\n")
    smi.chmod(0o755)
    # The library's helpers run python3 with PyYAML: this interpreter, through a script that runs it by its own path.
    # A symlink would not do: a virtual environment's python started through a link elsewhere finds no pyvenv.cfg
    # beside the link, so it runs as the base interpreter without the environment's packages (PyYAML among them).
    python = bin_dir / "python3"
    python.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} \"$@\"\n")
    python.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "OUT": str(tmp_path / "out"), "RUN": "t",
           "BUNDLE": str(tmp_path / "no-bundle.tar.xz")}
    return subprocess.run(["bash", str(SCRIPT), *jobs], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)


def test_each_job_gets_its_own_gpu_and_the_files_come_back_as_one_archive(tmp_path):
    res = _run(tmp_path, 'echo "dev=$CUDA_VISIBLE_DEVICES" > "$OUT/a_$CUDA_VISIBLE_DEVICES.txt"',
               'echo "dev=$CUDA_VISIBLE_DEVICES"; type grid_cells > /dev/null && echo has-lib')
    assert res.returncode == 0, res.stderr
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == ["env.txt", "gpu0.log", "gpu1.log", "t_results.tar.gz"]
    assert (out / "gpu1.log").read_text().splitlines()[1:] == ["dev=1", "has-lib"]
    with tarfile.open(out / "t_results.tar.gz") as tar:
        assert tar.getnames() == ["a_0.txt"]
        assert tar.extractfile("a_0.txt").read() == b"dev=0\n"


def test_more_jobs_than_gpus_is_refused_before_any_runs(tmp_path):
    res = _run(tmp_path, *[f'touch "$OUT/ran{i}"' for i in range(3)])
    assert res.returncode == 2
    assert "3 jobs for 2 GPUs" in res.stderr
    assert not list((tmp_path / "out").glob("ran*"))


def test_grid_cells_sweeps_one_head_dim_and_optionally_one_mask(tmp_path):
    # sweep and table_md stand in for the GPU steps: what reaches them, and the problem set written, is the test.
    show = ("python3 -c \"import yaml, sys; d = yaml.safe_load(open(sys.argv[1])); "
            "print(d['name'], sorted({(p['head_dim'], p['causal']) for p in d['problems']}), len(d['problems']))\"")
    job = ('sweep() { echo "sweep $1 $2 $3 ${*:4}"; }; table_md() { echo "table $1 $2"; }; '
           f'grid_cells bf16 256 99 causal; {show} /tmp/grid-bf16-d256-causal.yaml; '
           f'grid_cells fp16 64 98; {show} /tmp/grid-fp16-d64.yaml')
    res = _run(tmp_path, job)
    assert res.returncode == 0, res.stderr
    lines = (tmp_path / "out" / "gpu0.log").read_text().splitlines()[1:]
    assert lines == [
        "sweep grid-bf16-d256-causal 99 /tmp/grid-bf16-d256-causal.yaml --searcher gp --budget 24 --trials-per-gpu 24 "
        "--compile-workers 15",
        "table grid-bf16-d256-causal grid_bf16_d256_causal.md",
        "grid-bf16-d256-causal [(256, True)] 6",
        "sweep grid-fp16-d64 98 /tmp/grid-fp16-d64.yaml --searcher gp --budget 24 --trials-per-gpu 24 "
        "--compile-workers 15",
        "table grid-fp16-d64 grid_fp16_d64.md",
        "grid-fp16-d64 [(64, False), (64, True)] 12",
    ]


def test_a_sweep_name_run_before_starts_empty_and_keep_copies_its_files(tmp_path):
    # A name's files from an earlier run on the machine are removed before the sweep (tune would refuse the name
    # without --resume, and the old files would be packed as the new run's); keep copies a sweep's files to $OUT.
    name = f"gpu-lib-test-{os.getpid()}"
    old = Path("/tmp") / name
    old.mkdir(exist_ok=True)
    (old / "summary.json").write_text('{"old": true}')
    job = (f'sweep {name} 60 /nonexistent-problems.yaml > /dev/null; ls /tmp/{name} 2> /dev/null | wc -l; '
           f'mkdir -p /tmp/{name}; echo new > /tmp/{name}/summary.json; keep {name}; rm -rf /tmp/{name}*')
    res = _run(tmp_path, job)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "out" / "gpu0.log").read_text().splitlines()[1:] == ["0"]  # the old summary.json is gone
    with tarfile.open(tmp_path / "out" / "t_results.tar.gz") as tar:
        assert tar.extractfile(f"{name}_summary.json").read() == b"new\n"


def test_a_sweep_with_no_mlflow_is_not_given_a_tracking_uri(tmp_path):
    # sweep names a SQLite tracking file for each sweep; tune refuses a tracking URI beside --no-mlflow, so sweep
    # leaves its own out then. The first sweep gets as far as the missing problem set; the second, given a URI by its
    # caller, shows that the contradiction check comes before that error and would have fired in the first.
    name = f"gpu-lib-mlflow-{os.getpid()}"
    job = (f'sweep {name} 60 /nonexistent-problems.yaml --no-mlflow > /dev/null; cat /tmp/{name}.log; '
           f'sweep {name} 60 /nonexistent-problems.yaml --no-mlflow --tracking-uri sqlite:////tmp/{name}.db '
           f'> /dev/null; cat /tmp/{name}.log; rm -rf /tmp/{name}*')
    res = _run(tmp_path, job)
    assert res.returncode == 0, res.stderr
    first, second = (tmp_path / "out" / "gpu0.log").read_text().split("raytune-attn: error:")[1:3]
    assert "contradict" not in first and "nonexistent-problems.yaml" in first
    assert "--tracking-uri and --no-mlflow contradict each other" in second
