"""The lease broker of a sweep, one per accelerator type: `Broker` leases benchmark actors (bench_actor.py) to
trials and keeps each actor's queue `DEPTH` rungs deep. The actor runs one config at a time (each trial holds
exactly one GPU while it measures), the next rung already waits in its task queue, and a crash is attributed to the
config that was running, not to the one queued behind it. The GPUs of a node serve one queue: each rung goes to
whichever of them has a free slot first.

Benchmark hook: RAYTUNE_ATTN_BROKER_DEPTH, calls in flight per benchmark actor (default 2; an A/B of DEPTH on a
GPU).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import time

import ray

# Adaptive capping of a rung (timing.median_ms): at CAP_FACTOR times the best latency its problem has seen, never
# below CAP_FLOOR_MS (under a millisecond a full rung costs little, and a first run's one-off costs stay uncut).
CAP_FACTOR = 10.0
CAP_FLOOR_MS = 1.0
# Rungs in flight per benchmark actor: one runs, one waits in the actor's task queue. With one, the GPU idled for a
# round trip per rung (the result back to the Broker, the next waiter woken, its call sent): 11 ms per rung on one
# H200 and 19 ms with two behind one Broker (lease time minus kernel time), against rungs of 10-60 ms.
DEPTH = int(os.environ.get("RAYTUNE_ATTN_BROKER_DEPTH", "2"))  # benchmark hook: 1 restores one call per actor


@ray.remote(num_cpus=0)
class Broker:
    """Leases the benchmark actors of one accelerator type to trials and runs their rungs (async actor: a waiting
    trial costs no thread). A rung is one call from the trial: take one of `DEPTH` slots of an actor of the trial's
    node, run, give the slot back. The actor runs its calls one at a time in the order sent, so a trial holds the
    GPU alone while it measures; when a config kills the actor, the call that was running (the oldest unanswered
    one of that incarnation) gets the error and the calls queued behind it run again, on the restarted actor or
    another GPU of the node. (A process that dies within moments of finishing a call may take that call's reply
    with it: the finished call is then the oldest unanswered one and takes the blame. A faulting kernel dies after
    its compile and launch, by when the reply has left.)"""

    def __init__(self, actors: list, compilers: list, nodes: list | None = None):
        self.actors = list(actors)  # BenchActor handles
        self.compilers = list(compilers)  # CompileActor handle (or None) of each actor's node
        self.nodes = list(nodes) if nodes is not None else list(range(len(self.actors)))  # each actor's node
        n = len(self.actors)
        self.assigned = [0] * n
        self.restarting = [False] * n  # a config killed it: Ray is starting a new one
        self._slots: asyncio.Condition | None = None  # a slot of some actor came free
        self.holders: list[dict] = [{} for _ in range(n)]  # call token -> trial id, for each actor's slots in use
        self._seq = 0
        self.incarnation = [0] * n  # bumped when an actor is found dead
        self.unanswered: list[dict] = [{} for _ in range(n)]  # call token -> incarnation it was sent to
        # Where each actor's time goes, seen from here: "run" (a rung in flight), "compile" (idle, but a trial of
        # this actor is still compiling ahead: the sweep is compile-bound), "pipeline" (idle with no trial
        # compiling: waiting on Tune to start or continue a trial; the sweep's own overhead).
        self.compiling: list[set] = [set() for _ in range(n)]
        self.running = [0] * n
        self.seconds = [{"run": 0.0, "compile": 0.0, "pipeline": 0.0} for _ in range(n)]
        self._since = [None] * n  # None until the first trial arrives: start-up is not the sweep's overhead
        self.first: dict[str, float | None] = {"assign": None, "rung": None}  # when the first trial came, ran
        self.best_ms: dict[str, float] = {}  # problem -> lowest latency of a rung so far (the cap's reference)
        self.capped = 0
        self.requeued = 0  # calls that were queued behind a crash and ran again

    def _cond(self) -> asyncio.Condition:
        if self._slots is None:  # created on the actor's event loop, at its first call
            self._slots = asyncio.Condition()
        return self._slots

    def _account(self, i: int) -> None:
        """Close the interval since actor i's last state change and book it to the state it was in."""
        now = time.monotonic()
        if self._since[i] is not None:
            state = "run" if self.running[i] else ("compile" if self.compiling[i] else "pipeline")
            self.seconds[i][state] += now - self._since[i]
        self._since[i] = now

    async def assign(self, trial_id: str = "") -> tuple:
        """The least-loaded actor for a new trial: (index, compile actor handle of its node or None)."""
        i = min(range(len(self.actors)), key=lambda j: self.assigned[j])
        self.first["assign"] = self.first["assign"] or time.time()
        self._account(i)
        self.assigned[i] += 1
        self.compiling[i].add(trial_id)
        return i, self.compilers[i]

    async def unassign(self, i: int, trial_id: str = "") -> None:
        self._account(i)
        self.assigned[i] = max(0, self.assigned[i] - 1)
        self.compiling[i].discard(trial_id)

    async def stats(self) -> list[dict]:
        for i in range(len(self.actors)):
            self._account(i)
        return [dict(x) for x in self.seconds]

    async def firsts(self) -> dict:
        """Wall-clock times (time.time()) of the first trial's arrival and of its first rung; rungs capped; calls
        requeued after a crash."""
        return {**self.first, "capped": self.capped, "requeued": self.requeued}

    def _pick(self, i: int) -> int | None:
        """The actor for the next rung of a trial last on actor i: of the actors on i's node (they share its compile
        cache) that are not being restarted, one with a free slot and the fewest calls in flight, i on a tie; None
        while every one is full. Bound to one actor, a rung queued behind a 2-second config while the node's other
        GPU idled (4-6 s with no trial finishing, twice, at the end of a two-GPU sweep)."""
        same = [j for j in range(len(self.actors)) if self.nodes[j] == self.nodes[i] and not self.restarting[j]]
        free = [j for j in same or [i] if len(self.holders[j]) < DEPTH]
        return min(free, key=lambda j: (len(self.holders[j]), j != i), default=None)

    async def acquire(self, i: int, trial_id: str) -> tuple[int, int]:
        """A slot of actor i or of another actor of its node (at most DEPTH calls in flight to each): (the actor,
        the call's token). A trial that moves takes its assignment along (the sweep's accounting follows it)."""
        cond = self._cond()
        async with cond:
            await cond.wait_for(lambda: self._pick(i) is not None)
        j = self._pick(i)  # no await since the wait: the slot it saw is still free
        if j != i:
            self._account(i)
            self._account(j)
            self.assigned[i] = max(0, self.assigned[i] - 1)
            self.assigned[j] += 1
            self.compiling[i].discard(trial_id)
        self._seq += 1
        self.holders[j][self._seq] = trial_id
        return j, self._seq

    async def release(self, i: int, token: int) -> None:
        if self.holders[i].pop(token, None) is not None:
            cond = self._cond()
            async with cond:
                cond.notify_all()  # waiters of every node: each checks its own

    async def release_trial(self, trial_id: str) -> None:
        """Free whatever a finished or killed trial still holds."""
        for i, held in enumerate(self.holders):
            for token in [t for t, who in held.items() if who == trial_id]:
                await self.release(i, token)

    async def _until_alive(self, i: int, timeout_s: float = 120.0) -> None:
        # After a config killed the actor, calls fail with ActorUnavailableError until Ray has restarted it; such
        # a failure is not the next config's fault, so wait for a call that runs no config to answer.
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                await self.actors[i].info.remote()
                self.restarting[i] = False
                cond = self._cond()
                async with cond:
                    cond.notify_all()  # its slots are usable again
                return
            except ray.exceptions.ActorUnavailableError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)

    async def _revive(self, i: int) -> None:
        try:
            await self._until_alive(i)
        except ray.exceptions.ActorUnavailableError:
            pass  # not back within the limit: a node with other GPUs goes on without it

    def _ran_into_crash(self, i: int, token: int) -> bool:
        """Whether call `token`, failed with the actor's death, was the one running (the oldest unanswered call
        of its incarnation: the actor answers in order). Failed calls stay in `unanswered`, so the answer does not
        depend on which failure this coroutine sees first."""
        inc = self.unanswered[i][token]
        if self.incarnation[i] == inc:
            self.incarnation[i] += 1
        return token == min(t for t, g in self.unanswered[i].items() if g == inc)

    async def run(self, i: int, trial_id: str, problem: dict, config: dict, rung: int, rep_ms: float,
                  check: bool) -> dict:
        """One rung of a trial's config on actor i (see _Bench.run), or on a GPU of the same node with a slot free
        sooner (`_pick`): the result's `actor` says which one ran it."""
        self._account(i)
        self.compiling[i].discard(trial_id)  # compiled (its first rung): no longer a reason to wait
        key = json.dumps(problem, sort_keys=True)
        while True:
            i, token = await self.acquire(i, trial_id)
            self.first["rung"] = self.first["rung"] or time.time()
            self._account(i)
            self.running[i] += 1
            try:
                if self.restarting[i]:
                    await self._until_alive(i)
                cap = max(CAP_FACTOR * self.best_ms[key], CAP_FLOOR_MS) if key in self.best_ms else None
                self.unanswered[i][token] = self.incarnation[i]
                try:
                    out = await self.actors[i].run.remote(problem, config, rung, rep_ms, check, cap)
                except ray.exceptions.RayActorError as e:
                    if not self.restarting[i]:
                        self.restarting[i] = True
                        # Its node's other GPUs take the rungs meanwhile; this brings it back into the queue.
                        asyncio.ensure_future(self._revive(i))
                    if not self._ran_into_crash(i, token):
                        self.requeued += 1
                        continue  # queued behind the config that killed the actor: run again once it is back
                    return {"status": "error", "rung": rung, "compile_s": 0.0, "bench_s": 0.0, "actor": i,
                            "reason": f"benchmark worker died running this config ({type(e).__name__})"}
                self.unanswered[i].pop(token, None)
                if out.get("status") == "ok" and out.get("latency_ms", 0) > 0:
                    self.best_ms[key] = min(self.best_ms.get(key, math.inf), float(out["latency_ms"]))
                    self.capped += bool(out.get("capped"))
                return {**out, "actor": i}
            finally:
                self._account(i)
                self.running[i] -= 1
                await self.release(i, token)

