"""The sweep's first phase, before Ray starts: every input read and checked, nothing written.

`make_plan` resolves the sweep's name and output directory (a resume reads its settings back from sweep.json),
loads the problem sets and the `--space` file, and checks the tracking URI's form and that the output directory
can be written. A mistake in any of them is one line (exit 2) within a second or two, and leaves nothing on disk:
`write_plan` creates the directory and sweep.json only once all of it passed.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from raytune_attn.problem import Problem
from raytune_attn.tune.sweep.config import SweepConfig, SweepUsageError

log = logging.getLogger(__name__)
DEFAULT_PROBLEMS = {False: "standard", True: "cpu_smoke"}  # with a GPU in the cluster / without


@dataclass(frozen=True)
class Plan:
    config: SweepConfig
    name: str
    out: Path
    problems: dict  # cpu_mode (no GPU in the cluster) -> tuple[Problem, ...]
    space: object | None  # the --space file's SearchSpace; None: each accelerator type's own
    tracking_uri: str | None  # None: --no-mlflow

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
    if config.resume:
        config, name = _resumed(config, out)
    _check_out(out, name, config.resume)
    return Plan(config=config, name=name, out=out, problems=_problem_sets(config.problems),
                space=_space(config.space), tracking_uri=_tracking_uri(config))


def write_plan(plan: Plan) -> None:
    """The output directory, and a new sweep's sweep.json (the settings `--resume` reads back)."""
    plan.out.mkdir(parents=True, exist_ok=True)
    if not plan.config.resume:
        plan.saved.write_text(json.dumps({"name": plan.name, "args": plan.config.to_json()}, indent=1))


def _resumed(config: SweepConfig, out: Path) -> tuple[SweepConfig, str]:
    saved = out / "sweep.json"
    if not saved.is_file():
        raise SweepUsageError(f"--resume: {saved} does not exist (no sweep to finish there)")
    try:
        old = json.loads(saved.read_text())
        return config.resumed_from(old["args"]), str(old["name"])
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise SweepUsageError(f"--resume: {saved} is not a sweep's settings ({type(e).__name__}: {e})") from None


def _check_out(out: Path, name: str, resume: bool) -> None:
    if out.exists() and not out.is_dir():
        raise SweepUsageError(f"--out {out} is a file, not a directory")
    if not resume and (out / "ray" / name).exists():
        raise SweepUsageError(f"{out} already holds sweep {name!r}: pass --resume to finish it, or another --name")
    base = out
    while not base.exists():
        base = base.parent
    if not base.is_dir() or not os.access(base, os.W_OK | os.X_OK):
        raise SweepUsageError(f"--out {out}: cannot write under {base}")


def _problem_sets(path: str | None) -> dict:
    """The given problem set for either kind of cluster, else each kind's default set."""
    from raytune_attn.tune.sweep.problems import load_problems

    if path is not None:
        given = tuple(load_problems(path))
        return {False: given, True: given}
    return {cpu: tuple(load_problems(name)) for cpu, name in DEFAULT_PROBLEMS.items()}


def _space(path: str | None):
    if path is None:
        return None
    from raytune_attn.tune.search.space import load_space

    return load_space(path)


def _tracking_uri(config: SweepConfig) -> str | None:
    if config.no_mlflow:
        return None
    from raytune_attn.tune.tracking_uri import check_tracking_uri, resolve_tracking_uri

    return check_tracking_uri(resolve_tracking_uri(config.tracking_uri))  # as this driver sees it
