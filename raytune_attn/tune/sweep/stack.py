"""The software stack a sweep's rows record, taken from the benchmark actors that measured them and checked.

A row's provenance is what the actor that timed it runs (`provenance.software()` in the actor, reported by its
`info`), never the driver's: on a cluster the driver may run another Triton, or none on a CPU head node, and an
artifact entry is applied or refused at load time by the Triton version and kernel source it records.

- The actors of one accelerator type run one stack (`type_provenance`): a search's trials go to whichever of them
  is free, so two Tritons or two kernel sources in one type would be compared as one landscape. A type whose nodes
  differ is refused before any search starts, naming the hosts of each version.
- A resume's finished rows were measured on the stack its actors run now (`check_resumed`): an upgrade between the
  attempts would otherwise mix the timings of both kernels in one search (and its model). A sweep upgraded midway is
  finished by a new one that learns from the old rows (`--warm-start`).
"""

from __future__ import annotations

from collections import Counter

from raytune_attn import provenance
from raytune_attn.tune.sweep.config import SweepUsageError

# What builds and times a kernel: the actors of one type must agree on each.
MATCHED = ("triton_version", "torch_version", "raytune_attn_version", "kernel_source_hash")
# What a resume's earlier rows must share with this attempt: the two an artifact entry is checked by (runtime.py).
RESUMED = ("triton_version", "kernel_source_hash")
_LABEL = {"triton_version": "Triton", "torch_version": "torch", "raytune_attn_version": "raytune-attn",
          "kernel_source_hash": "kernel source"}


def type_provenance(accel: str, infos: list[dict]) -> dict[str, str]:
    """The provenance of accelerator type `accel`'s rows from its benchmark actors' `info` (each with the
    `software` it runs); `hostname` lists every host of them (a row's own is its actor's: `on_host`).
    SweepUsageError when the actors differ in a `MATCHED` key."""
    stacks = [dict(i.get("software") or {}) for i in infos]
    for key in MATCHED:
        hosts: dict[str, set] = {}
        for info, s in zip(infos, stacks, strict=True):
            hosts.setdefault(s.get(key, ""), set()).add(s.get("hostname") or info.get("node_id") or "?")
        if len(hosts) > 1:
            each = "; ".join(f"{_shown(key, v)} on {', '.join(sorted(h))}" for v, h in sorted(hosts.items()))
            raise SweepUsageError(f"the {accel} nodes run different {_LABEL[key]} versions ({each}): one search "
                                  "would compare their timings as one; install the same on every node of a type")
    prov = provenance.collect(infos[0], stack=stacks[0])
    prov["hostname"] = ",".join(sorted({s.get("hostname", "") for s in stacks} - {""}))
    return prov


def check_resumed(done: dict[str, list[dict]], prov: dict[str, dict], out) -> None:
    """SweepUsageError when a resume's finished rows (`done`: search key -> rows, resume.Resume.done) were
    measured on a `RESUMED` value other than their accelerator type's actors run now (`prov`: type -> provenance).
    Rows of a type with no actors in this attempt are not compared (their searches do not run)."""
    rows = [r for rs in done.values() for r in rs]
    for accel, now in sorted(prov.items()):
        mine = [r for r in rows if str(r.get("accelerator_type")) == accel]
        for key in RESUMED:
            old = Counter(str(r.get(key) or "") for r in mine)
            old.pop(now.get(key, ""), None)
            if old:
                was = ", ".join(f"{n} with {_shown(key, v)}" for v, n in sorted(old.items()))
                raise SweepUsageError(
                    f"--resume: {old.total()} finished {accel} trial(s) of this sweep were measured on another "
                    f"{_LABEL[key]} ({was}) than its actors run now ({_shown(key, now.get(key, ''))}): one search "
                    "would mix the timings of both. Finish it with the software it started on, or start a new "
                    f"sweep that learns from these rows: --warm-start {out}")


def on_host(prov: dict[str, str], host: str | None) -> dict[str, str]:
    """The provenance of a row its actor measured on `host`."""
    return {**prov, "hostname": host} if host else prov


def _shown(key: str, value: str) -> str:
    if not value:
        return f"no recorded {_LABEL[key]}"
    return f"{_LABEL[key]} {value[:12] if key == 'kernel_source_hash' else value}"
