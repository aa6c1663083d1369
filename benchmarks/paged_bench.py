"""Paged-KV attention benchmark (issue #32): `raytune_attn.paged_attention` on decode and mixed prefill/decode
batches against SDPA over gathered K/V, the project's varlen kernel over contiguous K/V, and FlashInfer's paged
decode and prefill, with achieved bandwidth as a fraction of the same GPU's device-to-device copy.

    python benchmarks/paged_bench.py --out DIR [--quick] [--rows PATTERNS] [--configs ARTIFACT]
    python benchmarks/paged_bench.py --tiny --out DIR      # CPU: the Triton interpreter, correctness only

Rows (`benchmarks/paged_rows.py`): Hq 32, Hkv 8, D 128, bf16, block 16; pure decode at batch 1, 8, 32, 128, 256 x
contexts 1k, 4k, 8k, 32k, and mixed batches of 2-4 prefill chunks (512-2048 new tokens over 0-4096 cached) beside
32-128 decode rows (1k-8k keys), seeded. A row whose cache does not fit in free GPU memory is skipped with a note;
one whose gathered copy does not fit beside it skips SDPA and varlen.

Per row: every method's output is checked against float32 SDPA over the gathered keys (max abs error) before it
is timed. Time per call is the median of CUDA-event timings after warm-up (`raytune_attn.tune.measure.timing`:
L2 flushed before each run, the call replayed from a CUDA graph where it can be captured, so host launch cost is
not timed). Bandwidth counts what attention must move: K and V of the keys each sequence uses (seqused_k), Q read
and the output written, over the time; its fraction is of a 1 GiB device-to-device copy (bytes read + written)
measured in the same process. SDPA is timed without the gather; the varlen kernel runs over contiguous K/V (the
cost of paging); FlashInfer (when `import flashinfer` works) is planned once per row and its run timed, its
kernels built by nvcc in a background process while the other methods are timed (`paged_fi_jit.py`), its
columns measured last; the JIT's seconds are a column.

Output: a table on stdout, DIR/paged_bench.parquet (one row per benchmark row; columns in docs/benchmarks/paged.md),
DIR/paged_bench.json (the copy measurement, versions, arguments) and DIR/paged_bench.txt (the table), all rewritten
after every row.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: the repository root on the path for `benchmarks.*`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from benchmarks.paged_rows import QUICK, Row, full_rows, select, tiny_rows

TOLERANCE = {"float32": 1e-3, "bfloat16": 3e-2, "float16": 1e-2}  # max abs error vs the float32 reference
MARGIN_BYTES = 2 << 30  # kept free beside a row's tensors: partials, workspaces, the L2 flush buffer


def tolerance(dtype: str, device: str) -> float:
    """The max abs error accepted for `dtype` on `device`. float32's is the interpreter's (true float32 dots, --tiny
    on a CPU); on a GPU the kernels' float32 dots run in TF32, float16's 10-bit mantissa, so there (--tiny on a GPU
    machine) float32 outputs are held to float16's tolerance."""
    return TOLERANCE["float16" if dtype == "float32" and device == "cuda" else dtype]


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="directory for paged_bench.parquet/.json/.txt")
    ap.add_argument("--quick", action="store_true", help=f"a few rows only: {', '.join(QUICK)}")
    ap.add_argument("--tiny", action="store_true", help="interpreter-sized rows, correctness only (runs on CPU)")
    ap.add_argument("--rows", help="comma-separated shell patterns of row names, e.g. 'decode-b32-*,mixed-*'")
    ap.add_argument("--configs", help="a tuned artifact (best_configs.json, a directory or an MLflow URI): its "
                                      "paged config for each row's shape is timed beside the default")
    ap.add_argument("--warmup-ms", type=float, default=5.0, help="warm-up per timing (GPU ms)")
    ap.add_argument("--rep-ms", type=float, default=30.0, help="timed runs per timing (GPU ms, at least 5 runs)")
    ap.add_argument("--copy-gib", type=float, default=1.0, help="buffer of the copy-bandwidth measurement")
    ap.add_argument("--no-flashinfer", action="store_true", help="leave FlashInfer out")
    ap.add_argument("--fi-prefill-backend", default="fa2", choices=("fa2", "fa3"),
                    help="FlashInfer prefill backend (fa3 takes longer to JIT-compile)")
    ap.add_argument("--fi-jit-timeout", type=float, default=300.0,
                    help="seconds from the start after which FlashInfer's JIT build is stopped")
    a = ap.parse_args(argv)
    if a.tiny and a.quick:
        ap.error("--tiny and --quick exclude each other")
    if a.warmup_ms < 0 or a.rep_ms <= 0 or a.copy_gib <= 0:
        ap.error("--warmup-ms must be >= 0, --rep-ms and --copy-gib > 0")
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    cuda = torch.cuda.is_available()
    if not cuda and not a.tiny:
        print("paged_bench needs a CUDA GPU; --tiny runs its interpreter-sized rows on a CPU", file=sys.stderr)
        return 2
    if not cuda:
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before the kernels are imported
    base = tiny_rows() if a.tiny else full_rows()
    if a.quick:
        base = [r for r in base if r.name in QUICK]
    try:
        rows = select(base, a.rows)
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    a.out.mkdir(parents=True, exist_ok=True)
    bench = Bench(a, "cuda" if cuda else "cpu", timed=cuda and not a.tiny)
    return bench.run(rows)


class Bench:
    def __init__(self, args, device: str, timed: bool):
        self.a, self.device, self.timed = args, device, timed
        self.copy: dict | None = None
        self.fi_state = self._fi_state()
        self.fi_jit = None
        self.fi_jit_s = math.nan
        self.records: list[dict] = []
        self.refs: dict[str, torch.Tensor] = {}

    def _fi_state(self) -> str | None:
        """None when FlashInfer can run, else what its columns say."""
        if self.a.no_flashinfer:
            return "n/a (--no-flashinfer)"
        if importlib.util.find_spec("flashinfer") is None:
            return "n/a (not installed)"
        if self.device != "cuda":
            return "n/a (needs CUDA)"
        return None

    def run(self, rows: list[Row]) -> int:
        t0 = time.perf_counter()
        if self.fi_state is None and self.timed:
            from benchmarks import paged_fi_jit

            first = rows[0]
            self.fi_jit = paged_fi_jit.start(first.dtype, first.head_dim, self.a.fi_prefill_backend,
                                             self.a.out / "fi_jit.log")
        if self.timed:
            from benchmarks.h100_copy_bandwidth import copy_bandwidth

            self.copy = copy_bandwidth(self.a.copy_gib, reps=20)
            self._free()  # its buffers back to the driver: rows are sized against free memory
            print(f"device-to-device copy: {self.copy['tb_per_s_read_plus_write']} TB/s (read + write) on "
                  f"{self.copy['gpu']}", flush=True)
        tuned = self._load_tuned()
        for row in rows:
            rec = _base_columns(row, self.copy)
            self.records.append(rec)
            self._guarded(row, rec, lambda row=row, rec=rec: self._measure_row(row, tuned, rec))
            print(_line(self.records[-1]), flush=True)
            self._write()  # after every row: a run stopped by its time limit keeps what it measured
        self._flashinfer(rows)
        self._write()
        print(f"\n{_table(self.records)}\n{self._footer()}\n")
        print(f"paged_bench: {len(self.records)} rows in {time.perf_counter() - t0:.0f} s; "
              f"wrote {self.a.out / 'paged_bench.parquet'}")
        bad = [r["row"] for r in self.records
               if r.get("paged_ok") is not True and not (r.get("note") or "").startswith("skipped")]
        if bad:
            print(f"paged output off the reference, or not run, on: {', '.join(bad)}", file=sys.stderr)
        return 1 if bad else 0

    def _guarded(self, row: Row, rec: dict, measure) -> None:
        """`measure()`, which fills `rec`; when it raises (out of memory, a kernel that fails on this shape), the
        row's note says so, what it measured before stays, and the other rows still run."""
        try:
            measure()
        except Exception as e:  # noqa: BLE001 - reported in the row
            note = f"error: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
            rec["note"] = f"{rec['note']}; {note}" if rec.get("note") else note
            print(f"{row.name}: {note}", file=sys.stderr, flush=True)
        self._free()  # here, not in the handler: its traceback holds the failed call's tensors until it ends

    # ---- one row, every method but FlashInfer ------------------------------------------------------------------

    def _measure_row(self, row: Row, tuned, rec: dict) -> None:
        from benchmarks.paged_batch import gathered_bytes, make_batch, reference

        free = torch.cuda.mem_get_info()[0] if self.device == "cuda" else None
        if free is not None and row.cache_bytes() + MARGIN_BYTES > free:
            rec["note"] = f"skipped: its cache needs {row.cache_bytes() / 2**30:.1f} GiB, {free / 2**30:.1f} free"
            return
        batch = make_batch(row, self.device)
        ref = reference(batch)
        self.refs[row.name] = ref.cpu()
        self._paged(rec, batch, ref, tuned)
        if free is not None and row.cache_bytes() + gathered_bytes(row) + MARGIN_BYTES > free:
            rec["note"] = "SDPA and varlen skipped: the gathered copy does not fit beside the cache"
        else:
            self._gathered(rec, batch, ref)
        del batch, ref
        self._free()

    def _paged(self, rec: dict, batch, ref, tuned) -> None:
        from raytune_attn.kernels.paged_config import default_paged_config

        row = batch.row
        cfg = default_paged_config(head_dim=row.head_dim, group=row.hq // row.hkv, max_seqlen_q=row.max_q,
                                   max_seqlen_k=row.max_k, num_seqs=row.num_seqs, num_kv_heads=row.hkv)
        rec["paged_config"] = json.dumps(cfg, sort_keys=True)
        self._time("paged", rec, _paged_fn(batch, cfg), ref)
        if tuned is None:
            rec["tuned_source"] = "n/a (no --configs)"
            return
        if isinstance(tuned, str):
            rec["tuned_source"] = tuned
            return
        tcfg, source = tuned(num_seqs=row.num_seqs, max_seqlen_q=row.max_q, max_seqlen_k=row.max_k, hq=row.hq,
                             hkv=row.hkv, head_dim=row.head_dim, dtype=row.dtype, block_size=row.block_size)
        rec["tuned_source"], rec["tuned_config"] = source, json.dumps(dict(tcfg), sort_keys=True)
        if source == "default":
            rec["tuned_source"] = "default (no tuned entry for this shape's query bucket)"
        else:
            self._time("tuned", rec, _paged_fn(batch, dict(tcfg)), ref)

    def _gathered(self, rec: dict, batch, ref) -> None:
        from benchmarks import paged_baselines as pb
        from benchmarks.paged_batch import gather

        k, v = gather(batch, batch.k_cache), gather(batch, batch.v_cache)
        for name, make in (("sdpa", pb.sdpa_runner), ("varlen", pb.varlen_runner)):
            try:
                runner = make(batch, k, v)
            except Exception as e:  # noqa: BLE001 - one baseline failing must not lose the row
                rec[f"{name}_note"] = f"error: {type(e).__name__}: {str(e).splitlines()[0][:160]}"
                continue
            rec[f"{name}_variant"] = runner.label
            self._time(name, rec, runner, ref)
            del runner
        del k, v

    def _time(self, name: str, rec: dict, runner, ref) -> None:
        """Check `runner`'s output against `ref`, then time it (on a GPU, outside --tiny)."""
        from benchmarks.paged_batch import max_error

        runner.fn()
        err = max_error(runner.output(), ref)
        rec[f"{name}_err"] = err
        rec[f"{name}_ok"] = bool(err <= tolerance(rec["dtype"], self.device))
        if not self.timed:
            return
        from raytune_attn.tune.measure.timing import median_ms

        ms = median_ms(runner.fn, warmup_ms=self.a.warmup_ms, rep_ms=self.a.rep_ms)
        rec[f"{name}_ms"] = ms
        rec[f"{name}_tb_s"] = rec["bytes"] / (ms * 1e-3) / 1e12
        if self.copy:
            rec[f"{name}_frac_copy"] = rec[f"{name}_tb_s"] / self.copy["tb_per_s_read_plus_write"]

    def _load_tuned(self):
        """The paged lookup of the tuned artifact (a callable), a note saying why there is none, or None."""
        if not self.a.configs:
            return None
        from raytune_attn import runtime

        runtime.load_configs(self.a.configs)
        try:
            from raytune_attn.paged_runtime import lookup
        except ImportError:
            return "n/a (this tree has no raytune_attn.paged_runtime: paged configs cannot be looked up)"
        return lookup

    # ---- FlashInfer, last ------------------------------------------------------------------------------------

    def _flashinfer(self, rows: list[Row]) -> None:
        if self.fi_jit is not None:
            from benchmarks import paged_fi_jit

            self.fi_jit_s, err = paged_fi_jit.wait(self.fi_jit, self.a.fi_jit_timeout)
            print(f"flashinfer JIT: {self.fi_jit_s:.0f} s" + (f" ({err})" if err else ""), flush=True)
            self.fi_state = err
        for rec in self.records:
            rec["fi_jit_s"] = self.fi_jit_s
            rec["fi_note"] = self.fi_state or ""
        if self.fi_state is not None or not self.timed:
            return
        import flashinfer

        ws = tuple(torch.zeros(256 << 20, dtype=torch.uint8, device="cuda") for _ in range(2))
        for row, rec in zip(rows, self.records, strict=True):
            if row.name not in self.refs:  # skipped, or failed before its reference
                continue
            rec["fi_version"] = getattr(flashinfer, "__version__", "")
            self._guarded(row, rec, lambda row=row, rec=rec: self._fi_row(row, rec, ws))
            self._free()
            print(_line(rec), flush=True)
            self._write()

    def _fi_row(self, row: Row, rec: dict, ws) -> None:
        from benchmarks import paged_baselines as pb
        from benchmarks.paged_batch import make_batch

        batch = make_batch(row, self.device)
        ref = self.refs[row.name].to(self.device)
        runs = [("fi", lambda: pb.fi_decode_runner(batch, ws[0])),
                ("fi_tc", lambda: pb.fi_decode_runner(batch, ws[0], tensor_cores=True))]
        if row.kind == "mixed":
            backend = self.a.fi_prefill_backend
            runs = [("fi", lambda: pb.fi_prefill_runner(batch, ws[0], backend)),
                    ("fi_split", lambda: pb.fi_split_runner(batch, ws, backend))]
        for name, make in runs:
            try:
                runner = make()
            except Exception as e:  # noqa: BLE001 - reported in the row, the others still run
                rec[f"{name}_note"] = f"error: {type(e).__name__}: {str(e).splitlines()[0][:160]}"
                continue
            rec[f"{name}_kernel"] = runner.label
            self._time(name, rec, runner, ref)
            del runner
        _best_fi(rec)

    # ---- output ----------------------------------------------------------------------------------------------

    def _free(self) -> None:
        if self.device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.empty_cache()

    def _write(self) -> None:
        import pandas as pd

        for rec in self.records:
            for other in ("sdpa", "varlen"):
                if rec.get(f"{other}_ms") and rec.get("paged_ms"):
                    rec[f"paged_speedup_vs_{other}"] = rec[f"{other}_ms"] / rec["paged_ms"]
        df = pd.DataFrame(self.records, columns=_columns(self.records))
        df.to_parquet(self.a.out / "paged_bench.parquet", index=False)
        meta = {"argv": sys.argv[1:], "copy": self.copy, "torch": torch.__version__, "fi_jit_s": self.fi_jit_s,
                "gpu": torch.cuda.get_device_name() if self.device == "cuda" else "cpu (Triton interpreter)"}
        try:
            import triton

            meta["triton"] = triton.__version__
        except ImportError:
            pass
        (self.a.out / "paged_bench.json").write_text(json.dumps(meta, indent=1, default=str) + "\n")
        (self.a.out / "paged_bench.txt").write_text(f"{_table(self.records)}\n{self._footer()}\n")

    def _footer(self) -> str:
        gpu = torch.cuda.get_device_name() if self.device == "cuda" else "cpu (Triton interpreter, no timing)"
        copy = f"{self.copy['tb_per_s_read_plus_write']} TB/s" if self.copy else "not measured"
        jit = f"{self.fi_jit_s:.0f} s" if self.fi_jit_s == self.fi_jit_s else "-"
        return (f"{gpu}; device-to-device copy {copy} (read + write, {self.a.copy_gib:g} GiB); FlashInfer JIT "
                f"{jit}; times: median ms per call, L2 flushed, CUDA-graph replays; %copy: (K + V of seqused_k + "
                f"Q + output bytes) / time / copy bandwidth; fi best: the fastest FlashInfer variant (fi, fi_tc, "
                f"fi_split); fi/paged: its time over the paged kernel's")


FI_VARIANTS = ("fi", "fi_tc", "fi_split")


def _best_fi(rec: dict) -> None:
    """The fastest FlashInfer variant that ran, and the paged kernel's speed-ups over `fi` and over the fastest."""
    timed = [(rec[f"{n}_ms"], n) for n in FI_VARIANTS if _measured(rec.get(f"{n}_ms"))]
    if not timed:
        return
    ms, name = min(timed)
    rec["fi_best_ms"], rec["fi_best_kernel"] = ms, rec.get(f"{name}_kernel", name)
    rec["fi_best_frac_copy"] = rec.get(f"{name}_frac_copy", math.nan)
    paged = rec.get("paged_ms")
    if _measured(paged):
        rec["paged_speedup_vs_fi_best"] = ms / paged
        if _measured(rec.get("fi_ms")):
            rec["paged_speedup_vs_fi"] = rec["fi_ms"] / paged


def _measured(x) -> bool:
    return x is not None and x == x  # neither missing nor NaN


def _paged_fn(batch, cfg: dict):
    from benchmarks.paged_baselines import Runner
    from raytune_attn import paged_attention

    row = batch.row
    out = torch.empty_like(batch.q)

    def fn():
        paged_attention(batch.q, batch.k_cache, batch.v_cache, block_table=batch.block_table,
                        seqused_k=batch.seqused_k, cu_seqlens_q=batch.cu_seqlens_q, max_seqlen_q=row.max_q,
                        max_seqlen_k=row.max_k, causal=True, out=out, config=cfg)

    return Runner(fn, out, "")


# Every column, in order (a method that did not run leaves NaN or an empty string; docs/benchmarks/paged.md).
COLUMNS = (
    "gpu", "row", "kind", "shape", "num_seqs", "total_q", "total_k", "max_q", "max_k", "hq", "hkv", "head_dim",
    "block_size", "dtype", "seed", "bytes", "copy_tb_s",
    "paged_config", "paged_ms", "paged_tb_s", "paged_frac_copy", "paged_err", "paged_ok",
    "tuned_source", "tuned_config", "tuned_ms", "tuned_tb_s", "tuned_frac_copy", "tuned_err", "tuned_ok",
    "sdpa_variant", "sdpa_ms", "sdpa_tb_s", "sdpa_frac_copy", "sdpa_err", "sdpa_ok", "sdpa_note",
    "paged_speedup_vs_sdpa",
    "varlen_variant", "varlen_ms", "varlen_tb_s", "varlen_frac_copy", "varlen_err", "varlen_ok", "varlen_note",
    "paged_speedup_vs_varlen",
    "fi_version", "fi_jit_s", "fi_kernel", "fi_ms", "fi_tb_s", "fi_frac_copy", "fi_err", "fi_ok", "fi_note",
    "paged_speedup_vs_fi",
    "fi_tc_kernel", "fi_tc_ms", "fi_tc_tb_s", "fi_tc_frac_copy", "fi_tc_err", "fi_tc_ok", "fi_tc_note",
    "fi_split_kernel", "fi_split_ms", "fi_split_tb_s", "fi_split_frac_copy", "fi_split_err", "fi_split_ok",
    "fi_split_note",
    "fi_best_kernel", "fi_best_ms", "fi_best_frac_copy", "paged_speedup_vs_fi_best",
    "note",
)
_TEXT = {"gpu", "row", "kind", "shape", "dtype", "paged_config", "tuned_source", "tuned_config", "sdpa_variant",
         "sdpa_note", "varlen_variant", "varlen_note", "fi_version", "fi_kernel", "fi_note", "fi_tc_kernel",
         "fi_tc_note", "fi_split_kernel", "fi_split_note", "fi_best_kernel", "note"}
_FLAGS = {"paged_ok", "tuned_ok", "sdpa_ok", "varlen_ok", "fi_ok", "fi_tc_ok", "fi_split_ok"}


def _columns(records: list[dict]) -> list[str]:
    for rec in records:  # fixed types whatever ran: text "", numbers NaN, flags None
        for c in COLUMNS:
            rec.setdefault(c, "" if c in _TEXT else None if c in _FLAGS else math.nan)
    return list(COLUMNS)


def _base_columns(row: Row, copy: dict | None) -> dict:
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu (Triton interpreter)"
    return {"gpu": gpu, "row": row.name, "kind": row.kind, "shape": row.describe(), "num_seqs": row.num_seqs,
            "total_q": row.total_q, "total_k": row.total_k, "max_q": row.max_q, "max_k": row.max_k, "hq": row.hq,
            "hkv": row.hkv, "head_dim": row.head_dim, "block_size": row.block_size, "dtype": row.dtype,
            "seed": row.seed, "bytes": row.bytes_moved(),
            "copy_tb_s": copy["tb_per_s_read_plus_write"] if copy else math.nan}


def _num(x, fmt: str) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


def _pct(x) -> str:
    return _num(None if x is None else x * 100, ".0f") + ("%" if x is not None and x == x else "")


def _cell(rec: dict, name: str) -> str:
    """A method's time; untimed (--tiny), its max error; not run, why."""
    ms, err = rec.get(f"{name}_ms"), rec.get(f"{name}_err")
    if _measured(ms):
        return _num(ms, ".4f")
    if _measured(err):
        return f"err {err:.1e}"
    return rec.get(f"{name}_note") or ("n/a" if name != "tuned" else "-")


def _fi_cell(rec: dict) -> str:
    best = rec.get("fi_best_ms")
    return _num(best, ".4f") if _measured(best) else _cell(rec, "fi")


HEADER = ("row", "paged ms", "TB/s", "%copy", "paged err", "tuned ms", "%copy", "sdpa ms", "varlen ms",
          "fi best ms", "fi %copy", "fi/paged", "note")


def _line(rec: dict) -> str:
    cells = (rec["row"], _cell(rec, "paged"), _num(rec.get("paged_tb_s"), ".2f"), _pct(rec.get("paged_frac_copy")),
             _num(rec.get("paged_err"), ".1e"), _cell(rec, "tuned"), _pct(rec.get("tuned_frac_copy")),
             _cell(rec, "sdpa"), _cell(rec, "varlen"), _fi_cell(rec), _pct(rec.get("fi_best_frac_copy")),
             _num(rec.get("paged_speedup_vs_fi_best"), ".2f"), rec.get("note") or "")
    return " | ".join(str(c) for c in cells)


def _table(records: list[dict]) -> str:
    lines = [" | ".join(HEADER), " | ".join("---" for _ in HEADER)]
    lines += [_line(r) for r in records]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
