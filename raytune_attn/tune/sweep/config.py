"""The sweep's settings: one frozen `SweepConfig`, built once from the flags of `raytune-attn tune` and checked
there (types, ranges, combinations), before anything reads a file or starts Ray.

A resumed sweep takes every setting from the `sweep.json` it wrote (`resumed_from`), the tracking store included;
its own command line may only say where to run it (`RESUME_WHERE`: the Ray cluster, its CPUs, compile processes).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
from dataclasses import dataclass, fields
from pathlib import Path

from raytune_attn.tune.search import SEARCHERS

# What a resume's own command line may set, where given (not None): where it runs. Everything else, the tracking
# store included (its runs belong with the sweep's first ones), comes from sweep.json.
RESUME_WHERE = ("address", "num_cpus", "compile_workers")
RESUME_OWN = ("resume", "out", "name")  # how the resume found the sweep
_PATHS = ("problems", "space", "warm_start")  # the same file may be named another way
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_NAME_MAX = 128  # a directory name (255 bytes on most filesystems) with room for Tune's "-attempt<k>" suffixes
_ADDRESS = re.compile(r"^(auto|local|ray://\S+|[^\s:/]+:\d+)$")  # what ray.init(address=...) takes


class SweepUsageError(ValueError):
    """A user's mistake in the sweep's flags or input files: one line, exit code 2."""


def parse_rungs(text: str) -> tuple[float, ...]:
    """`--rungs 10,30,60`: milliseconds of repetitions per timing rung (SweepConfig checks the values)."""
    try:
        return tuple(float(x) for x in str(text).split(",") if x.strip())
    except ValueError:
        raise SweepUsageError(f"--rungs must be comma-separated milliseconds, got {text!r}") from None


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


@dataclass(frozen=True)
class SweepConfig:
    """Every flag of `raytune-attn tune` (same names, `-` as `_`; `--rungs` parsed into `rungs_ms`)."""

    problems: str | None = None
    searcher: str = "gp"
    budget: int | None = None
    out: str | None = None
    address: str | None = None
    name: str | None = None
    seed: int = 0
    resume: bool = False
    space: str | None = None
    tracking_uri: str | None = None
    no_mlflow: bool = False
    compile_workers: int | None = None
    compile_timeout: float = 120.0
    compile_timeout_x: float = 10.0
    no_early_stop: bool = False
    no_baselines: bool = False
    rungs_ms: tuple[float, ...] = (10.0, 30.0, 60.0)
    reduction_factor: float = 2.0
    top_k: int = 4
    final_rep_ms: float = 200.0
    family_k: int = 2
    trials_per_gpu: int | None = None
    num_cpus: int | None = None
    cpu_actors: int = 1
    no_priors: bool = False
    warm_start: str | None = None
    share_results: bool = False

    def __post_init__(self):
        object.__setattr__(self, "rungs_ms", tuple(float(r) for r in self.rungs_ms))
        for problem in _problems(self):
            raise SweepUsageError(problem)

    @property
    def rungs(self) -> str:
        """`--rungs` as given on a command line."""
        return ",".join(f"{r:g}" for r in self.rungs_ms)

    def to_json(self) -> dict:
        """The settings as sweep.json keeps them (`resumed_from` reads them back)."""
        d = dataclasses.asdict(self)
        d["rungs_ms"] = list(self.rungs_ms)
        d["rungs"] = self.rungs
        return d

    def changed_on_resume(self, resumed: SweepConfig) -> list[str]:
        """The flags this command line gives (not their defaults) with another value than the sweep it resumes:
        a resume finishes the sweep as it was started, so a `--budget` or `--searcher` of its own would be lost.
        `--tracking-uri`/`--no-mlflow` are the plan's to check (it resolves the URI)."""
        fresh = SweepConfig()
        out = []
        for f in fields(self):
            if f.name in RESUME_WHERE + RESUME_OWN + ("tracking_uri", "no_mlflow"):
                continue
            mine, theirs = getattr(self, f.name), getattr(resumed, f.name)
            if mine == getattr(fresh, f.name) or mine == theirs:
                continue
            if f.name in _PATHS and theirs and Path(mine).resolve() == Path(theirs).resolve():
                continue
            flag = _flag("rungs" if f.name == "rungs_ms" else f.name)
            if isinstance(mine, bool):
                out.append(f"{flag} (the sweep ran without it)" if mine else f"{flag} off (the sweep ran with it)")
            else:
                shown, was = (self.rungs, resumed.rungs) if f.name == "rungs_ms" else (mine, theirs)
                out.append(f"{flag} {shown} (the sweep's: {'its default' if was is None else was})")
        return out

    def resumed_from(self, saved: dict) -> SweepConfig:
        """This resume's settings: the saved sweep's (defaults where it has none), except `RESUME_WHERE` where this
        command line gives them.
        `--tracking-uri` or `--no-mlflow` on a resume must match the sweep's (checked by the plan, which resolves
        the URI)."""
        known = {f.name for f in fields(self)}
        old = {k: v for k, v in saved.items() if k in known and k not in RESUME_OWN}
        if "rungs_ms" not in old and "rungs" in saved:
            old["rungs_ms"] = parse_rungs(saved["rungs"])
        for k in RESUME_WHERE:
            if getattr(self, k) is not None:
                old[k] = getattr(self, k)
        if self.address is not None:  # a cluster it joins: the saved local cluster's size does not apply
            old["num_cpus"] = self.num_cpus
        try:  # a setting sweep.json lacks takes its default, not this command line's value
            return SweepConfig(**{k: getattr(self, k) for k in RESUME_OWN}, **old)
        except TypeError as e:  # a value of the wrong type in a checksummed file: written by another version
            raise SweepUsageError(f"--resume: the saved settings do not fit this version ({e})") from None


def _problems(c: SweepConfig):
    """Each mistake in `c`, as the one line the user sees."""
    if c.searcher not in SEARCHERS:
        yield f"--searcher must be one of {', '.join(SEARCHERS)}, got {c.searcher!r}"
    if not c.rungs_ms or any(not 0 < r < math.inf for r in c.rungs_ms):
        yield f"--rungs must be positive, finite milliseconds, got {c.rungs!r}"
    elif any(later <= r for r, later in itertools.pairwise(c.rungs_ms)):
        # ASHA gives the configs it keeps more time: a later rung no longer than the one before measures a survivor
        # no better than the rung that kept it did.
        yield f"--rungs must increase (each rung times its configs longer than the one before), got {c.rungs!r}"
    at_least = {"budget": 1, "seed": 0, "family_k": 0, "top_k": 0, "compile_workers": 0, "trials_per_gpu": 1,
                "num_cpus": 1, "cpu_actors": 1}
    for name, low in at_least.items():
        v = getattr(c, name)
        if v is not None and v < low:
            yield f"{_flag(name)} must be >= {low}, got {v}"
    # Finite too: a timing's repetitions and a compile's deadline are computed from them (an infinite one fails
    # every trial's last rung, or the final re-measure, after Ray started).
    for name in ("compile_timeout", "final_rep_ms"):
        if not 0 < getattr(c, name) < math.inf:
            yield f"{_flag(name)} must be > 0 and finite, got {getattr(c, name)}"
    if not 0 <= c.compile_timeout_x < math.inf:
        yield f"--compile-timeout-x must be >= 0 and finite (0: only --compile-timeout), got {c.compile_timeout_x}"
    if not 1 < c.reduction_factor < math.inf:
        yield (f"--reduction-factor must be > 1 and finite (ASHA keeps 1 in that many configs per rung), got "
               f"{c.reduction_factor}")
    if c.name is not None and not (_NAME.match(c.name) and len(c.name) <= _NAME_MAX):
        yield (f"--name must be at most {_NAME_MAX} letters, digits, '.', '_' or '-' (it names a directory, a Ray "
               f"namespace and an MLflow experiment), got {c.name if len(c.name) <= 60 else c.name[:60] + '...'!r}")
    if c.resume and not (c.name or c.out):
        yield "--resume needs --name or --out of the sweep to finish"
    if c.address is not None and not _ADDRESS.match(c.address):
        yield f"--address must be auto, local, HOST:PORT or ray://HOST:PORT, got {c.address!r}"
    if c.address and c.num_cpus is not None:
        yield "--num-cpus sizes the local cluster this command starts: it does nothing with --address"
    if c.no_priors and c.searcher != "gp":
        yield f"--no-priors switches off the GP's space-file priors: it does nothing with --searcher {c.searcher}"
    if c.share_results and c.searcher != "gp":
        yield (f"--share-results gives the GP's model the other problems' results: it does nothing with --searcher "
               f"{c.searcher}")
    if c.no_mlflow and c.tracking_uri:
        yield "--tracking-uri and --no-mlflow contradict each other: give one"
