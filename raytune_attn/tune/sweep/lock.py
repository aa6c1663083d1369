"""One sweep per output directory at a time: `<out>/sweep.lock`, taken before Ray starts, released on any exit.

The lock is an `flock` on the file, held by an open descriptor for the sweep's life: the kernel releases it when
the process ends however it ends (kill -9 included), so a lock is never left held by a dead process on this host.
The file says who holds it (pid, host, start time) for the error a second sweep gets; a clean exit removes it. A
file left behind by a driver that died (its flock gone) is stale: taken over when its host is this one, refused
when another host wrote it (that host's sweep may still run on a shared file system whose locks do not reach here;
the error says to remove the file if no sweep runs there).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import time
from pathlib import Path

from raytune_attn.tune.sweep.config import SweepUsageError

log = logging.getLogger(__name__)
LOCK_NAME = "sweep.lock"


class SweepLocked(SweepUsageError):
    """Another sweep holds the output directory."""


def _holder(path: Path) -> dict:
    try:
        got = json.loads(path.read_text())
        return got if isinstance(got, dict) else {}
    except (OSError, ValueError):
        return {}


def describe(holder: dict) -> str:
    started = holder.get("started")
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)) if isinstance(started, (int, float)) else "?"
    return f"pid {holder.get('pid', '?')} on host {holder.get('host', '?')}, started {when}"


def _pid_alive(pid) -> bool:
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, TypeError, ValueError):
        return True  # another user's process, or no pid: not provably dead
    return True


def _refusal(out: Path, holder: dict) -> SweepLocked:
    return SweepLocked(f"--out {out} is in use by another sweep ({describe(holder)}): wait for it to end, or give "
                       f"another --out; if no sweep runs there, remove {out / LOCK_NAME}")


def check_free(out: Path) -> None:
    """Raise SweepLocked when a live sweep holds `out` (a read-only look, for the plan's early errors)."""
    path = out / LOCK_NAME
    if not path.exists():
        return
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        raise _refusal(out, _holder(path)) from None
    finally:
        os.close(fd)


class SweepLock:
    """`with SweepLock(out):` holds `out` for this process (SweepLocked if another sweep does)."""

    def __init__(self, out: str | os.PathLike):
        self.out = Path(out)
        self.path = self.out / LOCK_NAME
        self.fd: int | None = None

    def __enter__(self) -> SweepLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def acquire(self) -> None:
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise _refusal(self.out, _holder(self.path)) from None
            # A holder that released between our open and flock may have removed the file: lock the file that is
            # there now, not an unlinked one.
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        old = _holder(self.path)
        if old:
            self._take_over(fd, old)
        me = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(me).encode(), 0)
        self.fd = fd

    def _take_over(self, fd: int, old: dict) -> None:
        """A lock file whose holder died (its flock is gone): this host's is stale, another host's is refused."""
        if old.get("host") != socket.gethostname():
            os.close(fd)
            raise _refusal(self.out, old)
        state = "dead" if not _pid_alive(old.get("pid")) else "alive but not holding the lock (pid reused)"
        log.warning("stale lock %s (%s: %s) taken over", self.path, describe(old), state)

    def release(self) -> None:
        if self.fd is None:
            return
        try:
            os.unlink(self.path)  # while still holding it: a waiting sweep then re-opens the path (see acquire)
        except FileNotFoundError:
            pass
        os.close(self.fd)
        self.fd = None
