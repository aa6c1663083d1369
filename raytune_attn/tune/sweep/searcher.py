"""One Tune experiment for the whole sweep, one search per (accelerator type, problem) inside it.

`SweepSearcher` owns one `make_searcher(...)` searcher per search and interleaves their suggestions, so the GPUs
of every accelerator type stay busy with all problems' trials at once. A trial's config is
`{"search": key, "accel": X, "problem": {...}, "config": {knobs}, "sweep": {...}}`; results go back to the search
that suggested it. When Tune asks for a trial and no search's next config is computed yet (GP fits run in the search
actors), the trial is handed out at once with `"deferred": {"host", "inner"}` in place of `"config"`: its process
takes the config from its search's actor when it starts (`take_config`). Tune then always has a trial to start when
one ends, and keeps that trial's process for it: a `None` here made Tune stop finished trials' processes and start
new ones (about 3 CPU-seconds each) once the suggestions came, and the ones it started and then did not need
delayed Tune's end by up to 5 s while they booted.
`PerSearchScheduler` keeps one ASHA scheduler per search, so early stopping only ever compares a config with configs
of the same problem on the same accelerator type.

The searcher saves no checkpoint for Tune (`save_to_dir` writes nothing): each trial handed out is a line of the
sweep's ledger (state.py) and each finished one a results row, and a resume rebuilds the searches from those
(resume.py) in a new Tune experiment, instead of unpickling Tune's.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import ray
from ray import cloudpickle
from ray.tune.schedulers import AsyncHyperBandScheduler, FIFOScheduler, TrialScheduler
from ray.tune.search import Searcher

from raytune_attn.tune.results import told_status
from raytune_attn.tune.sweep import process_cache


def search_key(accel: str, problem_key: str) -> str:
    return f"{accel}/{problem_key}"


@dataclass
class Search:
    key: str
    accel: str
    problem: dict
    searcher: Searcher
    budget: int
    max_concurrent: int
    suggested: int = 0
    completed: int = 0
    live: set = field(default_factory=set)  # Tune trial ids in flight
    finished: bool = False  # the inner searcher ran out of candidates
    host: Any = None  # where `searcher` runs: _Local (this process) or _Remote (a SearchHost actor)
    pending: tuple | None = None  # (inner id, _Ask) of a suggestion asked for and not yet handed out
    asked: int = 0
    related: list = field(default_factory=list)  # other searches' rows (share_results) not yet given to `searcher`

    @property
    def spent(self) -> bool:
        """Nothing more to suggest: out of candidates or budget."""
        return self.finished or self.suggested >= self.budget


class _Ready:
    def __init__(self, value):
        self.value = value

    def ready(self) -> bool:
        return True


class _Local:
    """The searcher in the driver's process: each call runs at once (tests, replay-sized sweeps)."""

    def __init__(self, searcher):
        self.searcher = searcher

    def ask(self, inner_id: str):
        return _Ready(self.searcher.suggest(inner_id))

    def tell(self, inner_id: str, result: dict, error: bool) -> None:
        self.searcher.on_trial_complete(inner_id, result, error=error)

    def cancel(self, inner_id: str) -> None:
        self.searcher.cancel(inner_id)

    def relate(self, rows: list[dict]) -> None:
        tell_related(self.searcher, rows)


def tell_related(searcher, rows: list[dict]) -> None:
    """Give a searcher the sweep's other problems' results (gp.GPSearcher.add_related); other searchers ignore them."""
    add = getattr(searcher, "add_related", None)
    if add is not None:
        add(rows)


def related_row(problem_key: str, config: dict, result: dict, metric: str = "tflops") -> dict:
    """A finished trial of problem `problem_key` as a row for the other searches' `add_related`: its knobs, the
    metric and the status its searcher was told (results.told_status; a failed trial's value is dropped)."""
    status = told_status(result.get("status", "ok"))
    return {"problem_key": problem_key, **config, "status": status,
            metric: result.get(metric) if status == "ok" else None}


class _Pending:
    def __init__(self, ref):
        self.ref = ref
        self.since = time.monotonic()  # when asked: the longest-fitting search is the likeliest to answer next

    def ready(self) -> bool:
        return bool(ray.wait([self.ref], timeout=0)[0])

    @property
    def value(self):
        return ray.get(self.ref)


def host_name(index: int) -> str:
    """The Ray name of the search actor of the sweep's `index`-th search (in the sweep's namespace): a trial handed
    out deferred finds it by this name, also after a resume, whose new actor of that search takes the same name."""
    return f"search-host-{index}"


def _host_actor(name: str, **kwargs):
    """A SearchHost actor on this node (the driver's: its calls are the Tune loop's), named `name`."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=True)
    cls = ray.remote(num_cpus=0, max_restarts=0, concurrency_groups={"take": 1})(SearchHost)
    return cls.options(scheduling_strategy=here, name=name).remote(**kwargs), name


def start_hosts(n: int) -> list:
    """`n` SearchHost actors started now, without a searcher, for a SweepSearcher's `hosts`.

    A search actor's start is a process, then numpy, scipy, scikit-learn and scikit-optimize imported. Started right
    after Ray, it overlaps the GPU actors' (torch, the CUDA context), and each then only unpickles its searcher
    (`load`): in a 15-search sweep all 15 had their first suggestion 0.2 s after the GPU actors were up. The i-th,
    (actor, name), serves the sweep's i-th search."""
    return [_host_actor(host_name(i)) for i in range(n)]


class _Remote:
    """The searcher in its own process (a `SearchHost` actor), asked one suggestion ahead: the GP's model fits
    (0.3-1.5 s each) then run beside the Tune loop instead of inside it, and 15 searches fit in parallel.
    Calls from this driver reach the actor in order, so a suggestion asked after a result was told sees it (and
    a pre-started host's `load` runs before the first suggestion)."""

    def __init__(self, searcher, name: str, speculator=None, host=None):
        if host is None:
            self.actor, self.name = _host_actor(name, searcher_pickle=cloudpickle.dumps(searcher),
                                                speculator=speculator)
        else:
            self.actor, self.name = host
            self.actor.load.remote(cloudpickle.dumps(searcher), speculator)

    def ask(self, inner_id: str):
        return _Pending(self.actor.suggest.remote(inner_id))

    def tell(self, inner_id: str, result: dict, error: bool) -> None:
        self.actor.tell.remote(inner_id, result, error)

    def cancel(self, inner_id: str) -> None:
        self.actor.cancel.remote(inner_id)

    def relate(self, rows: list[dict]) -> None:
        self.actor.relate.remote(rows)


class SearchHost:
    """Holds one search's searcher in a Ray actor (see _Remote)."""

    def __init__(self, searcher_pickle: bytes | None = None, speculator=None):
        self.searcher, self.speculator = None, None
        # `take` runs on its own thread (concurrency group "take"), beside the calls from the driver, which stay in
        # order on the actor's main thread: a trial waits for its config only, not behind the next fit.
        self._lock = threading.Lock()
        self._made: dict[str, threading.Event] = {}
        if searcher_pickle is None:
            # Started ahead of its searcher (start_hosts): import what unpickling a GP searcher needs now.
            import raytune_attn.tune.search.gp  # noqa: F401
        else:
            self.load(searcher_pickle, speculator)

    def load(self, searcher_pickle: bytes, speculator=None) -> None:
        # Shipped as a pickle: Ray would hand the searcher's numpy arrays over read-only (zero-copy).
        self.searcher = cloudpickle.loads(searcher_pickle)
        self.speculator = speculator  # prefetch.Speculator: compiles what this search is about to ask for

    def _event(self, inner_id: str) -> threading.Event:
        with self._lock:
            return self._made.setdefault(inner_id, threading.Event())

    def suggest(self, inner_id: str):
        cfg = self.searcher.suggest(inner_id)
        self._event(inner_id).set()
        if self.speculator is not None and isinstance(cfg, dict):
            likely = getattr(self.searcher, "likely_next", None)
            try:
                self.speculator.submit(cfg, likely() if likely else [])
            except Exception:  # noqa: BLE001 - compiling ahead is an optimization: never fail a suggestion on it
                pass
        return cfg

    def tell(self, inner_id: str, result: dict, error: bool) -> None:
        self.searcher.on_trial_complete(inner_id, result, error=error)
        with self._lock:
            self._made.pop(inner_id, None)

    def cancel(self, inner_id: str) -> None:
        self.searcher.cancel(inner_id)

    def relate(self, rows: list[dict]) -> None:
        tell_related(self.searcher, rows)

    def get_state(self) -> dict:
        """The searcher's state (Searcher.get_state: what it was told), after the calls made before this one."""
        return self.searcher.get_state()

    @ray.method(concurrency_group="take")
    def take(self, inner_id: str, timeout_s: float = 600.0):
        """The config suggested as `inner_id`, for the trial it was handed to deferred (see the module doc). The
        driver asked for it before handing the trial out: wait until it is made (or is already)."""
        searcher = self.searcher
        cfg = searcher.config_of(inner_id) if searcher is not None else None
        if cfg is None and self._event(inner_id).wait(timeout_s):
            cfg = self.searcher.config_of(inner_id)
        with self._lock:
            self._made.pop(inner_id, None)
        return cfg



class SweepSearcher(Searcher):
    """`remote=True` (the driver) runs each search's searcher in its own actor and asks it one suggestion ahead;
    `remote=False` runs them in this process, each call at once. `ledger` (state.Ledger), when given, gets a line per
    trial handed out, tagged with `attempt` (the driver's run of the sweep). `share_results`: each finished trial
    also goes to the other searches of its accelerator type (`related_row`, gp.GPSearcher.add_related), each search
    getting the rows that came since its last suggestion right before its next."""

    def __init__(self, searches: list[Search], sweep_spec: dict, metric: str = "tflops", mode: str = "max",
                 remote: bool = False, speculators: dict | None = None, hosts: list | None = None,
                 ledger=None, attempt: int = 1, share_results: bool = False):
        super().__init__(metric=metric, mode=mode)
        self.share_results = share_results
        self.ledger, self.attempt = ledger, attempt
        self.hosts = list(hosts or [])  # pre-started SearchHost actors (start_hosts), the i-th for the i-th search
        self.speculators = dict(speculators or {})  # search key -> prefetch.Speculator (remote hosts only)
        self.searches = {s.key: s for s in searches}
        self.order = [s.key for s in searches]
        self.sweep_spec = dict(sweep_spec)
        self.remote = remote
        self.trial_search: dict[str, str] = {}
        self.inner_id: dict[str, str] = {}  # Tune trial id -> the id its search's searcher knows it by
        # Tune trial id -> the ask of a config handed out deferred, its knobs once the trial is complete: Tune tells
        # the searcher before its callbacks, and the results row of a trial that never reported its knobs needs them.
        self.deferred: dict[str, Any] = {}
        self._rr = 0

    def __getstate__(self):
        # Tune pickles the searcher with the experiment: actor handles and pending asks do not outlive the driver.
        state = self.__dict__.copy()
        state["searches"] = {k: Search(**{**s.__dict__, "host": None, "pending": None})
                             for k, s in self.searches.items()}
        state["speculators"] = {}
        state["hosts"] = []
        state["deferred"] = {}
        return state

    def save_to_dir(self, checkpoint_dir: str, session_str: str = "default") -> None:
        """Nothing: the ledger and the rows are the sweep's state (module doc); Tune's loop is not held for it."""

    def restore_from_dir(self, checkpoint_dir: str) -> None:
        raise RuntimeError("a sweep resumes from its ledger and rows (sweep/resume.py), not from Tune's checkpoint")

    def set_search_properties(self, metric, mode, config, **spec) -> bool:
        return True

    @property
    def total_budget(self) -> int:
        return sum(s.budget for s in self.searches.values())

    def _open(self, s: Search) -> bool:
        return not s.spent and len(s.live) < s.max_concurrent

    def _host(self, s: Search):
        if s.host is None:
            if self.remote:
                i = self.order.index(s.key)
                s.host = _Remote(s.searcher, host_name(i), self.speculators.get(s.key),
                                 self.hosts[i] if i < len(self.hosts) else None)
            else:
                s.host = _Local(s.searcher)
        return s.host

    def _ask(self, s: Search) -> None:
        if s.related:
            # What the other searches finished since the last ask, in one call: a row per trial and search would be
            # n - 1 actor calls per trial. Calls reach the actor in order, so this suggestion sees them, as the GP
            # reads related rows only when it picks.
            self._host(s).relate(s.related)
            s.related = []
        s.asked += 1
        inner = f"{s.key}#{s.asked}"
        s.pending = (inner, self._host(s).ask(inner))

    def start(self) -> None:
        """Start every search's host and ask its first suggestion now (before Tune asks): with remote hosts not
        started ahead (start_hosts), their processes start and import the GP stack while Tune starts."""
        for s in self.searches.values():
            if self._open(s) and s.pending is None:
                self._ask(s)

    def wait_ready(self, timeout_s: float) -> int:
        """Wait until every search's first suggestion (asked by `start`) is computed, or `timeout_s`; returns how
        many are still computing (Tune skips those until they are)."""
        refs = [s.pending[1].ref for s in self.searches.values() if s.pending and isinstance(s.pending[1], _Pending)]
        if not refs:
            return 0
        _, rest = ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
        return len(rest)

    def _done(self) -> bool:
        return all(s.spent for s in self.searches.values())

    def suggest(self, trial_id: str):
        if self._done():
            return Searcher.FINISHED
        # Searches of one accelerator type share its GPUs: hand out in turn, one suggestion at a time, so that
        # each search keeps at most its own share of trials in flight (a search's concurrency is its GPUs' share).
        n = len(self.order)
        late = None  # of the open searches whose next config is still being made, the one asked longest ago
        for k in range(n):
            s = self.searches[self.order[(self._rr + k) % n]]
            if not self._open(s):
                continue
            if s.pending is None:
                self._ask(s)
            inner, ask = s.pending
            if not ask.ready():
                if late is None or getattr(ask, "since", 0.0) < late[1]:
                    late = (k, getattr(ask, "since", 0.0))
                continue  # its model is still fitting: another search's trial goes first
            cfg = ask.value
            if cfg == Searcher.FINISHED:
                s.pending, s.finished = None, True
                continue
            if cfg is None:
                s.pending = None
                continue
            return self._hand_out(trial_id, s, k, {"config": dict(cfg)})
        if late is not None and self.remote:
            # No search has a config ready: hand the late one's out deferred (the module doc says why). Its trial
            # holds a slot until the config is made, so pick the search whose model has been fitting longest.
            k = late[0]
            s = self.searches[self.order[(self._rr + k) % n]]
            inner, ask = s.pending
            self.deferred[trial_id] = ask
            return self._hand_out(trial_id, s, k, {"deferred": {"host": s.host.name, "inner": inner}})
        if self._done():
            return Searcher.FINISHED
        return None

    def _hand_out(self, trial_id: str, s: Search, k: int, what: dict) -> dict:
        inner, _ = s.pending
        s.pending = None
        self._rr = (self._rr + k + 1) % len(self.order)
        s.suggested += 1
        s.live.add(trial_id)
        self.trial_search[trial_id] = s.key
        self.inner_id[trial_id] = inner
        if self.ledger is not None:  # before Tune starts it: a driver killed from here on leaves this line
            self.ledger.append({"kind": "trial", "attempt": self.attempt, "trial_id": trial_id, "search": s.key,
                                "accel": s.accel, "problem": dict(s.problem), "inner": inner,
                                "config": what.get("config")})
        if self.remote and self._open(s):
            self._ask(s)  # the next one, computed while this trial runs
        return {"search": s.key, "accel": s.accel, "problem": dict(s.problem), **what, "sweep": dict(self.sweep_spec)}

    @property
    def n_deferred(self) -> int:
        return len(self.deferred)

    def config_of(self, trial_id: str) -> dict | None:
        """The knobs of a trial handed out deferred (its search actor made them); None when unknown here."""
        ask = self.deferred.get(trial_id)
        if ask is None or isinstance(ask, dict):
            return ask
        try:
            cfg = ask.value
        except ray.exceptions.RayError:  # its search actor died: the trial errors on its own
            return None
        return dict(cfg) if isinstance(cfg, dict) else None

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        key = self.trial_search.get(trial_id)
        if key is None and result and isinstance(result.get("config"), dict):
            key = result["config"].get("search")
        s = self.searches.get(key)
        if s is None:
            return
        if trial_id in s.live:
            s.live.discard(trial_id)
            s.completed += 1
        inner = dict(result or {})
        if trial_id in self.deferred:
            self.deferred[trial_id] = self.config_of(trial_id) or {}
        if isinstance(inner.get("config"), dict):
            # The searcher knows the trial by its inner id; a deferred trial's config holds no knobs.
            inner["config"] = inner["config"].get("config") or self.config_of(trial_id) or {}
        self._host(s).tell(self.inner_id.pop(trial_id, trial_id), inner, error)
        if self.share_results and isinstance(inner.get("config"), dict) and inner["config"]:
            told = {**inner, "status": "error"} if error else inner
            row = related_row(s.key[len(s.accel) + 1:], inner["config"], told, self.metric)
            for other in self.searches.values():
                if other.accel == s.accel and other.key != s.key and not other.spent:
                    other.related.append(row)  # given before its next suggestion (_ask)


class PerSearchScheduler(FIFOScheduler):
    """ASHA per search (time_attr "rung"); FIFO order for starting trials."""

    def __init__(self, max_t: int, grace_period: int = 1, reduction_factor: float = 2, metric: str = "tflops",
                 mode: str = "max", keep_processes: int = 0):
        super().__init__()
        self._metric, self._mode = metric, mode
        self.keep_processes = int(keep_processes)
        self._kept_for = None  # id of the controller whose cache was widened (a restored sweep has a new one)
        self.opts = dict(time_attr="rung", metric=metric, mode=mode, max_t=max_t, grace_period=grace_period,
                         reduction_factor=reduction_factor)
        self.asha: dict[str, AsyncHyperBandScheduler] = {}

    def set_search_properties(self, metric, mode, **spec) -> bool:
        return True

    def _for(self, trial) -> AsyncHyperBandScheduler:
        key = trial.config.get("search", "")
        if key not in self.asha:
            self.asha[key] = AsyncHyperBandScheduler(**self.opts)
        return self.asha[key]

    def on_trial_add(self, tune_controller, trial):
        if self.keep_processes and self._kept_for != id(tune_controller):
            # Room in Tune's cache for a finished trial's process per trial in flight (process_cache.py says why).
            process_cache.widen(tune_controller, trial.placement_group_factory, self.keep_processes)
            self._kept_for = id(tune_controller)
        self._for(trial).on_trial_add(tune_controller, trial)

    def on_trial_result(self, tune_controller, trial, result):
        if result.get("status", "ok") != "ok":
            return TrialScheduler.CONTINUE  # a failed config ends by itself; keep it out of the rung statistics
        return self._for(trial).on_trial_result(tune_controller, trial, result)

    def on_trial_complete(self, tune_controller, trial, result):
        if (result or {}).get("status", "ok") != "ok":
            self._for(trial).on_trial_remove(tune_controller, trial)  # failures are not rung statistics
        else:
            self._for(trial).on_trial_complete(tune_controller, trial, result)

    def on_trial_remove(self, tune_controller, trial):
        self._for(trial).on_trial_remove(tune_controller, trial)

    def on_trial_error(self, tune_controller, trial):
        self._for(trial).on_trial_error(tune_controller, trial)

    def debug_string(self) -> str:
        return f"ASHA per search over rungs ({len(self.asha)} searches)"

