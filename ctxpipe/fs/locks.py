"""Locks of the ContextFS: per-node reader/writer locks and the owner-space lock.

Both combine an in-process ``threading.Lock`` (so threads of one process queue without polling)
with an ``fcntl.flock`` on a lock file (so processes on one machine exclude each other). A flock
belongs to an open file description, so every acquisition opens its own descriptor: two threads
of one process exclude each other just like two processes do.

The owner-space lock (`OwnerLock`) serialises whole commits of one owner space
(``acme/users/u1``). `LocalOwnerLock` is the single-machine implementation; a Redis-backed one
implements the same one-method protocol for several machines.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar, runtime_checkable

from ctxpipe.core.errors import LockTimeoutError
from ctxpipe.fs.atomic import LOCK_FILE, needs_recovery, recover

T = TypeVar("T")

_POLL_MIN_S = 0.0005
_POLL_MAX_S = 0.02


@dataclass
class _Entry:
    lock: threading.Lock = field(default_factory=threading.Lock)
    users: int = 0


class _KeyedLocks:
    """One ``threading.Lock`` per key, dropped again when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._entries: dict[str, _Entry] = {}

    @contextlib.contextmanager
    def hold(self, key: str, timeout: float, display: str) -> Iterator[None]:
        with self._guard:
            entry = self._entries.setdefault(key, _Entry())
            entry.users += 1
        try:
            if not entry.lock.acquire(timeout=max(timeout, 0.0)):
                raise LockTimeoutError(display, timeout)
            try:
                yield
            finally:
                entry.lock.release()
        finally:
            with self._guard:
                entry.users -= 1
                if entry.users == 0:
                    self._entries.pop(key, None)


_THREAD_LOCKS = _KeyedLocks()


def _flock_until(fd: int, op: int, deadline: float, key: str, timeout: float) -> None:
    delay = _POLL_MIN_S
    while True:
        try:
            fcntl.flock(fd, op | fcntl.LOCK_NB)
            return
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise LockTimeoutError(key, timeout)
        time.sleep(min(delay, remaining))
        delay = min(delay * 2, _POLL_MAX_S)


@contextlib.contextmanager
def file_lock(
    lock_path: Path, *, exclusive: bool, timeout: float, key: str | None = None
) -> Iterator[None]:
    """Hold an flock on ``lock_path`` (created if missing).

    Handles the lock file being removed or replaced while we waited (e.g. its directory was
    deleted): after locking, the path must still name the locked inode, else we retry.
    """
    name = key or str(lock_path)
    deadline = time.monotonic() + timeout
    op = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
    while True:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            _flock_until(fd, op, deadline, name, timeout)
            try:
                same = os.stat(lock_path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if not same:
                os.close(fd)
                fd = -1
                if not lock_path.parent.is_dir():
                    raise FileNotFoundError(errno.ENOENT, "lock directory vanished", str(lock_path))
                continue
            yield
            return
        finally:
            if fd >= 0:
                os.close(fd)  # closing the descriptor releases the flock


@contextlib.contextmanager
def node_lock(
    node_dir: Path,
    *,
    exclusive: bool,
    timeout: float,
    lock_name: str = ".lock",
    display: str | None = None,
) -> Iterator[None]:
    """The per-node lock ``{node}/.lock``: exclusive for writers, shared for readers.

    Writers additionally queue on an in-process lock keyed by the node directory. ``display``
    names the node in a `LockTimeoutError`.
    """
    lock_path = node_dir / lock_name
    name = display or str(node_dir)
    if not exclusive:
        with file_lock(lock_path, exclusive=False, timeout=timeout, key=name):
            yield
        return
    start = time.monotonic()
    with _THREAD_LOCKS.hold(str(lock_path), timeout, name):
        remaining = max(timeout - (time.monotonic() - start), 0.0)
        with file_lock(lock_path, exclusive=True, timeout=remaining, key=name):
            yield


# errors opening a node's lock file that mean "read without the lock" (gone, or read-only)
_UNLOCKABLE = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EACCES, errno.EPERM, errno.EROFS})


class NodeLocks:
    """The node locks of one FS root, with crash recovery on the way in."""

    def __init__(self, fs_root: Path, timeout: float) -> None:
        self.fs_root = fs_root
        self.timeout = timeout

    def hold(self, node_dir: Path, *, exclusive: bool) -> AbstractContextManager[None]:
        try:
            display = "node " + str(node_dir.relative_to(self.fs_root))
        except ValueError:
            display = str(node_dir)
        return node_lock(
            node_dir,
            exclusive=exclusive,
            timeout=self.timeout,
            lock_name=LOCK_FILE,
            display=display,
        )

    def read(self, node_dir: Path, fn: Callable[[], T]) -> T:
        """Run ``fn`` under the shared lock, first repairing an interrupted write (exclusive)."""
        with contextlib.ExitStack() as stack:
            if node_dir.is_dir() and not node_dir.is_symlink():
                try:
                    stack.enter_context(self.hold(node_dir, exclusive=False))
                    if needs_recovery(node_dir):
                        stack.close()
                        stack.enter_context(self.hold(node_dir, exclusive=True))
                        recover(node_dir)
                except OSError as exc:
                    if exc.errno not in _UNLOCKABLE:
                        raise
                    stack.close()  # deleted meanwhile, or a read-only tree: read unlocked
            return fn()


# ----------------------------------------------------------------------------- owner lock
@runtime_checkable
class OwnerLock(Protocol):
    """Serialises writers of one owner space (e.g. ``acme/users/u1``), across processes.

    ``hold`` raises `LockTimeoutError` when the lock cannot be taken within ``timeout``
    seconds (``None``: the implementation's default). Not re-entrant.
    """

    def hold(self, key: str, timeout: float | None = None) -> AbstractContextManager[None]: ...


class LocalOwnerLock:
    """`OwnerLock` for one machine: threading lock + flock on ``{fs_root}/.locks/{hash}.lock``
    (the file is named by a hash of the key only: a lock file names no user, and it outlives
    the user's erasure)."""

    def __init__(self, fs_root: Path | str, default_timeout: float = 30.0) -> None:
        self.lock_dir = Path(fs_root) / ".locks"
        self.default_timeout = default_timeout

    def lock_path(self, key: str) -> Path:
        if not key:
            raise ValueError("owner lock key must not be empty")
        digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]
        return self.lock_dir / f"{digest}.lock"

    @contextlib.contextmanager
    def hold(self, key: str, timeout: float | None = None) -> Iterator[None]:
        wait = self.default_timeout if timeout is None else timeout
        path = self.lock_path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        start = time.monotonic()
        with _THREAD_LOCKS.hold(f"owner:{path}", wait, key):
            remaining = max(wait - (time.monotonic() - start), 0.0)
            with file_lock(path, exclusive=True, timeout=remaining, key=key):
                yield
