"""Crash-safe writes of node directories: the node layout, staging, commit records, recovery.

A node write is all-or-nothing. Under the node's exclusive lock the writer

1. writes every new file (fsync'd) into ``{node}/.staging-{version}-{random}``;
2. renames that directory to ``{node}/.commit-{version}`` — the **commit point**: before it the
   old node is intact and the staging dir is garbage, after it the new node is decided;
3. rolls forward: ``os.replace`` each file into the node dir (``.meta.json`` last), fsyncs the
   node dir and removes the (now empty) commit dir.

`recover` runs before every write and on any read that sees leftovers: commit dirs are rolled
forward (idempotent: the files still inside are the ones not moved yet), staging dirs and temp
files are deleted. Single files (``.relations.json``) use temp file + fsync + rename.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ABSTRACT_FILE = ".abstract.md"  # L0
OVERVIEW_FILE = ".overview.md"  # L1
CONTENT_FILE = "content.md"  # L2
META_FILE = ".meta.json"
RELATIONS_FILE = ".relations.json"
LOCK_FILE = ".lock"
LEVEL_FILES = (ABSTRACT_FILE, OVERVIEW_FILE, CONTENT_FILE)
NODE_FILES = (ABSTRACT_FILE, OVERVIEW_FILE, CONTENT_FILE, META_FILE, RELATIONS_FILE)

STAGING_PREFIX = ".staging-"
COMMIT_PREFIX = ".commit-"
TMP_PREFIX = ".tmp-"
TOMBSTONE_PREFIX = ".deleted-"

_COMMIT_RE = re.compile(r"^\.commit-(\d+)$")


def fsync_dir(path: Path) -> None:
    """Make the directory entries of ``path`` (creations, renames, removals) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_synced(path: Path, data: bytes) -> None:
    """Create ``path`` (must not exist), write ``data`` fully and fsync it."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)


_FSYNC_POOL = ThreadPoolExecutor(max_workers=8, thread_name_prefix="fsync")


def _fresh_pool_after_fork() -> None:  # a forked child inherits no threads: start over
    global _FSYNC_POOL
    _FSYNC_POOL = ThreadPoolExecutor(max_workers=8, thread_name_prefix="fsync")


os.register_at_fork(after_in_child=_fresh_pool_after_fork)


def write_files_synced(paths_data: Mapping[Path, bytes]) -> None:
    """Create several files and fsync them concurrently: the filesystem journal commits the
    concurrent fsyncs together, so N files cost about one fsync of latency, not N."""
    fds: list[int] = []
    try:
        for path, data in paths_data.items():
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
            fds.append(fd)
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
        if len(fds) == 1:
            os.fsync(fds[0])
        else:
            for f in [_FSYNC_POOL.submit(os.fsync, fd) for fd in fds]:
                f.result()
    finally:
        for fd in fds:
            os.close(fd)


def atomic_write_file(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically (temp file in the same dir + fsync + rename)."""
    tmp = path.parent / f"{TMP_PREFIX}{secrets.token_hex(6)}-{path.name}"
    try:
        write_synced(tmp, data)
        os.replace(tmp, path)
    except Exception:
        _unlink_quietly(tmp)
        raise
    fsync_dir(path.parent)


def _unlink_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def commit_files(node_dir: Path, version: int, files: Mapping[str, bytes]) -> None:
    """Atomically replace the given files of ``node_dir`` (caller holds the exclusive lock).

    If this raises before the commit point nothing changed (the staging dir is removed, or left
    for `recover` to remove); if it raises after, the write is committed and `recover` finishes
    it.
    """
    staging = node_dir / f"{STAGING_PREFIX}{version}-{secrets.token_hex(6)}"
    commit_dir = node_dir / f"{COMMIT_PREFIX}{version}"
    os.mkdir(staging)
    try:
        write_files_synced({staging / name: data for name, data in files.items()})
        fsync_dir(staging)
        os.rename(staging, commit_dir)  # the commit point
    except Exception:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    fsync_dir(node_dir)
    roll_forward(commit_dir, node_dir)


def roll_forward(commit_dir: Path, node_dir: Path) -> None:
    """Move every file of a commit record into the node dir, ``.meta.json`` last. Idempotent."""
    names = sorted(os.listdir(commit_dir), key=lambda n: (n == META_FILE, n))
    for name in names:
        os.replace(commit_dir / name, node_dir / name)
    fsync_dir(node_dir)
    os.rmdir(commit_dir)


def _is_leftover(name: str) -> bool:
    return name.startswith((COMMIT_PREFIX, STAGING_PREFIX, TMP_PREFIX))


def needs_recovery(node_dir: Path) -> bool:
    """True when an interrupted write left a commit record, staging dir or temp file behind."""
    try:
        return any(_is_leftover(name) for name in os.listdir(node_dir))
    except (FileNotFoundError, NotADirectoryError):
        return False


def recover(node_dir: Path) -> bool:
    """Finish or discard interrupted writes in ``node_dir`` (caller holds the exclusive lock).

    Returns True when something was repaired. Also removes tombstones of crashed deletes.
    """
    try:
        names = os.listdir(node_dir)
    except (FileNotFoundError, NotADirectoryError):
        return False
    commits: list[tuple[int, str]] = []
    repaired = False
    for name in names:
        m = _COMMIT_RE.match(name)
        if m:
            commits.append((int(m.group(1)), name))
        elif name.startswith(STAGING_PREFIX) or name.startswith(TOMBSTONE_PREFIX):
            shutil.rmtree(node_dir / name, ignore_errors=True)
            repaired = True
        elif name.startswith(TMP_PREFIX):
            _unlink_quietly(node_dir / name)
            repaired = True
    for _, name in sorted(commits):
        roll_forward(node_dir / name, node_dir)
        repaired = True
    return repaired
