"""Compile a search space's configs for a GPU that is not there: what each binary uses, measured by its compiler.

Triton compiles for any target it has a backend for (`triton.compile(src, target=GPUTarget(...))`), so a machine
without an AMD or NVIDIA GPU still learns, for every config of a space, whether the compiler takes it, how much
shared memory (LDS) the binary asks for, and how many registers it uses and spills: what the resource pre-filter
(`raytune_attn.kernels.resources`) can only estimate. Speed and numerics still need the GPU.

Each config is specialized as the launcher specializes it on the real problem (`launch_spec` runs the launcher
itself on shape-only tensors, then Triton's own binder derives the divisibility, folded constants and, on AMD,
buffer-op pointer ranges), without allocating the problem's tensors. Compiles run in spawned worker processes, with
the Triton interpreter off there.

A row per (config, problem): `status` is "compiled", "refused" (the knob rules, `validate_config`, refuse it;
`message` says why; nothing is compiled), "failed" (the compiler's message, or Triton's out-of-resource text where
the binary needs more shared memory than the target has, as loading it on the GPU would say) or "timeout" (killed
after `timeout_s`: the sweep's compile pool would give up on it too). Beside it, `prefilter_rejects` and
`prefilter_reason`: whether the one validation (`raytune_attn.validation.check` on the target's architecture, what
a sweep screens candidates with) refuses it there, and `smem_estimate`, the shared memory it counts. The config is
compiled either way, so a refusal of a config that compiles shows as much as a failure it let through.
"""

from __future__ import annotations

import json
import math
import multiprocessing as mp
import os
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from multiprocessing.connection import wait
from pathlib import Path

from raytune_attn.config import InvalidConfig, validate_config
from raytune_attn.problem import Problem
from raytune_attn.tune.measure.target_build import compile_one
from raytune_attn.tune.measure.targets import CrossCompileError, Target, parse_target
from raytune_attn.tune.report import KNOB_LABELS

STATUSES = ("compiled", "refused", "failed", "timeout")
DEFAULT_TIMEOUT_S = 300.0
COMPILE_NICE = 10  # the machine is shared: compiles yield to interactive work

# Forms of a config the compiler answers to the same way on every problem: head dims 64, 128 and 256 cover the
# kernel's padded widths that change tile sizes (BLOCK_D), masks both ways. Shapes of issue 7's grid at S=4096.
DEFAULT_HEAD_DIMS = (64, 128, 256)


def default_problems(paged: bool = False) -> list[Problem]:
    """One problem per head dim and mask; for the paged kernel's spaces (`paged`) one GQA batch per head dim that
    takes both of its paths: decode rows beside a prefill chunk over a cached prefix."""
    if paged:
        from raytune_attn.paged_problem import PagedProblem

        return [PagedProblem.from_fields({"mix": [{"num_seqs": 4, "q_len": 1, "context": 1000},
                                                  {"num_seqs": 1, "q_len": 300, "context": 700}],
                                          "block_size": 16, "hq": 4 * (1024 // d), "hkv": 1024 // d, "head_dim": d})
                for d in DEFAULT_HEAD_DIMS]  # fmt: skip
    return [Problem(batch=4, hq=2048 // d, hkv=2048 // d, seqlen_q=4096, seqlen_k=4096, head_dim=d, causal=c)
            for d in DEFAULT_HEAD_DIMS for c in (False, True)]


def is_paged_space(space) -> bool:
    """Whether `space` is the paged kernel's (it has the split-KV knob, validation.is_paged)."""
    return "NUM_SEGMENTS" in space.names


@dataclass(frozen=True)
class Job:
    index: int
    config: dict  # the space's knobs, as the space gives them
    problem: Problem
    full_config: dict | None  # validated, defaults filled in; None when refused
    refused: str | None
    estimate: int | None  # the shared memory the validation counts for it on the target (bytes, a lower bound)
    prefilter_reason: str | None  # why the validation refuses it on the target's architecture (None: accepted)


def _paged_job(index: int, config: dict, problem, target: Target) -> Job:
    """A paged config's job: the paged kernel's rules (validation.check_paged), then their verdict on the target's
    architecture; no shared-memory estimate (the paged kernel has no model beyond one K and one V tile)."""
    from raytune_attn import validation

    kw = dict(head_dim=problem.head_dim, group=problem.gqa_group, vendor=target.vendor, dtype=problem.dtype)
    try:
        full, refused = validation.check_paged(config, **kw), None
    except InvalidConfig as e:
        return Job(index, dict(config), problem, None, str(e), None, None)
    try:
        validation.check_paged(config, arch=target.prefilter_arch, **kw)
        reason = None
    except InvalidConfig as e:
        reason = str(e)
    return Job(index, dict(config), problem, full, refused, None, reason)


def select_configs(space, sample: int | None = None, seed: int = 0) -> list[dict]:
    """Every config of the space, or a seeded sample of `sample` of them (in the space's order)."""
    configs = space.configs()
    if sample is None or sample >= len(configs):
        return configs
    picked = sorted(random.Random(seed).sample(range(len(configs)), sample))
    return [configs[i] for i in picked]


def plan_jobs(configs: Iterable[dict], problems: Iterable[Problem], target: Target) -> list[Job]:
    """One job a (config, problem): the knob rules for the target's vendor (`validate_config`: a refusal compiles
    nothing), then the one validation's verdict on the target's architecture beside it (`validation.check`:
    shared memory, tensor descriptors), which the compile then checks."""
    from raytune_attn import validation

    jobs = []
    for config in configs:
        for problem in problems:
            if validation.is_paged(config):
                jobs.append(_paged_job(len(jobs), config, problem, target))
                continue
            try:
                full, refused = validate_config(config, head_dim=problem.head_dim, vendor=target.vendor), None
            except InvalidConfig as e:
                full, refused = None, str(e)
            estimate = reason = None
            if full is not None and target.prefilter_arch is not None:
                dtype_bytes = 4 if problem.dtype == "float32" else 2
                estimate = validation.shared_memory_need(full, target.prefilter_arch, head_dim=problem.head_dim,
                                                         dtype_bytes=dtype_bytes)
                try:
                    validation.check(full, head_dim=problem.head_dim, vendor=target.vendor,
                                     arch=target.prefilter_arch, dtype=problem.dtype)
                except InvalidConfig as e:
                    reason = str(e)
            jobs.append(Job(len(jobs), dict(config), problem, full, refused, estimate, reason))
    return jobs


def _worker(conn) -> None:
    # Before anything imports Triton: with TRITON_INTERPRET on (the test suite sets it), @triton.jit makes
    # interpreter functions, which compile nothing.
    os.environ.pop("TRITON_INTERPRET", None)
    os.nice(COMPILE_NICE)
    import warnings

    warnings.filterwarnings("ignore", message=".*TRITON_DEFAULT_FP_FUSION.*")
    while (msg := conn.recv()) is not None:
        conn.send(compile_one(*msg))


# ---- the pool: long-lived spawned workers; a compile that kills its worker or runs over time is a failed row ----

class _Pool:
    def __init__(self, workers: int, timeout_s: float):
        self.workers, self.timeout_s = workers, timeout_s
        self._ctx = mp.get_context("spawn")
        self._procs: list = []

    def _spawn(self):
        parent, child = self._ctx.Pipe()
        proc = self._ctx.Process(target=_worker, args=(child,), daemon=True)
        proc.start()
        child.close()
        return proc, parent

    def _replace(self, i: int) -> None:
        proc, conn = self._procs[i]
        proc.kill()
        proc.join(5)
        conn.close()
        self._procs[i] = self._spawn()

    def run(self, tasks: list[tuple[int, tuple]]):
        """Yield (task id, result) as compiles finish; `tasks` are (id, compile_one's arguments)."""
        todo = list(reversed(tasks))
        while len(self._procs) < min(self.workers, len(todo)):
            self._procs.append(self._spawn())
        busy: dict[int, tuple[int, float]] = {}  # worker -> (task id, start)
        while todo or busy:
            for i, (_, conn) in enumerate(self._procs):
                if i not in busy and todo:
                    tid, msg = todo.pop()
                    conn.send(msg)
                    busy[i] = (tid, time.monotonic())
            conns = {self._procs[i][1]: i for i in busy}
            for conn in wait(list(conns), timeout=1.0):
                i = conns[conn]
                tid, t0 = busy.pop(i)
                try:
                    yield tid, conn.recv()
                except (EOFError, OSError):  # an LLVM assertion aborts the whole process
                    code = self._procs[i][0].exitcode
                    self._replace(i)
                    yield tid, {"status": "failed", "compile_s": time.monotonic() - t0,
                                "message": f"the compiler killed its process (exit code {code})"}
            for i, (tid, t0) in list(busy.items()):
                if time.monotonic() - t0 > self.timeout_s:
                    busy.pop(i)
                    self._replace(i)
                    yield tid, {"status": "timeout", "compile_s": time.monotonic() - t0,
                                "message": f"compile exceeded {self.timeout_s:.0f} s (killed)"}

    def close(self) -> None:
        for _, conn in self._procs:
            try:
                conn.send(None)
            except OSError:
                pass
        for proc, conn in self._procs:
            proc.join(5)
            if proc.is_alive():
                proc.kill()
                proc.join(1)
            conn.close()
        self._procs = []


def default_workers() -> int:
    return max(1, min(2, os.cpu_count() or 1))


def cross_compile(space, target: Target | str, problems: list[Problem] | None = None, *, sample: int | None = None,
                  seed: int = 0, workers: int | None = None, timeout_s: float = DEFAULT_TIMEOUT_S,
                  progress: Callable[[int, int], None] | None = None) -> list[dict]:
    """Compile the space's configs (or a seeded sample) for each problem on `target`; one row a (config, problem),
    in the order configs x problems."""
    target = parse_target(target) if isinstance(target, str) else target
    jobs = plan_jobs(select_configs(space, sample, seed), problems or default_problems(is_paged_space(space)),
                     target)
    rows = [_base_row(job, space, target) for job in jobs]
    tasks = [(j.index, (target.name, j.problem.to_dict(), j.full_config)) for j in jobs if j.refused is None]
    pool = _Pool(workers or default_workers(), timeout_s)
    try:
        for done, (tid, result) in enumerate(pool.run(tasks), 1):
            rows[tid].update(result)
            if progress:
                progress(done, len(tasks))
    finally:
        pool.close()
    for row in rows:
        _judge(row)
    return rows


def _base_row(job: Job, space, target: Target) -> dict:
    p = job.problem
    return {"target": target.name, "space": space.source, "problem": p.key, "head_dim": p.head_dim,
            "causal": p.causal, "dtype": p.dtype, **job.config, "config": json.dumps(job.full_config or job.config),
            "status": "refused" if job.refused else None, "message": job.refused or "", "shared_bytes": None,
            "smem_limit": target.smem_limit, "smem_estimate": job.estimate,
            "prefilter_rejects": bool(job.prefilter_reason), "prefilter_reason": job.prefilter_reason or "",
            "registers": None, "spilling": None, "compile_s": None}


def _judge(row: dict) -> None:
    """Mark what is wrong on a row: `unexpected` (the pre-filter let through a config that failed, or rejected one
    that compiled) and `estimate_above_real` (its lower bound exceeds the binary's shared memory)."""
    real, est = row.get("shared_bytes"), row.get("smem_estimate")
    row["estimate_above_real"] = bool(real is not None and est is not None and est > real)
    failed, rejected = row["status"] in ("failed", "timeout"), row["prefilter_rejects"]
    row["unexpected"] = (failed and not rejected) or (row["status"] == "compiled" and rejected)


def summarize(rows: list[dict]) -> dict:
    """Counts over the rows: statuses, spilling, failures the pre-filter catches, and what is wrong."""
    n = Counter(r["status"] for r in rows)
    return {"rows": len(rows), "configs": len({r["config"] for r in rows}), **{s: n.get(s, 0) for s in STATUSES},
            "failed_prefiltered": sum(r["status"] == "failed" and r["prefilter_rejects"] for r in rows),
            "false_rejects": sum(r["status"] == "compiled" and r["prefilter_rejects"] for r in rows),
            "spilling": sum(bool(r.get("spilling")) and r["status"] == "compiled" for r in rows),
            "estimate_above_real": sum(r["estimate_above_real"] for r in rows),
            "unexpected": sum(r["unexpected"] for r in rows)}


def _short_config(row: dict, names: list[str]) -> str:
    return " ".join(f"{KNOB_LABELS.get(n, n)}{int(row[n]) if isinstance(row[n], bool) else row[n]}" for n in names)


def _cell(v) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)


def format_table(rows: list[dict], knob_names: list[str]) -> str:
    """A row a (config, problem), then the counts and each distinct failure and refusal with how often."""
    amd = any("sgprs" in r for r in rows)
    head = ["problem", "config", "status", "smem", "estimate", "vgprs" if amd else "regs",
            *(["sgprs", "vgpr spills"] if amd else ["stack"]), "s"]
    body = []
    for r in rows:
        spills = [_cell(r.get("sgprs")), _cell(r.get("vgpr_spills"))] if amd else [_cell(r.get("stack_bytes"))]
        flag = "!" if r["unexpected"] or r["estimate_above_real"] else ""
        body.append([f"d{r['head_dim']}{'c' if r['causal'] else 'f'}", _short_config(r, knob_names),
                     r["status"] + flag, _cell(r["shared_bytes"]), _cell(r["smem_estimate"]), _cell(r["registers"]),
                     *spills, "-" if r["compile_s"] is None else f"{r['compile_s']:.1f}"])
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body, strict=True)]
    lines = ["  ".join(str(x).ljust(w) for x, w in zip(line, widths, strict=True)) for line in [head, *body]]
    s = summarize(rows)
    lines.append(f"{rows[0]['target'] if rows else ''} {rows[0]['space'] if rows else ''}: "
                 + ", ".join(f"{k} {v}" for k, v in s.items()))
    for status in ("failed", "timeout", "refused"):
        for msg, count in Counter(r["message"] for r in rows if r["status"] == status).most_common():
            lines.append(f"  {status} x{count}: {msg}")
    lines.append("  (d128c: head dim 128, causal; smem and estimate in bytes; ! marks a failure the pre-filter let "
                 "through, a config it rejected that compiled, or an estimate above the real figure)")
    return "\n".join(lines)


def write_parquet(rows: list[dict], path: str | Path) -> None:
    import pandas as pd

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_parquet(path, index=False)


def _load_inputs(space, target, problems, sample, out, workers=None, timeout_s=DEFAULT_TIMEOUT_S, seed=0):
    """Everything the command checks before compiling; raises CrossCompileError with one line."""
    from raytune_attn.tune.search.space import SpaceError, load_space
    from raytune_attn.tune.sweep.problems import ProblemSetError, load_problems

    tgt = parse_target(target)
    try:
        sp = load_space(space)
    except (FileNotFoundError, SpaceError) as e:
        raise CrossCompileError(str(e)) from None
    if sp.vendor != tgt.vendor:
        raise CrossCompileError(f"space {space} is for {sp.vendor} GPUs, target {tgt.name} is {tgt.vendor}")
    paged = is_paged_space(sp)
    try:
        probs = load_problems(problems) if problems else default_problems(paged)
    except (FileNotFoundError, ProblemSetError) as e:
        raise CrossCompileError(str(e)) from None
    wrong = [p.key for p in probs if (getattr(p, "kind", None) == "paged") != paged]
    if wrong:
        kernel = "the paged kernel's (kind: paged problems)" if paged else "the dense and varlen kernel's"
        raise CrossCompileError(f"space {space} is {kernel}; {problems} has problems of the other kernel: {wrong[0]}")
    if sample is not None and (isinstance(sample, bool) or not isinstance(sample, int) or sample < 1):
        raise CrossCompileError(f"--sample must be a positive number of configs, got {sample!r}")
    if workers is not None and workers < 1:
        raise CrossCompileError(f"--workers must be at least 1, got {workers}")
    if not timeout_s > 0:
        raise CrossCompileError(f"--timeout must be > 0 seconds, got {timeout_s}")
    if seed < 0:
        raise CrossCompileError(f"--seed must be at least 0, got {seed}")
    if out is not None and not Path(out).resolve().parent.is_dir():
        raise CrossCompileError(f"--out {out}: no such directory {Path(out).resolve().parent}")
    return sp, tgt, probs


def space_compile_main(space: str, target: str, problems: str | None = None, sample: int | None = None,
                       out: str | None = None, workers: int | None = None, seed: int = 0,
                       timeout_s: float = DEFAULT_TIMEOUT_S) -> int:
    """`raytune-attn space compile`: print the table, write Parquet to `out`; 0 only when every config that the
    validation and the pre-filter accept compiled, the pre-filter rejected none that compiled, and its estimate
    stayed at or below every binary's shared memory; 1 otherwise (also when the validation refused every config:
    nothing was verified); 2 for bad input, before anything compiles."""
    try:
        sp, tgt, probs = _load_inputs(space, target, problems, sample, out, workers, timeout_s, seed)
    except CrossCompileError as e:
        print(f"raytune-attn: error: {e}", file=sys.stderr)  # as the other commands' usage errors
        return 2

    def progress(done: int, total: int) -> None:
        if done % 5 == 0 or done == total:
            print(f"compiled {done}/{total}", file=sys.stderr, flush=True)

    t0 = time.monotonic()
    rows = cross_compile(sp, tgt, probs, sample=sample, seed=seed, workers=workers, timeout_s=timeout_s,
                         progress=progress)
    print(format_table(rows, list(sp.names)))
    print(f"wall time {time.monotonic() - t0:.0f} s")
    if out is not None:
        write_parquet(rows, out)
    s = summarize(rows)
    return 1 if s["unexpected"] or s["estimate_above_real"] or len(rows) == s["refused"] else 0
