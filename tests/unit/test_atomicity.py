"""Crash safety and concurrency of ContextFS writes (the owner lock: test_owner_lock.py).

The fault injector makes the k-th call of a file-system primitive (open, mkdir, write, fsync,
rename, replace, rmdir, unlink) fail, for every k a write makes; a fresh ContextFS must then
read exactly the old node or exactly the new one.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from ctxpipe.core.errors import (
    LockTimeoutError,
    NodeNotFoundError,
    StorageError,
    VersionConflictError,
)
from ctxpipe.core.models import ContextNode, content_hash
from ctxpipe.fs import ContextFS

NodeFactory = Callable[..., ContextNode]
URI = "ctx://acme/users/u1/memories/profile/name"
PRIMITIVES = ("open", "mkdir", "write", "fsync", "rename", "replace", "rmdir", "unlink")
LEFTOVER_PREFIXES = (".staging-", ".commit-", ".tmp-", ".deleted-")


class SimulatedCrash(BaseException):
    """Not an Exception: no cleanup handler runs, as if the process had died right here."""


class FaultInjector:
    """Makes the ``fail_at``-th call (1-based) of any patched primitive raise, once."""

    def __init__(self, fail_at: int, error: Callable[[str], BaseException]) -> None:
        self.fail_at = fail_at
        self.error = error
        self.calls = 0
        self.fired_on = ""

    @contextmanager
    def active(self) -> Iterator[FaultInjector]:
        with pytest.MonkeyPatch.context() as mp:
            for name in PRIMITIVES:
                mp.setattr(os, name, self._wrap(name, getattr(os, name)))
            yield self

    def _wrap(self, name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            if self.calls == self.fail_at:
                self.fired_on = name
                raise self.error(name)
            return real(*args, **kwargs)

        return wrapper


def _crash(name: str) -> BaseException:
    return SimulatedCrash(name)


def _io_error(name: str) -> BaseException:
    return OSError(5, f"injected failure in os.{name}")


def signature(node: ContextNode) -> tuple[object, ...]:
    return (
        node.abstract,
        node.overview,
        node.content,
        node.metadata,
        node.source_refs,
        node.category,
        node.version,
        node.content_hash,
    )


def node_bytes(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in path.iterdir() if p.is_file() and p.name != ".lock"}


def leftovers(path: Path) -> list[str]:
    if not path.exists():
        return []
    return [p.name for p in path.iterdir() if p.name.startswith(LEFTOVER_PREFIXES)]


def _explore(
    tmp_path: Path, make_node: NodeFactory, error: Callable[[str], BaseException], first: bool
) -> list[str]:
    """Interrupt the write at every k; the outcome for each k: "old", "new" or "absorbed"
    (the write handled the failure and succeeded)."""
    outcomes: list[str] = []
    k = 0
    while True:
        k += 1
        root = tmp_path / f"{error.__name__}-{first}-{k}"
        fs = ContextFS(root)
        old = None if first else fs.write_node(make_node(URI, "old"))
        node_dir = fs.resolve_path(URI)
        old_bytes = node_bytes(node_dir) if old else {}
        new = make_node(URI, "new", metadata={"tag": "new", "stats": {"calls": 2}})
        injector = FaultInjector(k, error)
        returned: ContextNode | None = None
        with injector.active():
            try:
                returned = fs.write_node(new, expected_version=0 if first else 1)
            except (SimulatedCrash, OSError, StorageError):
                pass
        if not injector.fired_on:
            assert returned is not None and returned.version == (1 if first else 2)
            outcomes.append("new")
            break

        fresh = ContextFS(root)
        try:
            got = fresh.read_node(URI)
        except NodeNotFoundError:
            got = None
        expected_new = (
            "abstract new",
            "overview new",
            "content new",
            {"tag": "new", "stats": {"calls": 2}},
            ["m-new"],
            "profile",
            1 if first else 2,
            content_hash("abstract new", "overview new", "content new"),
        )
        where = f"k={k} ({injector.fired_on})"
        if got is None or (old is not None and signature(got) == signature(old)):
            assert first == (got is None), where
            outcomes.append("old")
            if old is not None:
                assert node_bytes(node_dir) == old_bytes, where  # byte-for-byte the old node
            else:
                assert not fresh.exists(URI), where
        else:
            assert signature(got) == expected_new, where
            outcomes.append("new")
        if returned is not None:  # the failure was absorbed (e.g. mkdir of an existing dir)
            assert got is not None and signature(got) == signature(returned), where
            outcomes[-1] = "absorbed"
        assert leftovers(node_dir) == [], where
        # the store keeps working: the next write builds on whatever survived
        follow = fresh.write_node(
            make_node(URI, "next"), expected_version=got.version if got else 0
        )
        assert follow.version == (got.version if got else 0) + 1
        assert fresh.read_node(URI).abstract == "abstract next"
    return outcomes


@pytest.mark.parametrize("error", [_crash, _io_error], ids=["crash", "io-error"])
@pytest.mark.parametrize("first", [False, True], ids=["update", "create"])
def test_interrupted_write_leaves_old_or_new(
    tmp_path: Path, make_node: NodeFactory, error: Callable[[str], BaseException], first: bool
) -> None:
    outcomes = _explore(tmp_path, make_node, error, first)
    assert len(outcomes) > 15  # every primitive call of the write was interrupted once
    # before the commit point the old node survives, after it the new one: both happen, and
    # once the new node is decided no later interruption brings the old one back
    decided = [o for o in outcomes[:-1] if o != "absorbed"]
    assert "old" in decided and "new" in decided
    first_new = decided.index("new")
    assert all(o == "new" for o in decided[first_new:]), outcomes


def test_stale_staging_dir_is_discarded(fs: ContextFS, make_node: NodeFactory) -> None:
    fs.write_node(make_node(URI, "old"))
    d = fs.resolve_path(URI)
    staging = d / ".staging-2-abcdef"
    staging.mkdir()
    (staging / ".abstract.md").write_text("half-written")
    (staging / "content.md").write_text("garbage")
    assert ContextFS(fs.fs_root).read_node(URI).abstract == "abstract old"
    assert not staging.exists()


def test_half_rolled_forward_commit_is_finished(fs: ContextFS, make_node: NodeFactory) -> None:
    fs.write_node(make_node(URI, "old"))
    other_root = fs.fs_root.parent / "other"
    newer = ContextFS(other_root)
    newer.write_node(make_node(URI, "old"))
    wanted = newer.write_node(make_node(URI, "new"))
    # a commit record as a crash mid roll-forward leaves it: L0 and L1 already moved
    d = fs.resolve_path(URI)
    commit = d / ".commit-2"
    commit.mkdir()
    src = newer.resolve_path(URI)
    for name in ("content.md", ".history.jsonl", ".meta.json"):
        (commit / name).write_bytes((src / name).read_bytes())
    for name in (".abstract.md", ".overview.md"):
        (d / name).write_bytes((src / name).read_bytes())
    got = ContextFS(fs.fs_root).read_node(URI)
    assert signature(got) == signature(wanted)
    assert not commit.exists()
    assert node_bytes(d) == node_bytes(src)


def test_stat_and_listing_also_recover(fs: ContextFS, make_node: NodeFactory) -> None:
    fs.write_node(make_node(URI, "old"))
    d = fs.resolve_path(URI)
    (d / ".staging-9-x").mkdir()
    assert fs.stat_node(URI).version == 1
    assert not (d / ".staging-9-x").exists()
    (d / ".tmp-123-.relations.json").write_text("{")
    [summary] = fs.list_children(URI.rsplit("/", 1)[0])
    assert summary.version == 1
    assert leftovers(d) == []


# ---------------------------------------------------------------------------- concurrency


def _race(root: Path, node_a: ContextNode, node_b: ContextNode) -> dict[str, object]:
    """Two threads, two ContextFS instances, one expected_version; returns node or error."""
    barrier = threading.Barrier(2)
    results: dict[str, object] = {}

    def writer(tag: str, node: ContextNode) -> None:
        barrier.wait()
        try:
            results[tag] = ContextFS(root).write_node(node, expected_version=1)
        except VersionConflictError as exc:
            results[tag] = exc

    threads = [
        threading.Thread(target=writer, args=("left", node_a)),
        threading.Thread(target=writer, args=("right", node_b)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_two_writers_same_expected_version_one_wins(fs: ContextFS, make_node: NodeFactory) -> None:
    for round_no in range(15):
        uri = f"ctx://acme/users/u1/race/{round_no}"
        fs.write_node(make_node(uri, "base"))
        results = _race(fs.fs_root, make_node(uri, "left"), make_node(uri, "right"))
        winners = [tag for tag, r in results.items() if isinstance(r, ContextNode)]
        losers = [r for r in results.values() if isinstance(r, VersionConflictError)]
        assert len(winners) == 1 and len(losers) == 1, results
        assert losers[0].expected == 1 and losers[0].actual == 2
        stored = fs.read_node(uri)
        assert stored.version == 2 and stored.abstract == f"abstract {winners[0]}"


def test_readers_never_see_a_mix(fs: ContextFS, make_node: NodeFactory) -> None:
    fs.write_node(make_node(URI, "0"))
    stop = threading.Event()
    problems: list[str] = []
    reads = 0

    def reader() -> None:
        nonlocal reads
        mine = ContextFS(fs.fs_root)
        while not stop.is_set():
            n = mine.read_node(URI)
            tag = n.abstract.removeprefix("abstract ")
            if (n.overview, n.content, n.metadata, n.content_hash) != (
                f"overview {tag}",
                f"content {tag}",
                {"tag": tag},
                content_hash(n.abstract, n.overview, n.content),
            ) or n.version != int(tag) + 1:
                problems.append(f"mixed node: {n!r}")
            reads += 1

    readers = [threading.Thread(target=reader) for _ in range(3)]
    # threads take turns every 0.1 ms instead of 5: the writer, which gives the interpreter
    # up at each file-system call, is not kept waiting by three spinning readers, and they
    # read between more of its steps
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    for t in readers:
        t.start()
    try:
        for i in range(1, 60):
            fs.write_node(make_node(URI, str(i)), expected_version=i)
    finally:
        stop.set()
        for t in readers:
            t.join()
        sys.setswitchinterval(interval)
    assert problems == []
    assert reads > 0
    assert fs.read_node(URI).version == 60


def _compare_and_set(root: str, uri: str, todo: int, who: str) -> None:
    """A forked process's loop: read, increment, write if the version is still the one read
    (its own ContextFS; the parent's imports are shared, not its objects)."""
    fs = ContextFS(root)
    while todo:
        cur = fs.read_node(uri)
        count = cur.metadata["count"] + 1
        upd = {"metadata": {"count": count}, "content": f"{who} made {count}"}
        try:
            fs.write_node(cur.model_copy(update=upd), expected_version=cur.version)
            todo -= 1
        except VersionConflictError:
            pass


def test_processes_compare_and_set_without_losing_updates(
    fs: ContextFS, make_node: NodeFactory
) -> None:
    fs.write_node(make_node(URI, "c", metadata={"count": 0}))
    forked = multiprocessing.get_context("fork")  # no interpreter start and imports again
    procs = [
        forked.Process(target=_compare_and_set, args=(str(fs.fs_root), URI, 25, f"p{i}"))
        for i in range(3)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    final = fs.read_node(URI)
    assert final.metadata == {"count": 75}
    assert final.version == 76
    assert final.content.endswith("made 75")


def test_node_lock_times_out(fs: ContextFS, make_node: NodeFactory) -> None:
    fs.write_node(make_node(URI, "a"))
    impatient = ContextFS(fs.fs_root, lock_timeout_s=0.05)
    errors: list[BaseException] = []

    def other() -> None:
        for call in (
            lambda: impatient.write_node(make_node(URI, "b")),
            lambda: impatient.read_node(URI),
        ):
            try:
                call()
            except LockTimeoutError as exc:
                errors.append(exc)

    with fs.locked(URI) as path:
        assert path == fs.resolve_path(URI)
        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert len(errors) == 2
    assert "could not acquire lock" in str(errors[0])
    assert fs.read_node(URI).abstract == "abstract a"
    assert impatient.write_node(make_node(URI, "b")).version == 2


def test_locked_requires_an_existing_node(fs: ContextFS) -> None:
    with pytest.raises(NodeNotFoundError):
        with fs.locked(URI):
            pass


def test_delete_waits_for_a_writer_and_writer_recreates(
    fs: ContextFS, make_node: NodeFactory
) -> None:
    fs.write_node(make_node(URI, "a"))
    done = threading.Event()

    def deleter() -> None:
        ContextFS(fs.fs_root).delete(URI)
        done.set()

    with fs.locked(URI):
        t = threading.Thread(target=deleter)
        t.start()
        time.sleep(0.05)
        assert not done.is_set()  # blocked by the node lock
    t.join()
    assert not fs.exists(URI)
    assert fs.write_node(make_node(URI, "b"), expected_version=0).version == 1
