"""The final re-measure: each search's top `--top-k` configs by their rungs, plus the winners of its `--family-k`
nearest sibling searches that it did not measure, timed again with `--final-rep-ms` of runs on one GPU; the winner
comes from these (winners.py).

Searches of one family climb to the same few configs, but a budget of 24-30 trials over the Hopper space does not
always get there: in one bf16 grid, D=256 full S=16384 stopped at 440 TFLOP/s on 64x32 tiles while S=8192 had found
531 on 128x64 with 8 warps, late in both searches, too late to pass it on during the sweep. Their binaries are shared
(sizes are not specialized on), so the extra candidates cost runs, not compiles.
"""

from __future__ import annotations

import json
import logging
import math
import time

from raytune_attn.artifact import float_or_none
from raytune_attn.problem import Problem
from raytune_attn.tune import results
from raytune_attn.tune.winners import FINAL_SUFFIX

log = logging.getLogger(__name__)


def actor_per_search(actors: dict, searches) -> list:
    """Each search's benchmark actor for its once-per-search work (baselines, the final re-measure): the searches
    of an accelerator type in turn over that type's actors, so that the work spreads over its GPUs."""
    counters: dict[str, int] = {}
    out = []
    for s in searches:
        i = counters.get(s.accel, 0)
        counters[s.accel] = i + 1
        out.append(actors[s.accel][i % len(actors[s.accel])])
    return out


def _family(problem: dict) -> tuple:
    """Problems whose kernels differ only in sizes (batch, sequence lengths): one family shares good configs."""
    return tuple(problem.get(k) for k in ("hq", "hkv", "head_dim", "causal", "dtype", "varlen"))


def nearest_siblings(s, searches) -> list:
    """The other searches of s's accelerator type and problem family, nearest sequence length first (then nearest
    token count)."""
    def dist(o) -> tuple:
        q, oq = s.problem, o.problem
        return (abs(math.log2(q["seqlen_q"] / oq["seqlen_q"])),
                abs(math.log2(q["batch"] * q["seqlen_q"] / (oq["batch"] * oq["seqlen_q"]))), o.key)
    same = [o for o in searches if o is not s and o.accel == s.accel and _family(o.problem) == _family(s.problem)]
    return sorted(same, key=dist)


def config_key(row: dict) -> str:
    """A row's knob values as one string: the same config in any search's rows."""
    return json.dumps(results.row_config(row), sort_keys=True)


def _ranked(searches, rows) -> tuple[dict, dict]:
    """Per search key: its trial rows with a speed, fastest first; and the configs it measured."""
    ranked, measured = {}, {}
    for s in searches:
        key = Problem.from_dict(s.problem).key
        own = [r for r in rows
               if r["kind"] == "trial" and r["problem_key"] == key and str(r["accelerator_type"]) == s.accel]
        measured[s.key] = {config_key(r) for r in own}
        # Candidates include trials that early stopping ended: a rung of a few runs is noisy, and a config stopped
        # on one unlucky rung may still be the best; the longer re-measure decides.
        ranked[s.key] = sorted((r for r in own if r["status"] in ("ok", "stopped") and _measured(r)),
                               key=lambda r: -float(r["tflops"]))
    return ranked, measured


def _measured(row) -> bool:
    """A row that timed its config: a finite, positive speed (rows read back from Parquet hold NaN where none was
    measured, which `r.get("tflops")` took for one) and its knobs (re-measuring no knobs times the defaults)."""
    t = float_or_none(row.get("tflops"))
    return t is not None and 0 < t < math.inf and bool(results.row_config(row))


def final_candidates(s, searches, ranked, measured, top_k: int, family_k: int) -> list[tuple]:
    """(origin search or None, row) of each config search `s` re-measures: its own top-k, then its nearest
    siblings' winners it did not measure. `ranked`: search key -> its rows with a speed (`tflops`), fastest first;
    `measured`: search key -> the `config_key` of every config it ran (benchmarks/sibling_replay.py replays the
    rule). With `top_k` 0 there is no re-measure: a sibling's winner re-measured alone would beat the search's own
    best, timed only by its rungs, without a comparison."""
    if top_k == 0:
        return []
    family = []
    for o in nearest_siblings(s, searches)[:family_k]:
        win = ranked[o.key][0] if ranked[o.key] else None
        if win is not None and config_key(win) not in measured[s.key] | {config_key(r) for _, r in family}:
            family.append((o, win))
    return [(None, r) for r in ranked[s.key][:top_k]] + family


def remeasure(sweep, rows: list[dict]) -> list[dict]:
    """The final re-measure's rows (configs whose re-measure failed keep their rung results and get none)."""
    import ray

    c = sweep.plan.config
    n_rungs = len(c.rungs_ms)
    ranked, measured = _ranked(sweep.searches, rows)
    jobs = []
    # One search's candidates are all re-measured on the same GPU: the winner is picked by comparing their
    # latencies, and two GPUs of one type differ by a few percent (clocks, a neighbour's heat), as much as the
    # candidates do. Searches, not candidates, are spread over the GPUs.
    for n, (s, act) in enumerate(zip(sweep.searches, actor_per_search(sweep.cluster.actors, sweep.searches),
                                     strict=True)):
        for origin, r in final_candidates(s, sweep.searches, ranked, measured, c.top_k, c.family_k):
            cfg = results.row_config(r)
            jobs.append((s, r, origin, n, cfg, act.run.remote(s.problem, cfg, n_rungs + 1, c.final_rep_ms, True)))
    out = []
    for s, r, origin, n, cfg, f in jobs:
        try:
            m = ray.get(f)
        except Exception as e:  # noqa: BLE001 - the actor died: the config keeps its rung results
            m = {"status": "error", "reason": f"the benchmark worker failed ({type(e).__name__}: {e})"}
        if m.get("status") == "ok":
            out.append(_final_row(s, r, origin, n, cfg, m, n_rungs, sweep))
        else:  # said, not recorded: the config's rung rows stand, and a search left without any is named in summary
            log.warning("%s: the final re-measure of %s failed (%s: %s); it keeps its rung results", s.key,
                        json.dumps(cfg, sort_keys=True), m.get("status"), m.get("reason"))
    return out


def _final_row(s, r: dict, origin, n: int, cfg: dict, m: dict, n_rungs: int, sweep) -> dict:
    from raytune_attn.tune.sweep.run import meta
    from raytune_attn.tune.sweep.stack import on_host

    metrics = {"status": "ok", "reason": "final re-measure", "rung": n_rungs + 1, "tflops": m["tflops"],
               "latency_ms": m["latency_ms"], "bench_s": m.get("bench_s"), "compile_s": r.get("compile_s"),
               "timestamp": time.time(), "final_of": r["trial_id"], "gpu": m.get("gpu")}
    tid = f"{r['trial_id']}{FINAL_SUFFIX}"
    if origin is not None:  # a sibling's winner: its trial id names the config, this search's index the row
        metrics.update(reason=f"final re-measure of the winner of {origin.key}", family_of=origin.key)
        tid = f"{r['trial_id']}-for{n}{FINAL_SUFFIX}"
    return results.trial_row(s.problem, cfg, metrics, on_host(sweep.state.provenance[s.accel], m.get("host")),
                             trial_id=tid, **meta(sweep.plan))
