"""The sweep's first phase, before Ray starts: every input read and checked, nothing written.

`make_plan` resolves the sweep's name and output directory (a resume reads its settings back from sweep.json, and
what its earlier drivers left from the ledger and the trial rows: resume.py), refuses a directory another sweep
holds (lock.py), loads the problem sets and the `--space` file, checks the tracking URI's form and probes a tracking
server, and checks that the output directory can be written. A mistake in any of them is one line (exit 2) within
seconds, and leaves nothing on disk: `write_plan` creates the directory and sweep.json only once all of it passed
(and once the driver holds the directory's lock).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import logging
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from raytune_attn.problem import Problem
from raytune_attn.tune.out_paths import existing_base
from raytune_attn.tune.sweep import resume, state, trust
from raytune_attn.tune.sweep.config import SweepConfig, SweepUsageError
from raytune_attn.tune.sweep.lock import check_free
from raytune_attn.tune.tracking_uri import absolute

log = logging.getLogger(__name__)
DEFAULT_PROBLEMS = {False: "standard", True: "cpu_smoke"}  # with a GPU in the cluster / without
_CLUSTER_PROBE_S = 5.0  # seconds a cluster named by --address has to accept a connection


@dataclass(frozen=True)
class Plan:
    config: SweepConfig
    name: str
    out: Path
    problems: dict  # cpu_mode (no GPU in the cluster) -> tuple[Problem, ...]
    space: object | None  # the --space file's SearchSpace; None: each accelerator type's own
    tracking_uri: str | None  # None: --no-mlflow; else absolute (a relative SQLite path resolved here)
    prior: resume.Resume = resume.Resume()  # what the sweep's earlier drivers left (a new sweep: attempt 1)
    warm: object | None = None  # --warm-start's table (a DataFrame, read and checked here); None: none given

    @property
    def tune_name(self) -> str:
        """This driver's Tune experiment under `<out>/ray/` (a resume is a new one: resume.py says why)."""
        return resume.tune_name(self.name, self.prior.attempt)

    @property
    def ledger(self) -> state.Ledger:
        return state.Ledger(self.out / resume.LEDGER_NAME)

    @property
    def namespace(self) -> str:
        return f"raytune-attn-{self.name}"

    @property
    def saved(self) -> Path:
        return self.out / "sweep.json"

    def problems_for(self, cpu_mode: bool) -> list[Problem]:
        return list(self.problems[cpu_mode])


def make_plan(config: SweepConfig) -> Plan:
    """The checked plan of a sweep; raises SweepUsageError, ValueError or FileNotFoundError naming the mistake."""
    name = config.name or ("sweep-" + _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S"))
    out = Path(config.out or Path("raytune-results") / name).expanduser().resolve()
    if out.is_dir():
        check_free(out)  # another sweep's: say so before anything else about the directory
    prior = resume.Resume()
    if config.resume:
        config, name = _resumed(config, out)
        prior = _prior(out)
    _check_out(out, name, config.resume)
    _check_cluster(config.address)
    _check_searcher(config.searcher)
    if config.warm_start and not config.resume:  # kept absolute in sweep.json: a resume may run elsewhere
        config = dataclasses.replace(config, warm_start=str(Path(config.warm_start).expanduser().resolve()))
    return Plan(config=config, name=name, out=out, problems=_problem_sets(config.problems),
                space=_space(config.space), tracking_uri=_tracking_uri(config), prior=prior,
                warm=_warm(config.warm_start))


def make_out(plan: Plan) -> None:
    """The output directory; one this creates is not writable by group or others (a resume refuses those)."""
    if not plan.out.is_dir():
        plan.out.mkdir(parents=True)
        plan.out.chmod(0o755)
    elif plan.out.stat().st_mode & 0o022 and not plan.config.resume:
        log.warning("%s is writable by group or others: a --resume will refuse it (chmod go-w %s)", plan.out,
                    plan.out)


def write_plan(plan: Plan) -> None:
    """A new sweep's sweep.json (every setting, the tracking store resolved: what `--resume` reads back) and this
    driver's `attempt` record in the ledger. Called with the output directory's lock held."""
    if not plan.config.resume:
        args = plan.config.to_json()
        args["tracking_uri"] = plan.tracking_uri
        state.write_doc(plan.saved, {"name": plan.name, "args": args})
    plan.ledger.append({"kind": "attempt", "attempt": plan.prior.attempt, "tune_name": plan.tune_name,
                        "pid": os.getpid(), "host": socket.gethostname(), "started": time.time()})


def _resumed(asked: SweepConfig, out: Path) -> tuple[SweepConfig, str]:
    """The saved sweep's settings and name, from sweep.json (checked: trust.py, state.py)."""
    saved = out / "sweep.json"
    if not saved.is_file():
        raise SweepUsageError(f"--resume: {saved} does not exist (no sweep to finish there)")
    try:
        trust.check_private(out)
        trust.check_private(saved)
        doc = state.read_doc(saved)
    except state.ResumeStateError as e:
        raise SweepUsageError(f"--resume: {e}") from None
    if not isinstance(doc.get("args"), dict) or not isinstance(doc.get("name"), str):
        raise SweepUsageError(f"--resume: {saved} holds no sweep name and settings")
    if asked.name and asked.name != doc["name"]:
        raise SweepUsageError(f"--resume --name {asked.name}: {saved} holds sweep {doc['name']!r} (give its name, or "
                              "--out alone)")
    try:
        config = dataclasses.replace(asked.resumed_from(doc["args"]), name=doc["name"])  # the name checked too
    except SweepUsageError as e:
        raise SweepUsageError(f"--resume: {saved}: {e}") from None
    changed = asked.changed_on_resume(config)
    if changed:
        raise SweepUsageError(f"--resume finishes sweep {doc['name']!r} with the settings of {saved}; these flags "
                              f"would change them: {', '.join(changed)}. Drop them, or start a new sweep (--warm-start "
                              "from this one's trials.parquet)")
    store = "nothing (--no-mlflow)" if config.no_mlflow else config.tracking_uri
    if (asked.no_mlflow and not config.no_mlflow) or (
            asked.tracking_uri and absolute(asked.tracking_uri) != config.tracking_uri):
        raise SweepUsageError(f"--resume: sweep {doc['name']!r} logs to {store} ({saved}); a resume logs there "
                              "too: drop --tracking-uri/--no-mlflow")
    return config, doc["name"]


def _prior(out: Path) -> resume.Resume:
    try:
        trust.check_private(out / resume.LEDGER_NAME)
        return resume.load(out)
    except state.ResumeStateError as e:
        raise SweepUsageError(f"--resume: {e}") from None


def _check_out(out: Path, name: str, resume: bool) -> None:
    if out.exists() and not out.is_dir():
        raise SweepUsageError(f"--out {out} is a file, not a directory")
    if not resume and ((out / "sweep.json").exists() or (out / "ray" / name).exists()):
        # A second sweep there would replace the first's sweep.json (its resume) and mix both in trials.parquet.
        raise SweepUsageError(f"{out} already holds sweep {_held_name(out, name)!r}: pass --resume to finish it, or "
                              "another --out")
    base = existing_base(out)
    if not base.is_dir() or not os.access(base, os.W_OK | os.X_OK):
        raise SweepUsageError(f"--out {out}: cannot write under {base}")


def _held_name(out: Path, default: str) -> str:
    """The name of the sweep whose sweep.json is in `out` (as far as it reads), else `default`."""
    try:
        name = state.read_doc(out / "sweep.json").get("name")
    except (state.ResumeStateError, OSError, AttributeError):
        return default
    return name if isinstance(name, str) else default


def _problem_sets(path: str | None) -> dict:
    """The given problem set for either kind of cluster, else each kind's default set."""
    from raytune_attn.tune.sweep.problems import load_problems

    if path is not None:
        given = tuple(load_problems(path))
        return {False: given, True: given}
    return {cpu: tuple(load_problems(name)) for cpu, name in DEFAULT_PROBLEMS.items()}


def _check_cluster(address: str | None) -> None:
    """A cluster `--address` names must answer before the sweep writes anything: ray.init would raise a traceback for
    `auto` with none running, and wait minutes on a closed port."""
    if address in (None, "local"):
        return
    from raytune_attn.tune.doctor import ray_cluster

    found = ray_cluster(address, timeout=_CLUSTER_PROBE_S, connect=False)
    if not found["reachable"]:
        raise SweepUsageError(f"--address {address}: {found['status']}")


def _check_searcher(name: str) -> None:
    """The searcher's module imported and its optional dependencies found before Ray starts. A missing part of the
    tune extra (scikit-optimize for gp) propagates as the ModuleNotFoundError the entry point turns into the install
    command; Optuna for tpe is named here."""
    from raytune_attn.tune.search import searcher_class

    cls = searcher_class(name)
    try:
        cls.check_dependencies()
    except ImportError as e:
        raise SweepUsageError(f"--searcher {name}: {e}") from None


def _warm(path: str | None):
    """The --warm-start table, checked (readable, a knob column, a successful row); None without the flag."""
    if not path:
        return None
    from raytune_attn.config import KNOBS
    from raytune_attn.tune.search import warm

    df = warm.read_results(path)
    warm.prior_scores(df, list(KNOBS))  # refuses a table that cannot serve, naming why
    return df


def _space(path: str | None):
    if path is None:
        return None
    from raytune_attn.tune.search.space import load_space

    return load_space(path)


def _tracking_uri(config: SweepConfig) -> str | None:
    if config.no_mlflow:
        return None
    from raytune_attn.tune.tracking_uri import check_tracking_uri, mlflow_installed, probe_server, resolve_tracking_uri

    if not mlflow_installed():  # else the logging actor would fail on it after Ray started
        raise SweepUsageError("MLflow is not installed: pip install 'raytune-attn[tune]', or pass --no-mlflow")
    uri = absolute(check_tracking_uri(resolve_tracking_uri(config.tracking_uri)))  # as this driver sees it
    probe_server(uri)  # a dead tracking server: a few seconds, before Ray starts
    return uri
