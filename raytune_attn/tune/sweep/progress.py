"""Live progress of a sweep: one plain line per finished trial (no control characters, so logs and CI read it),
and the sweep's log lines beside them (`show_log`).

    [tune 0:01:02] H100/dense-b4-...: 12/40 trials (ok 9, ...) best 512.3 TFLOP/s | all 30/240, ETA 0:08:10
"""

from __future__ import annotations

import logging
import sys
import time


def hms(seconds: float) -> str:
    s = max(0, int(round(seconds)))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


class Progress:
    def __init__(self, totals: dict[str, int], *, stream=None, t0: float | None = None, done: dict | None = None):
        self.totals = dict(totals)
        self.stream = stream or sys.stdout
        self.t0 = t0 or time.time()
        self.counts = {k: {"ok": 0, "invalid": 0, "error": 0, "stopped": 0} for k in totals}
        self.best: dict[str, float] = {}
        self.done_before = sum((done or {}).values())  # trials finished before a resume (not in this ETA's rate)
        for k, n in (done or {}).items():
            if k in self.counts:
                self.counts[k]["ok"] += n

    def trial_done(self, search: str, status: str, tflops: float | None) -> str:
        c = self.counts.setdefault(search, {"ok": 0, "invalid": 0, "error": 0, "stopped": 0})
        c[status if status in c else "error"] += 1
        if status in ("ok", "stopped") and tflops and tflops > 0:
            self.best[search] = max(self.best.get(search, 0.0), tflops)
        line = self.line(search)
        print(line, file=self.stream, flush=True)
        return line

    def line(self, search: str) -> str:
        c = self.counts[search]
        n = sum(c.values())
        elapsed = time.time() - self.t0
        all_done = sum(sum(v.values()) for v in self.counts.values())
        total = sum(self.totals.values())
        new = all_done - self.done_before
        eta = elapsed / new * (total - all_done) if new > 0 else float("nan")
        best = self.best.get(search)
        best_s = f"best {best:.4g} TFLOP/s" if best else "no valid config yet"
        return (f"[tune {hms(elapsed)}] {search}: {n}/{self.totals.get(search, '?')} trials (ok {c['ok']}, "
                f"stopped {c['stopped']}, invalid {c['invalid']}, error {c['error']}) {best_s} | all "
                f"{all_done}/{total}, ETA {hms(eta) if eta == eta else '?'}")


class _Stdout(logging.StreamHandler):
    """The sweep's log lines on whatever sys.stdout is when they are written, beside the progress lines."""

    def __init__(self):
        super().__init__(sys.stdout)

    @property
    def stream(self):
        return sys.stdout

    @stream.setter
    def stream(self, _value):
        pass


class _Format(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        word = "warning: " if record.levelno >= logging.WARNING else ""
        return f"[tune] {word}{record.getMessage()}"


def show_log(level: int = logging.INFO) -> None:
    """The sweep's module loggers (raytune_attn.tune.*) as `[tune] ...` lines on stdout, once per process."""
    logger = logging.getLogger("raytune_attn.tune")
    if not any(isinstance(h, _Stdout) for h in logger.handlers):
        handler = _Stdout()
        handler.setFormatter(_Format())
        logger.addHandler(handler)
    logger.setLevel(level)
