"""The compile actor's logic (sweep/compile_actor.py `_Compiler`) without Ray: urgent builds before speculative
ones, and the per-node compile limit."""

P1 = {"batch": 1, "hq": 2, "hkv": 2, "seqlen_q": 64, "seqlen_k": 64, "head_dim": 32, "causal": True,
      "dtype": "float32", "varlen": False}


def time_sleep(s):
    import time

    time.sleep(s)


class _SleepyBuilds:
    """Stands in for the simulated GPU's compile: each config sleeps its "s" seconds and is logged in order."""

    def __init__(self):
        self.order = []

    def compile(self, config, spec, timeout_s=float("inf")):
        import time

        self.order.append(config["name"])
        if config["s"] > timeout_s:
            time.sleep(timeout_s)
            return {"status": "invalid", "reason": f"compile exceeded {timeout_s:.0f} s", "compile_s": timeout_s}
        time.sleep(config["s"])
        return {"status": "ok", "reason": "", "compile_s": config["s"]}


def test_compiler_serves_a_waiting_trial_before_speculative_builds_and_upgrades_a_queued_one():
    import threading

    from raytune_attn.tune.sweep.compile_actor import _Compiler

    c = _Compiler(1, 10.0)
    c._sim = _SleepyBuilds()
    prob = {**P1, "head_dim": 64}
    cfg = lambda name, s: {"name": name, "s": s}  # noqa: E731
    out = {}

    def ask(name, s, speculative):
        out[name] = c.compile(prob, cfg(name, s), speculative)

    threads = [threading.Thread(target=ask, args=a) for a in
               (("spec-a", 0.3, True), ("spec-b", 0.01, True), ("spec-c", 0.01, True))]
    for t in threads:
        t.start()
        time_sleep(0.05)
    trial = threading.Thread(target=ask, args=("trial", 0.01, False))
    upgrade = threading.Thread(target=ask, args=("spec-c", 0.01, False))  # a trial now wants queued spec-c
    trial.start()
    time_sleep(0.05)
    upgrade.start()
    for t in [*threads, trial, upgrade]:
        t.join(5)
    order = c._sim.order
    assert order[0] == "spec-a" and set(order[1:3]) == {"trial", "spec-c"} and order[3] == "spec-b"
    assert order.count("spec-c") == 1 and out["spec-c"]["build_s"] == 0.01


def test_compiler_cuts_a_compile_at_a_multiple_of_the_nodes_median_once_it_has_seen_enough(monkeypatch):
    """Before LIMIT_MIN_BUILDS cold compiles a config gets --compile-timeout; after, `timeout_x` times their median
    (at least LIMIT_FLOOR_S): what took 3 s before is cut at 2 s once the node's median compile is 0.1 s."""
    from raytune_attn.tune.measure import compile_pool
    from raytune_attn.tune.sweep.compile_actor import _Compiler

    monkeypatch.setattr(compile_pool, "LIMIT_FLOOR_S", 2.0)  # seconds, not the product's 30: the test sleeps them
    monkeypatch.setattr(compile_pool, "COLD_S", 0.05)
    c = _Compiler(1, 10.0, timeout_x=5.0)
    c._sim = _SleepyBuilds()
    prob = {**P1, "head_dim": 64}
    slow = c.compile(prob, {"name": "early-slow", "s": 3.0})
    assert slow["status"] == "ok"  # the median is not known yet: the 10 s limit
    for k in range(compile_pool.LIMIT_MIN_BUILDS):
        assert c.compile(prob, {"name": f"typical-{k}", "s": 0.1})["status"] == "ok"
    late = c.compile(prob, {"name": "late-slow", "s": 3.0})  # limit max(2, 5 x 0.1) = 2 s
    assert late["status"] == "invalid" and late["reason"] == "compile exceeded 2 s"
    assert c.compile(prob, {"name": "late-slow", "s": 3.0})["reason"] == "compile exceeded 2 s"  # built once
    assert c._sim.order.count("late-slow") == 1
    off = _Compiler(1, 10.0, timeout_x=0.0)
    off._sim, off._build_s = _SleepyBuilds(), list(c._build_s)
    assert off.compile(prob, {"name": "late-slow", "s": 3.0})["status"] == "ok"
