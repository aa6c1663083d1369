"""Is a sweep's winner the same binary at an earlier commit? The PTX of each search's best config, compiled for a
GPU target on this machine (no GPU needed) by this tree's kernel and by the kernel of git revision REV, compared
without its line markers and debug sections.

    python -m benchmarks.ptx_compare --rev 448a01b docs/benchmarks/h200/sweep_bf16_d64/summary.json [--target cuda:90]

When two measurements of a cell differ across runs and the PTX is the same, the kernel did not change there: the
difference is the run's (machine, clocks, the search's pick). Knobs the older tree does not know are dropped from
its configs and named. The older tree gets this tree's `target_build.py` and `targets.py` when it has neither those
nor the `cross_compile.py` that held them before (its launcher and `Problem` are its own). Each tree compiles in its
own process with its own Triton cache.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_MEASURE = Path("raytune_attn/tune/measure")
_BUILD = ("target_build.py", "targets.py")  # the builder, split out of cross_compile.py
# Lines that name source positions or hold the debug sections: they move with any edit of the file.
_NOISE = re.compile(r"^\s*(\.loc|\.file|\.b8|\.b16|\.b32|\.b64)\b|info_string")


def code_of(ptx: str) -> str:
    """The PTX up to its first debug section, without comments and source-position lines."""
    body = ptx.split("\t.section\t.debug", 1)[0]
    lines = (re.sub(r"//.*", "", line).rstrip() for line in body.splitlines())
    return "\n".join(line for line in lines if line and not _NOISE.search(line))


def _worker(target_name: str, summaries: list[str], out: str) -> None:
    from raytune_attn.config import default_config
    from raytune_attn.problem import Problem
    try:
        from raytune_attn.tune.measure.target_build import compile_kernel
        from raytune_attn.tune.measure.targets import parse_target
    except ImportError:  # a tree from before the split
        from raytune_attn.tune.measure.cross_compile import compile_kernel, parse_target

    target, known = parse_target(target_name), set(default_config(128))
    rows = {}
    for path in summaries:
        for search in json.load(open(path))["searches"]:
            key, cfg = search["problem_key"], search["best_config"]
            kept = {k: v for k, v in cfg.items() if k in known}
            row = {"dropped": sorted(set(cfg) - set(kept))}
            try:
                code = code_of(compile_kernel(target, Problem.from_key(key), kept).asm["ptx"])
                row["sha1"] = hashlib.sha1(code.encode()).hexdigest()
            except Exception as e:  # noqa: BLE001 - a config the older kernel cannot build is a difference too
                row["error"] = f"{type(e).__name__}: {e}"[:300]
            rows[key] = row
    Path(out).write_text(json.dumps(rows))


def _run_in(tree: Path, target: str, summaries: list[str], tmp: Path, tag: str) -> dict:
    out = tmp / f"{tag}.json"
    env = {**os.environ, "PYTHONPATH": str(tree), "TRITON_CACHE_DIR": str(tmp / f"cache-{tag}"),
           "TRITON_INTERPRET": "0"}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--target", target, "--out", str(out),
           *[str(Path(s).resolve()) for s in summaries]]
    subprocess.run(cmd, cwd=tree, env=env, check=True)
    return json.loads(out.read_text())


def check_inputs(rev: str, target: str, summaries: list[str]) -> None:
    """Refuse an unknown revision or target, or a file that is not a sweep's summary (or names a problem key that
    is none), before any worktree or compile."""
    from raytune_attn.problem import Problem
    from raytune_attn.tune.measure.targets import CrossCompileError, parse_target

    known = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", "-q", f"{rev}^{{commit}}"],
                           capture_output=True)  # fmt: skip
    if known.returncode:
        raise SystemExit(f"--rev {rev!r}: not a commit of {ROOT}")
    try:
        parse_target(target)
    except CrossCompileError as e:
        raise SystemExit(f"--target: {e}") from None
    for path in summaries:
        try:
            for search in json.loads(Path(path).read_text())["searches"]:
                if not isinstance(search["problem_key"], str) or not isinstance(search["best_config"], dict):
                    raise TypeError("a search without a problem key or a best config")
                Problem.from_key(search["problem_key"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise SystemExit(f"{path}: not a sweep's summary.json ({type(e).__name__}: {e})") from None


def compare(rev: str, target: str, summaries: list[str]) -> list[dict]:
    check_inputs(rev, target, summaries)
    with tempfile.TemporaryDirectory(prefix="ptx-compare-") as tmp_name:
        tmp = Path(tmp_name)
        old_tree = tmp / "old"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(old_tree), rev], check=True)
        try:
            if not any((old_tree / _MEASURE / name).exists() for name in ("cross_compile.py", _BUILD[0])):
                for name in _BUILD:
                    shutil.copy(ROOT / _MEASURE / name, old_tree / _MEASURE / name)
            new = _run_in(ROOT, target, summaries, tmp, "new")
            old = _run_in(old_tree, target, summaries, tmp, "old")
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old_tree)], check=False)
    rows = []
    for key, n in new.items():
        o = old.get(key, {})
        same = "sha1" in n and n.get("sha1") == o.get("sha1")
        rows.append({"problem_key": key, "same_ptx": same, "dropped_in_old": ",".join(o.get("dropped", [])),
                     "error": n.get("error") or o.get("error") or ""})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("summary", nargs="+", help="a sweep's summary.json (each search's best_config)")
    ap.add_argument("--rev", help="the earlier git revision")
    ap.add_argument("--target", default="cuda:90", help="GPU target, as `raytune-attn cross-compile` takes it")
    ap.add_argument("--out", help="worker mode: where the hashes go")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        _worker(a.target, a.summary, a.out)
        return
    if not a.rev:
        ap.error("--rev is required")
    rows = compare(a.rev, a.target, a.summary)
    print("| problem | same PTX | knobs the older tree lacks | error |\n|---|---|---|---|")
    for r in rows:
        print(f"| {r['problem_key']} | {'yes' if r['same_ptx'] else 'no'} | {r['dropped_in_old']} | {r['error']} |")
    print(f"\nsame PTX on {sum(r['same_ptx'] for r in rows)} of {len(rows)} ({a.target}, {a.rev} vs this tree)")


if __name__ == "__main__":
    main()
