"""Outages as tests (in process, real servers, the real model):

- PostgreSQL stops while commits run: the commits still succeed on the FS (the primary store),
  their outbox registration fails with a warning, and one run of the periodic repair job after
  PostgreSQL is back makes the replica equal to the FS again;
- the broker is unreachable at submit: one clear error, the commit can be sent again with the
  same commit id once the broker is back, nothing else was done;
- the FS is full (below its free-space floor) or read-only: the commit fails before it writes
  anything; a disk that fills up *during* the write phase fails the attempt with a transient
  error, leaves no half-written node, and the same commit run again once there is space ends
  exactly like a commit that never met the fault.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis

from ctxpipe.commit.coordinator import CommitCoordinator
from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.enums import CommitStatus
from ctxpipe.core.errors import CommitError, StorageError
from ctxpipe.core.session import SessionInput
from ctxpipe.index.wiring import make_repair, make_worker
from ctxpipe.runtime import Runtime
from ctxpipe.storage import embedded_pg
from ctxpipe.storage.migrations import migrate
from ctxpipe.storage.netutil import free_port

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "conversations"
SCHEMA, EMBEDDING_DIM = "ctx", 384
PG_TEST_OPTIONS = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


def request(name: str, commit_id: str, **ctx: str) -> CommitRequest:
    raw = json.loads((FIXTURES / name).read_text(encoding="utf-8"))
    raw.update(ctx)
    return CommitRequest.from_session(SessionInput.model_validate(raw), commit_id=commit_id)


def fs_snapshot(root: Path) -> dict[str, bytes]:
    """Every file under the FS root (lock files aside: they are created on demand)."""
    if not root.exists():
        return {}
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.endswith(".lock")
    }


def replica_diff(rt: Runtime) -> dict[str, Any]:
    fs = {}
    for meta in rt.settings.fs_root.rglob(".meta.json"):
        m = json.loads(meta.read_text(encoding="utf-8"))
        uri = "ctx://" + str(meta.parent.relative_to(rt.settings.fs_root))
        fs[uri] = (int(m["version"]), m["content_hash"])
    with psycopg.connect(rt.settings.database_url) as conn:
        rows = conn.execute(f"SELECT uri, version, content_hash FROM {SCHEMA}.context_nodes")
        replica = {r[0]: (int(r[1]), r[2]) for r in rows}
    return {
        "missing": sorted(fs.keys() - replica.keys()),
        "orphaned": sorted(replica.keys() - fs.keys()),
        "stale": sorted(u for u in fs.keys() & replica.keys() if fs[u] != replica[u]),
        "nodes": len(fs),
    }


# ------------------------------------------------------------------ PostgreSQL down
@pytest.fixture
def own_pg() -> Iterator[tuple[Path, int, str]]:
    """A PostgreSQL of this test alone, so that it can be stopped."""
    data_dir = Path(tempfile.mkdtemp(prefix="ctxpipe-outage-pg-"))
    port = free_port()
    try:
        url = embedded_pg.start_postgres(data_dir, port, options=PG_TEST_OPTIONS)
        migrate(url, schema=SCHEMA, embedding_dim=EMBEDDING_DIM)
        yield data_dir, port, url
    finally:
        embedded_pg.stop_postgres(data_dir)
        shutil.rmtree(data_dir, ignore_errors=True)


def test_postgres_down_during_commits_fs_succeeds_and_one_repair_heals(make_settings, own_pg):  # type: ignore[no-untyped-def]
    data_dir, port, url = own_pg
    rt = Runtime(make_settings(database_url=url, redis=False, db_connect_timeout_s=2))
    coord = CommitCoordinator(rt.components())
    try:
        first = coord.commit_sync(request("backend_pool_exhaustion.json", "pg-up-1"))
        assert first.status is CommitStatus.SUCCESS and first.outbox_events
        make_worker(rt, worker_id="t").drain(max_seconds=120)
        assert replica_diff(rt)["missing"] == []
        make_repair(rt).run()  # the periodic job has run once before the outage

        embedded_pg.stop_postgres(data_dir)
        during = [
            coord.commit_sync(request("wedding_trip_planning.json", "pg-down-1")),
            coord.commit_sync(request("gnn_oom_research.json", "pg-down-2", user_id="bob")),
        ]
        for res in during:  # the FS is the primary store: the commits succeed on it
            assert res.status is CommitStatus.SUCCESS, res.reason
            assert res.stats.nodes_created > 0
            assert not res.outbox_events
            assert any("outbox registration failed" in w for w in res.warnings), res.warnings
            for w in res.write_results:
                assert rt.fs.exists(w.uri)

        embedded_pg.start_postgres(data_dir, port, options=PG_TEST_OPTIONS)
        behind = replica_diff(rt)
        assert behind["missing"], "the commits during the outage are not in the replica yet"

        report = make_repair(rt).run()  # one period of the beat job (incremental)
        assert report.mode == "incremental"
        assert report.missing >= len(behind["missing"])
        make_worker(rt, worker_id="t").drain(max_seconds=300)
        healed = replica_diff(rt)
        assert healed == {"missing": [], "orphaned": [], "stale": [], "nodes": healed["nodes"]}
    finally:
        rt.close()


# ------------------------------------------------------------------ broker down at submit
def test_broker_down_at_submit_is_one_error_and_the_same_commit_id_goes_through_later(
    make_settings, clean_db, clean_redis, tmp_path
):  # type: ignore[no-untyped-def]
    from ctxpipe.devstack.env import child_env
    from ctxpipe.storage.commit_ledger import CommitLedger

    up = make_settings(broker_connect_timeout_s=1)
    session = tmp_path / "s.json"
    shutil.copy(FIXTURES / "backend_pool_exhaustion.json", session)

    def submit(redis_url: str) -> subprocess.CompletedProcess[str]:
        env = {**child_env(up), "CTXPIPE_REDIS_URL": redis_url}
        args = ["commit", str(session), "--commit-id", "broker-outage-1"]
        return subprocess.run(
            [sys.executable, "-m", "ctxpipe", *args],
            env=env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip

    started = time.monotonic()
    down = submit(f"redis://127.0.0.1:{free_port()}/0")
    assert time.monotonic() - started < 30
    lines = [ln for ln in down.stderr.splitlines() if ln.strip()]
    assert down.returncode != 0 and len(lines) == 1, down.stderr
    assert "broker unreachable" in lines[0] and "same commit id" in lines[0]
    rt = Runtime(up)
    try:
        row = CommitLedger(rt.db).get("broker-outage-1")
        assert row is not None and row.phase == "enqueued"  # recorded, nothing else done
        assert fs_snapshot(up.fs_root) == {}

        broker = redis.Redis.from_url(up.redis_url)
        again = submit(up.redis_url)  # the producer sends it again: now it goes through
        assert again.returncode == 0, again.stderr
        assert "broker-outage-1" in again.stdout
        assert broker.llen("commit") == 1  # one start message, waiting for a worker
        assert CommitLedger(rt.db).get("broker-outage-1").phase == "enqueued"
        broker.close()
    finally:
        rt.close()


# ------------------------------------------------------------------ FS full or read-only
@pytest.fixture
def rt(make_settings, clean_db) -> Iterator[Runtime]:  # type: ignore[no-untyped-def]
    runtime = Runtime(make_settings(redis=False))
    yield runtime
    runtime.close()


def test_fs_below_its_free_space_floor_fails_the_commit_before_writing(rt):  # type: ignore[no-untyped-def]
    CommitCoordinator(rt.components()).commit_sync(request("backend_pool_exhaustion.json", "c1"))
    before = fs_snapshot(rt.settings.fs_root)
    free_mb = shutil.disk_usage(rt.settings.fs_root).free // (1024 * 1024)
    full = rt.settings.model_copy(update={"fs_min_free_mb": free_mb + 1024})
    components = dataclasses.replace(rt.components(), settings=full)
    with pytest.raises(CommitError) as err:
        CommitCoordinator(components).commit_sync(request("wedding_trip_planning.json", "c2"))
    msg = str(err.value)
    assert "\n" not in msg and "is full" in msg and "CTXPIPE_FS_MIN_FREE_MB" in msg
    assert "nothing was written" in msg
    assert fs_snapshot(rt.settings.fs_root) == before


def test_read_only_fs_fails_the_commit_before_writing(rt, monkeypatch):  # type: ignore[no-untyped-def]
    CommitCoordinator(rt.components()).commit_sync(request("backend_pool_exhaustion.json", "c1"))
    before = fs_snapshot(rt.settings.fs_root)
    real_open = os.open

    def read_only(path: Any, flags: int, *a: Any, **k: Any) -> int:  # the kernel's answer
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_open(path, flags, *a, **k)

    monkeypatch.setattr(os, "open", read_only)
    with pytest.raises(CommitError) as err:
        CommitCoordinator(rt.components()).commit_sync(request("wedding_trip_planning.json", "c2"))
    monkeypatch.undo()
    msg = str(err.value)
    assert "\n" not in msg and "takes no writes" in msg and "Read-only file system" in msg
    assert fs_snapshot(rt.settings.fs_root) == before


def test_disk_filling_up_mid_write_leaves_no_half_node_and_a_rerun_completes(
    make_settings, clean_db, monkeypatch, tmp_path
):  # type: ignore[no-untyped-def]
    from ctxpipe.fs import atomic

    # the same commit, once without a fault: what the FS must look like in the end
    ref = Runtime(make_settings(redis=False, fs_root=tmp_path / "ref"))
    CommitCoordinator(ref.components()).commit_sync(request("wedding_trip_planning.json", "w1"))
    want = fs_snapshot(ref.settings.fs_root)
    ref.close()

    with psycopg.connect(clean_db, autocommit=True) as conn:
        conn.execute(f"TRUNCATE {SCHEMA}.outbox_events")
    rt = Runtime(make_settings(redis=False, fs_root=tmp_path / "got"))
    real = atomic.write_files_synced
    calls = {"n": 0}

    def fills_up(paths_data: Any) -> None:  # the third node write finds the disk full
        calls["n"] += 1
        if calls["n"] >= 3:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(paths_data)

    monkeypatch.setattr(atomic, "write_files_synced", fills_up)
    try:
        req = request("wedding_trip_planning.json", "w1")
        with pytest.raises(StorageError) as err:
            CommitCoordinator(rt.components()).commit_sync(req)
        assert "No space left on device" in str(err.value) and "each whole" in str(err.value)
        from ctxpipe.commit.steps import is_transient

        assert is_transient(err.value)  # on the workers the write step is retried
        half = fs_snapshot(rt.settings.fs_root)
        assert not [p for p in half if "/.staging-" in p or "/.commit-" in p or "/.tmp-" in p]
        for p in half:  # every node on disk is whole: its meta and its three levels
            if p.endswith(".meta.json") and "/sessions/" not in p:
                node = p.rsplit("/", 1)[0]
                assert {f"{node}/{f}" for f in (".abstract.md", "content.md")} <= set(half)

        monkeypatch.undo()  # space was freed: the same commit id runs again
        res = CommitCoordinator(rt.components()).commit_sync(req)
        assert res.status is CommitStatus.SUCCESS
        got = fs_snapshot(rt.settings.fs_root)
        assert sorted(got) == sorted(want)
        strip = lambda b: {  # noqa: E731 - timestamps differ between the two runs
            k: v for k, v in json.loads(b).items() if not k.endswith("_at")
        }
        for p in got:
            if p.endswith(".meta.json"):
                assert strip(got[p]) == strip(want[p]), p
            elif p.endswith(".md"):
                assert got[p] == want[p], p
    finally:
        rt.close()
