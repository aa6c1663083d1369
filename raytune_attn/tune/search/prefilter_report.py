"""The resource pre-filter checked against real compile outcomes (the tuner's side of kernels/resources.py).

`prefilter_report(table, prefilter)` compares the kernel's shared-memory lower bound with a table of compiled
configs: it must never reject a config that compiled and ran, and where a failed compile reports the bytes it
required the bound must be at most that.

    python -m raytune_attn.tune.search.prefilter_report TABLE.parquet --arch sm90 --head-dim 128
"""

from __future__ import annotations

import re
from typing import Any

import pandas as pd

from raytune_attn.kernels.resources import ARCHS, MODEL_KNOBS, Prefilter, smem_lower_bound

_REQUIRED_RE = re.compile(r"Required:\s*(\d+)")
_SMEM_RE = re.compile(r"shared memory|out of resource|LDS", re.IGNORECASE)


def prefilter_report(table: pd.DataFrame, prefilter: Prefilter) -> dict[str, Any]:
    """Accuracy of the pre-filter against real compile outcomes.

    `table` has one row per config: the knob columns, `status` ("ok" for compiled and ran; anything else failed)
    and optionally `error` or `reason` (the error text). Returns counts and the offending configs:
    false_rejects (rejected but compiled: must be 0), caught (smem failures rejected), missed (smem failures
    accepted), bound_above_required (configs whose bound exceeds the real usage, Triton's reported Required bytes
    or the compiled kernel's `shared_bytes` column: must be 0).
    """
    if "status" not in table.columns:
        raise ValueError("compile table needs a 'status' column ('ok' for configs that compiled and ran)")
    knobs = [c for c in MODEL_KNOBS if c not in table.columns]
    if knobs:
        raise ValueError(f"compile table lacks knob column(s) {knobs}")
    col = next((c for c in ("error", "reason") if c in table.columns), None)
    errors = table[col].fillna("").astype(str) if col else pd.Series("", index=table.index)
    rep = {"configs": len(table), "compiled": 0, "failed": 0, "failed_smem": 0, "rejected": 0,
           "false_rejects": [], "caught": 0, "missed": [], "bound_above_required": []}  # fmt: skip
    for (_, row), err in zip(table.iterrows(), errors, strict=True):
        cfg = {k: int(row[k]) for k in MODEL_KNOBS}
        ok = row["status"] == "ok"
        smem_fail = not ok and bool(_SMEM_RE.search(err))
        rejected = not prefilter.accepts(cfg)
        rep["compiled"] += ok
        rep["failed"] += not ok
        rep["failed_smem"] += smem_fail
        rep["rejected"] += rejected
        if rejected and ok:
            rep["false_rejects"].append(cfg)
        if smem_fail:
            if rejected:
                rep["caught"] += 1
            else:
                rep["missed"].append(cfg)
        m = _REQUIRED_RE.search(err)
        need = smem_lower_bound(cfg, prefilter.arch, head_dim=prefilter.head_dim, dtype_bytes=prefilter.dtype_bytes)
        real = int(m.group(1)) if m else None
        if real is None and ok and "shared_bytes" in table.columns and pd.notna(row["shared_bytes"]):
            real = int(row["shared_bytes"])  # what the compiled kernel really uses
        if real is not None and need > real:
            rep["bound_above_required"].append({**cfg, "bound": need, "required": real})
    return rep


def main(argv: list[str] | None = None) -> int:
    """Print the report of a compile table: `python -m raytune_attn.tune.search.prefilter_report TABLE.parquet
    --arch sm90 --head-dim 128`."""
    import argparse
    import json

    from raytune_attn.tune.results import read_frame

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("table")
    ap.add_argument("--arch", required=True, choices=sorted(ARCHS))
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--dtype-bytes", type=int, default=2)
    a = ap.parse_args(argv)
    rep = prefilter_report(read_frame(a.table), Prefilter.for_arch(a.arch, head_dim=a.head_dim,
                                                                          dtype_bytes=a.dtype_bytes))  # fmt: skip
    print(json.dumps(rep, indent=1))
    return 1 if rep["false_rejects"] or rep["bound_above_required"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
