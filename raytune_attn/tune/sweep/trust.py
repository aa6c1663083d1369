"""Which files a resume trusts, checked as OpenSSH's StrictModes checks the files it reads.

A resume reads the output directory's state (`sweep.json`, `ledger.jsonl`, the trial rows): what they say decides
what runs next (problem sets, the --space file, the tracking store). So before reading them it checks that the
directory and each of those files belong to the user running it and are not writable by group or others; anyone
else who could write them could steer the resume. The sweep creates them that way (state.FILE_MODE, the output
directory's mode in plan.write_plan), whatever the umask. docs/sweep.md ("Trust boundary") says what is and is not read.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from raytune_attn.tune.sweep.state import ResumeStateError


def check_private(path: str | os.PathLike) -> None:
    """`path` (a file or directory, if it exists) is owned by this user and not group/other-writable; else
    ResumeStateError naming it and how to fix it."""
    path = Path(path)
    try:
        st = path.lstat()
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise ResumeStateError(f"{path}: a symbolic link; a resume reads its state only from plain files")
    if st.st_uid != os.getuid():
        raise ResumeStateError(f"{path}: owned by uid {st.st_uid}, not by you (uid {os.getuid()}); a resume reads "
                               "state only from files you own")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise ResumeStateError(f"{path}: writable by group or others (mode {stat.S_IMODE(st.st_mode):o}); a resume "
                               f"refuses state that others could change: chmod go-w {path}")

