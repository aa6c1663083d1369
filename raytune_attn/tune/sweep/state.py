"""The resume state a sweep writes: data only (JSON), versioned and checksummed, never a pickle.

Two files in the output directory:

- `sweep.json`: one document, the sweep's name and every flag (`write_doc` / `read_doc`);
- `ledger.jsonl`: one line per event, appended as it happens (`Ledger`): each run of the driver (`attempt`), the
  MLflow parent runs it opened (`parents`), and each trial Tune was handed (`trial`). A line is written with one
  `os.write` on an `O_APPEND` descriptor, so a driver killed with -9 leaves whole lines only.

Every document and line carries its format name, version and the SHA-256 of its payload (canonical JSON). A reader
refuses anything else (not JSON, another format, a newer version, a checksum that does not match, a truncated line)
with a `ResumeStateError` that names the file (and line), in milliseconds: nothing is executed or waited on. The one
repair: a resume cuts a ledger's last line that a write left short (`Ledger.drop_torn_tail`) and says so.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

SWEEP_FORMAT = "raytune-attn.sweep"
LEDGER_FORMAT = "raytune-attn.ledger"
VERSION = 1
FILE_MODE = 0o644  # never group- or other-writable, whatever the umask (trust.py refuses those at a resume)


class ResumeStateError(ValueError):
    """A resume state file that is corrupt, foreign or from another version: one line naming the file."""


def _digest(payload: Any) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _sealed(fmt: str, payload: dict) -> dict:
    return {"format": fmt, "version": VERSION, "sha256": _digest(payload), "payload": payload}


def _opened(where: str, fmt: str, doc: Any) -> dict:
    """The payload of a sealed document, or ResumeStateError saying what is wrong with it (`where` names it)."""
    if not isinstance(doc, dict) or doc.get("format") != fmt:
        raise ResumeStateError(f"{where}: not a {fmt} file (a foreign or hand-written file cannot be resumed)")
    if doc.get("version") != VERSION:
        raise ResumeStateError(f"{where}: {fmt} version {doc.get('version')!r}, this raytune-attn reads "
                               f"version {VERSION}")
    payload = doc.get("payload")
    if not isinstance(payload, dict) or doc.get("sha256") != _digest(payload):
        raise ResumeStateError(f"{where}: checksum mismatch (the file was changed or damaged after it was written)")
    return payload


def write_doc(path: str | os.PathLike, payload: dict, fmt: str = SWEEP_FORMAT) -> Path:
    """`payload` sealed into `path`, atomically (a reader sees the old file or the new one, whole)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
        os.write(fd, json.dumps(_sealed(fmt, payload), indent=1).encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    return path


def read_doc(path: str | os.PathLike, fmt: str = SWEEP_FORMAT) -> dict:
    """The payload `write_doc` sealed into `path`; ResumeStateError naming the file otherwise."""
    path = Path(path)
    try:
        doc = json.loads(path.read_bytes())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ResumeStateError(f"{path}: not JSON ({type(e).__name__}: {e}); truncated or not a state file") from None
    return _opened(str(path), fmt, doc)


class Ledger:
    """The append-only event log of a sweep (see the module doc). Records are plain JSON dicts with a `kind`."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    def append(self, record: dict) -> None:
        line = json.dumps(_sealed(LEDGER_FORMAT, record), separators=(",", ":")) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, FILE_MODE)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def drop_torn_tail(self) -> int:
        """Cut a last line that a write left short (a full disk, power loss: a kill leaves whole lines) back to the
        last whole line, so the file reads and appends again; the bytes dropped (0 for a whole file). The lost
        record is at most one event: a trial handed out (its row, if it ended, is in the results), the MLflow
        parents of an attempt, or the attempt's own mark."""
        if not self.path.exists():
            return 0
        data = self.path.read_bytes()
        if not data or data.endswith(b"\n"):
            return 0
        keep = data.rfind(b"\n") + 1
        os.truncate(self.path, keep)
        return len(data) - keep

    def records(self) -> list[dict]:
        """Every record, in order ([] when the file does not exist); ResumeStateError at the first bad line."""
        if not self.path.exists():
            return []
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            raise ResumeStateError(f"{self.path}: the last line is cut short (truncated file)")
        out = []
        for n, line in enumerate(data.splitlines(), 1):
            where = f"{self.path} line {n}"
            try:
                doc = json.loads(line)
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                raise ResumeStateError(f"{where}: not JSON ({e})") from None
            rec = _opened(where, LEDGER_FORMAT, doc)
            if not isinstance(rec.get("kind"), str):
                raise ResumeStateError(f"{where}: a record without a kind")
            out.append(rec)
        return out
