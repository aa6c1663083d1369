"""The lease broker (sweep/broker.py) without a Ray cluster: which GPU a rung goes to, how deep each GPU's queue is,
the latency cap, and which call a crash is blamed on."""

# Problems are opaque to the broker: it keys its latency cap by them and hands them to the benchmark actor.
PA = {"problem": "a"}
PB = {"problem": "b"}


class _FakeBench:
    """A BenchActor handle whose `run.remote(...)` is awaitable and takes `hold` seconds."""

    def __init__(self, name, hold=0.0):
        self.name, self.hold, self.run = name, hold, self

    def remote(self, problem, config, rung, rep_ms, check, cap_ms=None):
        import asyncio

        async def go():
            await asyncio.sleep(self.hold)
            ms = float(config.get("ms", 1.0))
            return {"status": "ok", "rung": rung, "ran_on": self.name, "compile_s": 0.0, "bench_s": 0.0,
                    "latency_ms": ms, "cap_ms": cap_ms, "capped": cap_ms is not None and ms > cap_ms}

        return go()


def test_broker_moves_a_compiled_trial_to_an_idle_gpu_of_its_node_only():
    import asyncio

    from raytune_attn.tune.sweep.broker import Broker

    async def scenario(nodes):
        b = Broker.__ray_actor_class__([_FakeBench("g0", hold=0.2), _FakeBench("g1")], [None, None], nodes)
        i1, _ = await b.assign("t1")
        i2, _ = await b.assign("t2")
        i3, _ = await b.assign("t3")  # least loaded: actors 0, 1, 0
        assert (i1, i2, i3) == (0, 1, 0)
        busy = asyncio.ensure_future(b.run(0, "t1", {}, {}, 1, 1.0, True))  # holds GPU 0 for 0.2 s
        await asyncio.sleep(0.01)
        out = await b.run(i3, "t3", {}, {}, 1, 1.0, True)  # t3 was bound to the busy GPU 0 before compiling
        later = await b.run(out["actor"], "t3", {}, {}, 2, 1.0, False)  # both free: it stays where rung 1 ran
        await busy
        return out, later, list(b.assigned)

    out, later, assigned = asyncio.run(scenario(["n", "n"]))
    assert out["actor"] == 1 and out["ran_on"] == "g1" and later["ran_on"] == "g1" and assigned == [1, 2]
    out, _, assigned = asyncio.run(scenario(["n", "m"]))  # another node: its cache lacks the binary, stay
    assert out["actor"] == 0 and out["ran_on"] == "g0" and assigned == [2, 1]


def test_broker_sends_a_rung_to_the_gpu_of_its_node_whose_slot_frees_first():
    import asyncio
    import time

    from raytune_attn.tune.sweep.broker import DEPTH, Broker

    async def scenario():
        slow, fast = _FakeBench("g0", hold=0.5), _FakeBench("g1", hold=0.05)
        b = Broker.__ray_actor_class__([slow, fast], [None, None], ["n", "n"])
        for k in range(4):
            await b.assign(f"t{k}")  # actors 0, 1, 0, 1
        # Both GPUs full: DEPTH calls each (GPU 0's take 0.5 s, GPU 1's 0.05 s).
        held = [asyncio.ensure_future(b.run(k % 2, f"h{k}", {}, {}, 1, 1.0, False)) for k in range(2 * DEPTH)]
        await asyncio.sleep(0.01)
        assert [len(h) for h in b.holders] == [DEPTH, DEPTH]
        t0 = time.monotonic()
        out = await b.run(0, "t0", {}, {}, 2, 1.0, False)  # a later rung of a trial on GPU 0
        waited = time.monotonic() - t0
        await asyncio.gather(*held)
        return out, waited, list(b.assigned)

    out, waited, assigned = asyncio.run(scenario())
    # It ran on GPU 1 as soon as one of GPU 1's calls ended, not after GPU 0's long ones; its assignment moved.
    assert out["actor"] == 1 and out["ran_on"] == "g1" and waited < 0.3
    assert assigned == [1, 3]


def test_broker_caps_a_rung_at_ten_times_the_problems_best_latency():
    import asyncio

    from raytune_attn.tune.sweep.broker import CAP_FACTOR, CAP_FLOOR_MS, Broker

    async def scenario():
        b = Broker.__ray_actor_class__([_FakeBench("g0")], [None], ["n"])
        first = await b.run(0, "t1", PA, {"ms": 4.0}, 1, 1.0, True)  # nothing measured yet: no cap
        slow = await b.run(0, "t2", PA, {"ms": 100.0}, 1, 1.0, True)
        other = await b.run(0, "t3", PB, {"ms": 100.0}, 1, 1.0, True)  # another problem has its own best
        better = await b.run(0, "t4", PA, {"ms": 0.05}, 1, 1.0, True)
        after = await b.run(0, "t5", PA, {"ms": 5.0}, 1, 1.0, True)
        return first, slow, other, better, after, await b.firsts()

    first, slow, other, better, after, firsts = asyncio.run(scenario())
    assert first["cap_ms"] is None and other["cap_ms"] is None
    assert slow["cap_ms"] == CAP_FACTOR * 4.0 and slow["capped"]
    assert better["cap_ms"] == CAP_FACTOR * 4.0 and not better["capped"]
    assert after["cap_ms"] == CAP_FLOOR_MS and after["capped"]  # 10 x 0.05 ms is under the floor
    assert firsts["capped"] == 2


class _SerialBench:
    """A BenchActor handle that, like the real actor, answers its calls one at a time in the order sent; a config
    with `crash` kills it: that call and every call queued behind it fail as with a dead actor, and the actor is
    back (info answers) after `restart_s`."""

    def __init__(self, hold=0.05, restart_s=0.05):
        import asyncio

        self.hold, self.restart_s = hold, restart_s
        self.log: list[tuple] = []  # (event, config name, time)
        self.dead_until = 0.0
        self._lock = asyncio.Lock()
        self._gen = 0
        bench = self

        class _Run:
            def remote(self, problem, config, rung, rep_ms, check, cap_ms=None):
                return bench._run(config)

        class _Info:
            def remote(self):
                return bench._info()

        self.run, self.info = _Run(), _Info()

    async def _info(self):
        import asyncio
        import time

        import ray

        if time.monotonic() < self.dead_until:
            raise ray.exceptions.ActorUnavailableError("restarting", None)
        await asyncio.sleep(0)
        return {}

    async def _run(self, config):
        import asyncio
        import time

        import ray

        gen = self._gen  # the incarnation this call was sent to
        self.log.append(("sent", config["name"], time.monotonic()))
        async with self._lock:
            if gen != self._gen or time.monotonic() < self.dead_until:
                raise ray.exceptions.ActorDiedError()  # queued on the incarnation that died
            self.log.append(("start", config["name"], time.monotonic()))
            await asyncio.sleep(self.hold)
            if config.get("crash"):
                self._gen += 1
                self.dead_until = time.monotonic() + self.restart_s
                raise ray.exceptions.ActorDiedError()
            self.log.append(("end", config["name"], time.monotonic()))
            return {"status": "ok", "compile_s": 0.0, "bench_s": self.hold, "latency_ms": 1.0}


def test_broker_keeps_the_next_rung_queued_at_the_gpu_but_runs_one_at_a_time():
    import asyncio

    from raytune_attn.tune.sweep.broker import DEPTH, Broker

    async def scenario():
        bench = _SerialBench(hold=0.05)
        b = Broker.__ray_actor_class__([bench], [None], ["n"])
        outs = await asyncio.gather(*(b.run(0, f"t{k}", PA, {"name": f"c{k}"}, 1, 1.0, True) for k in range(5)))
        return outs, bench.log, list(b.holders[0])

    outs, log, holders = asyncio.run(scenario())
    assert all(o["status"] == "ok" for o in outs) and holders == []
    starts = [t for e, _, t in log if e == "start"]
    ends = [t for e, _, t in log if e == "end"]
    assert all(s >= e for s, e in zip(starts[1:], ends[:-1], strict=True))  # never two configs at once
    # Each call after the first was sent to the actor before the one ahead of it ended (no round trip between
    # rungs), and never more than DEPTH were sent and unanswered.
    sent = {n: t for e, n, t in log if e == "sent"}
    end = {n: t for e, n, t in log if e == "end"}
    for k in range(1, 5):
        assert sent[f"c{k}"] < end[f"c{k - 1}"]
        assert sum(1 for j in range(5) if sent[f"c{j}"] <= sent[f"c{k}"] and end[f"c{j}"] > sent[f"c{k}"]) <= DEPTH


def test_broker_blames_the_config_that_killed_the_gpu_worker_not_the_one_queued_behind_it():
    import asyncio

    from raytune_attn.tune.sweep.broker import Broker

    async def scenario():
        bench = _SerialBench(hold=0.05, restart_s=0.1)
        b = Broker.__ray_actor_class__([bench], [None], ["n"])
        bad = asyncio.ensure_future(b.run(0, "bad", PA, {"name": "bad", "crash": True}, 1, 1.0, True))
        await asyncio.sleep(0.01)
        good = asyncio.ensure_future(b.run(0, "good", PA, {"name": "good"}, 1, 1.0, True))
        later = asyncio.ensure_future(b.run(0, "later", PA, {"name": "later"}, 1, 1.0, True))
        return await bad, await good, await later, await b.firsts(), bench.log

    bad, good, later, firsts, log = asyncio.run(scenario())
    assert bad["status"] == "error" and "worker died running this config" in bad["reason"]
    assert good["status"] == "ok" and later["status"] == "ok"
    assert firsts["requeued"] == 1  # "good" was queued behind the crash and ran again on the new actor
    assert sorted(n for e, n, _ in log if e == "end") == ["good", "later"]
