"""The Tune trainable: a light function trial (a sliver of a CPU) that feeds one config to the GPU actors.

    compile ahead on the node of the benchmark actor it was assigned (CompileActor: time limit, node-local cache)
    -> rung 1 through the Broker, one call: lease that actor (exclusive: the trial now holds one GPU), load the
    binary, check the output against the reference, time, release -> report -> rung 2 ... (each rung re-leases)

Each `tune.report` carries `tflops`, `latency_ms`, `rung`, `status`, `reason`, `compile_s` (this trial's wait),
`build_s` (what the config's binary cost to build, also when another trial built it) and `bench_s`, so an
ASHA scheduler over `rung` can stop a poor config after a cheap rung. A rung the Broker capped (its first runs over 10x
the best latency its problem has seen, timing.median_ms) ends the trial: it is stopped early whatever the
scheduler. An invalid config (compile error, over the compile time limit, OutOfResources, wrong or NaN output)
reports `status: invalid`, `tflops: 0` and ends; a config that kills its benchmark actor reports `status: error`
and ends, and Ray restarts the actor for the next trial.
No torch or triton is imported here: the trial process stays small and starts fast.
"""

from __future__ import annotations

import json
import time

import ray
from ray import tune

_HANDLES: dict = {}


def broker_name(accel_type: str) -> str:
    return f"broker-{accel_type}"


def _broker(namespace: str, accel: str):
    key = (namespace, accel)
    if key not in _HANDLES:
        _HANDLES[key] = ray.get_actor(broker_name(accel), namespace=namespace)
    return _HANDLES[key]


def take_config(namespace: str, deferred: dict):
    """The knobs of a trial handed out deferred (sweep/searcher.py): made by its search's actor, which may still
    be fitting its model; waiting here holds no GPU and does not block Tune's loop."""
    host = ray.get_actor(deferred["host"], namespace=namespace)
    return ray.get(host.take.remote(deferred["inner"]))


def run_trial(config: dict) -> None:
    spec = config["sweep"]
    accel, problem = config["accel"], config["problem"]
    rungs_ms = list(spec["rungs_ms"])
    trial_id = tune.get_context().get_trial_id()
    t_start = time.time()
    base = {"search": config["search"], "accelerator_type": accel, "tflops": 0.0, "latency_ms": float("nan"),
            "rung": 0, "status": "ok", "reason": "", "compile_s": 0.0, "bench_s": 0.0, "compile_ahead_s": 0.0}

    def finish(status: str, reason: str, **kw) -> None:
        tune.report({**base, **kw, "status": status, "reason": reason, "trial_wall_s": time.time() - t_start})

    cfg = config.get("config")
    if cfg is None:
        cfg = take_config(spec["namespace"], config["deferred"])
        if not isinstance(cfg, dict):
            return finish("error", f"its search had no config left to give ({cfg!r})")
        base["knobs_json"] = json.dumps(cfg)  # the rows' config: Tune's trial config holds none
    broker = _broker(spec["namespace"], accel)

    idx, compiler = ray.get(broker.assign.remote(trial_id))
    try:
        if compiler is not None:
            res = ray.get(compiler.compile.remote(problem, cfg))
            base["compile_ahead_s"] = base["compile_s"] = float(res["compile_s"])
            base["build_s"] = float(res.get("build_s", res["compile_s"]))  # its binary's build, whoever built it
            if res["status"] != "ok":
                return finish("invalid" if res["status"] == "invalid" else "error", res["reason"])
        bench_s = 0.0
        for rung, rep_ms in enumerate(rungs_ms, start=1):
            out = ray.get(broker.run.remote(idx, trial_id, problem, cfg, rung, float(rep_ms), rung == 1))
            idx = out.get("actor", idx)  # the first rung may have moved the trial to an idle GPU of its node
            if rung == 1:
                base["compile_s"] += float(out.get("compile_s", 0.0))
            bench_s += float(out.get("bench_s", 0.0))
            if out["status"] != "ok":
                return finish(out["status"], out["reason"], rung=rung - 1, bench_s=bench_s)
            tune.report({**base, "tflops": float(out["tflops"]), "latency_ms": float(out["latency_ms"]),
                         "rung": rung, "bench_s": bench_s, "rel_err": out.get("rel_err", base.get("rel_err")),
                         "capped": bool(out.get("capped")), "gpu": out.get("gpu"), "host": out.get("host"),
                         "trial_wall_s": time.time() - t_start})
            if rung == 1:
                base["rel_err"] = out.get("rel_err")
            if out.get("capped"):
                return  # over 10x the best latency seen: more rungs could not make it win (early-stopped)
    finally:
        broker.unassign.remote(idx, trial_id)
