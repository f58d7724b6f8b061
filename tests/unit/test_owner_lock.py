"""The owner-space lock (LocalOwnerLock): threads and processes of one machine exclude each
other per key; independent keys never block each other; waiting is bounded."""

from __future__ import annotations

import multiprocessing
import threading
import time
from multiprocessing.synchronize import Event
from pathlib import Path

import pytest

from ctxpipe.core.errors import LockTimeoutError
from ctxpipe.fs import LocalOwnerLock, OwnerLock

# ---------------------------------------------------------------------------- owner lock


def test_local_owner_lock_is_an_owner_lock(fs_root: Path) -> None:
    lock = LocalOwnerLock(fs_root)
    assert isinstance(lock, OwnerLock)
    path = lock.lock_path("acme/users/u1")
    assert path.parent == fs_root / ".locks"
    assert path.suffix == ".lock" and "u1" not in path.name  # a lock file names no one
    assert lock.lock_path("acme/users/u1") != lock.lock_path("acme/users/u1 ")
    with pytest.raises(ValueError):
        lock.lock_path("")


def test_owner_lock_excludes_threads(fs_root: Path) -> None:
    lock = LocalOwnerLock(fs_root)
    inside = 0
    peak = 0
    guard = threading.Lock()

    def work() -> None:
        nonlocal inside, peak
        for _ in range(5):
            with lock.hold("acme/users/u1", timeout=10):
                with guard:
                    inside += 1
                    peak = max(peak, inside)
                time.sleep(0.002)
                with guard:
                    inside -= 1

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak == 1


def test_owner_lock_timeout_and_independent_keys(fs_root: Path) -> None:
    lock = LocalOwnerLock(fs_root, default_timeout=0.2)
    outcome: list[str] = []

    def contender(key: str) -> None:
        try:
            with lock.hold(key):
                outcome.append(f"got {key}")
        except LockTimeoutError as exc:
            outcome.append(str(exc))

    with lock.hold("acme/users/u1"):
        for key in ("acme/users/u1", "acme/agents/a1"):
            t = threading.Thread(target=contender, args=(key,))
            t.start()
            t.join()
    assert outcome[0] == "could not acquire lock 'acme/users/u1' within 0.2s"
    assert outcome[1] == "got acme/agents/a1"
    with lock.hold("acme/users/u1", timeout=0.1):
        pass  # released again


def _hold(root: str, key: str, held: Event, release: Event) -> None:
    """A forked process holds `key` until told to let go."""
    with LocalOwnerLock(root).hold(key, timeout=10):
        held.set()
        release.wait(30)


def test_owner_lock_excludes_other_processes(fs_root: Path) -> None:
    key = "acme/users/u1"
    forked = multiprocessing.get_context("fork")  # no interpreter start and imports again
    held, release = forked.Event(), forked.Event()
    holder = forked.Process(target=_hold, args=(str(fs_root), key, held, release))
    holder.start()
    try:
        assert held.wait(30)
        lock = LocalOwnerLock(fs_root)
        start = time.monotonic()
        with pytest.raises(LockTimeoutError):
            with lock.hold(key, timeout=0.3):
                pass
        assert time.monotonic() - start >= 0.3
        release.set()
        holder.join(timeout=30)
        assert holder.exitcode == 0
        with lock.hold(key, timeout=5):
            pass
    finally:
        if holder.is_alive():
            holder.kill()
            holder.join()
