"""The one use of Ray Tune private internals in the sweep, behind a version guard: room in Tune's cache of finished
trials' processes for every trial in flight (`reuse_actors`).

Tune caches a finished trial's process only for a trial already staged, else keeps one spare; a trial staged a step
later asks Ray for a new process, and when a finished trial's process turns up meanwhile, Tune hands that one over
and kills the booting one. On two H200s with 16 trials per GPU, Ray started 160 worker processes for 32 trials in
flight, the host's cores busy booting Ray Tune in processes that never ran a trial, and the two GPUs no faster than
one. With room for the trials in flight, every finished trial's process waits in the cache and the next trial
takes it.

Tune has no public knob for it: the cache is `TuneController._actor_cache` (an `_ObjectCache`). A scheduler gets
the controller wrapped in a `TrialRunnerWrapper`, whose attribute lookups warn ("...which is being restricted")
and then pass through; the wrapper keeps the controller as `_tune_controller`, read here without the lookup that
warns. Checked on the Ray versions in `SUPPORTED`; on any other, or where the internals moved, `widen` does nothing
and the sweep runs as Tune schedules it (tests/test_sweep_units.py proves the effect on the installed Ray).
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)
SUPPORTED = ((2, 40), (2, 60))  # first and last Ray (major, minor) whose TuneController was read for this


def ray_version() -> tuple[int, int]:
    import ray

    major, minor = (int(x) for x in ray.__version__.split(".")[:2])
    return major, minor


def supported() -> bool:
    return SUPPORTED[0] <= ray_version() <= SUPPORTED[1]


def _cache(tune_controller):
    """Tune's process cache behind what a scheduler is handed (the wrapper, or the controller itself), or None."""
    controller = vars(tune_controller).get("_tune_controller", tune_controller)
    cache = vars(controller).get("_actor_cache") if hasattr(controller, "__dict__") else None
    return cache if hasattr(cache, "increase_max") else None


def widen(tune_controller, placement_group_factory, n: int) -> bool:
    """Let Tune keep up to `n` more finished trials' processes of this resource shape; whether it could."""
    if n <= 0 or not hasattr(tune_controller, "__dict__"):
        return False
    cache = _cache(tune_controller) if supported() else None
    if cache is None:
        log.debug("Ray %s: Tune's trial-process cache left as it is", ".".join(map(str, ray_version())))
        return False
    cache.increase_max(placement_group_factory, by=n)
    return True
