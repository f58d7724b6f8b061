"""Can the ContextFS take a commit? Checked before a commit writes anything.

A disk that is full (or below the configured free-space floor) or mounted read-only would
otherwise fail a commit halfway through its write phase. The check reads the filesystem's own
numbers (`statvfs`) and then proves a write: it creates, fills and removes a probe file in the
FS root, so a read-only mount, a permission problem or a disk with no blocks left is caught by
the kernel itself, not guessed.
"""

from __future__ import annotations

import errno
import os
import secrets
from pathlib import Path

from ctxpipe.core.errors import FilesystemUnavailableError

MB = 1024 * 1024
# errors that mean "this filesystem takes no more writes", as opposed to a bug or a missing file
NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})
PROBE_PREFIX = ".tmp-probe-"


def is_out_of_space(exc: BaseException) -> bool:
    """An OSError saying the filesystem is full, over quota or read-only."""
    return isinstance(exc, OSError) and exc.errno in NO_SPACE_ERRNOS


def check_writable(root: Path, min_free_mb: int) -> None:
    """Raise FilesystemUnavailableError (one line) unless `root` can take a commit."""
    root.mkdir(parents=True, exist_ok=True)
    st = os.statvfs(root)
    if st.f_flag & os.ST_RDONLY:
        raise FilesystemUnavailableError(f"the filesystem of {root} is mounted read-only")
    free_mb = st.f_bavail * st.f_frsize // MB
    if free_mb < min_free_mb:
        raise FilesystemUnavailableError(
            f"the filesystem of {root} is full: {free_mb} MB free, below the "
            f"{min_free_mb} MB floor (CTXPIPE_FS_MIN_FREE_MB)"
        )
    probe = root / f"{PROBE_PREFIX}{secrets.token_hex(6)}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, b"\0" * 4096)
        finally:
            os.close(fd)
    except OSError as exc:
        raise FilesystemUnavailableError(
            f"the filesystem of {root} takes no writes: {exc.strerror or exc}"
        ) from exc
    finally:
        try:
            os.unlink(probe)
        except OSError:
            pass
