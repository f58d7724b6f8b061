"""Repair (missing / stale / orphaned / relations, incremental vs full), reindex equal to
incremental indexing, and `ctxpipe status` — real PostgreSQL/pgvector, the real model."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from outbox_twin import upsert_event
from typer.testing import CliRunner

from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.models import ContextNode, RelationEdge
from ctxpipe.core.session import SessionInput
from ctxpipe.index.reindex import reindex
from ctxpipe.index.status import collect_status
from ctxpipe.index.wiring import make_indexer, make_outbox, make_repair, make_worker
from ctxpipe.runtime import Runtime
from ctxpipe.service import ContextEngineService

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "conversations"
BASE = "ctx://acme/users/alice/memories/preferences"


@pytest.fixture
def rt(make_settings: Any, clean_db: str) -> Iterator[Runtime]:
    runtime = Runtime(make_settings(redis=False, outbox_backoff_base_s=0.01))
    yield runtime
    runtime.close()


def put(rt: Runtime, name: str, text: str, refs: tuple[str, ...] = ("s1:m1",)) -> ContextNode:
    return rt.fs.write_node(
        ContextNode(
            uri=f"{BASE}/{name}",
            abstract=f"Alice {text}.",
            overview=f"- {text} [m1]",
            content=f"- {text}, she said so twice [m1]",
            category="preferences",
            source_refs=list(refs),
        )
    )


def index_now(rt: Runtime, *nodes: ContextNode) -> None:
    make_outbox(rt).append_batch([upsert_event(n) for n in nodes])
    drain(rt)


def drain(rt: Runtime) -> Any:
    res = make_worker(rt, worker_id="t").drain(max_seconds=120)
    assert res.failed == 0 and res.dead == 0, res.errors
    return res


def sql(rt: Runtime, query: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(rt.settings.database_url) as conn:
        cur = conn.execute(query, params)
        return cur.fetchall() if cur.description else []


def age(rt: Runtime, uri: str, seconds: float) -> None:
    path = rt.fs.resolve_path(uri) / ".meta.json"
    t = time.time() - seconds
    os.utime(path, (t, t))


# ------------------------------------------------------------------ repair
def test_repair_finds_missing_stale_and_orphaned(rt):  # type: ignore[no-untyped-def]
    a, b, c = put(rt, "a", "likes tea"), put(rt, "b", "likes jazz"), put(rt, "c", "likes cats")
    index_now(rt, a, b, c)
    d = put(rt, "d", "likes hiking")  # missing: its event was lost
    b2 = put(rt, "b", "likes jazz and blues")  # stale: a newer version, event lost
    sql(rt, "UPDATE ctx.context_nodes SET content_hash = 'tampered' WHERE uri = %s", c.uri)
    rt.fs.delete(a.uri)  # orphaned: the delete's event was lost

    job = make_repair(rt)
    dry = job.run(dry_run=True)
    assert (dry.missing, dry.stale, dry.orphaned) == (1, 2, 1)
    assert dry.events_queued == 0 and dry.run_id is None
    assert sql(rt, "SELECT count(*) FROM ctx.outbox_events WHERE status = 'pending'") == [(0,)]

    report = job.run()
    assert report.mode == "full"  # no earlier run to be incremental from
    assert report.uris["missing"] == [d.uri]
    assert report.uris["stale"] == sorted([b.uri, c.uri])
    assert report.uris["orphaned"] == [a.uri]
    assert report.events_queued == 4 and report.run_id
    kinds = dict(sql(rt, "SELECT uri, event_type FROM ctx.outbox_events WHERE status = 'pending'"))
    assert kinds == {
        d.uri: "UPSERT_CONTEXT",
        b.uri: "UPSERT_CONTEXT",
        c.uri: "UPSERT_CONTEXT",
        a.uri: "DELETE_CONTEXT",
    }
    again = job.run()  # events in flight: nothing queued twice
    assert again.events_queued == 0 and again.in_flight == 4

    drain(rt)
    rows = dict(sql(rt, "SELECT uri, version FROM ctx.context_nodes"))
    assert rows == {b.uri: b2.version, c.uri: c.version, d.uri: d.version}
    clean = job.run(full=True)
    assert (clean.missing, clean.stale, clean.orphaned, clean.events_queued) == (0, 0, 0, 0)
    last = sql(
        rt,
        "SELECT mode, missing, stale, orphaned, fs_nodes FROM ctx.repair_runs "
        "ORDER BY id DESC LIMIT 1",
    )
    assert last == [("full", 0, 0, 0, 3)]


def test_same_divergence_again_re_arms_its_event(rt):  # type: ignore[no-untyped-def]
    a = put(rt, "a", "likes tea")
    index_now(rt, a)
    job = make_repair(rt)
    for _ in range(2):  # the row is lost twice in the same state: same deterministic id
        sql(rt, "DELETE FROM ctx.context_nodes WHERE uri = %s", a.uri)
        report = job.run(full=True)
        assert report.missing == 1 and report.events_queued == 1
        drain(rt)
        assert sql(rt, "SELECT version FROM ctx.context_nodes") == [(a.version,)]
    assert sql(
        rt, "SELECT count(*) FROM ctx.outbox_events WHERE payload->>'source' = 'repair'"
    ) == [(1,)]


def test_incremental_compares_only_recent_changes_full_compares_all(rt):  # type: ignore[no-untyped-def]
    old, recent = put(rt, "old", "likes tea"), put(rt, "recent", "likes jazz")
    index_now(rt, old, recent)
    age(rt, old.uri, 3600)
    job = make_repair(rt)
    first = job.run()
    assert first.mode == "full" and first.compared == 2
    assert first.last_fs_mtime == pytest.approx(time.time(), abs=60)

    # the replica row of the old node goes bad without any FS change
    sql(rt, "UPDATE ctx.context_nodes SET content_hash = 'tampered' WHERE uri = %s", old.uri)
    new = put(rt, "new", "likes hiking")  # a change since the last run (event lost)
    inc = job.run()
    assert inc.mode == "incremental" and inc.since_mtime is not None
    assert inc.compared == 2  # recent + new; the old node is not re-read
    assert inc.uris == {"missing": [new.uri]} and inc.stale == 0
    full = job.run(full=True)
    assert full.mode == "full" and full.compared == 3
    assert full.uris == {"stale": [old.uri]}


def test_fs_behind_replica_is_replaced_by_repair(rt):  # type: ignore[no-untyped-def]
    a = put(rt, "a", "likes tea")
    index_now(rt, a)
    sql(
        rt,
        "UPDATE ctx.context_nodes SET version = 9, content_hash = 'older-life' WHERE uri = %s",
        a.uri,
    )
    report = make_repair(rt).run()
    assert report.uris == {"stale": [a.uri]}
    payload = sql(rt, "SELECT payload FROM ctx.outbox_events WHERE status = 'pending'")[0][0]
    assert payload["replace"] is True and payload["version"] == a.version
    drain(rt)
    assert sql(rt, "SELECT version, content_hash FROM ctx.context_nodes") == [
        (a.version, a.content_hash)
    ]


def test_repair_heals_relation_edges(rt):  # type: ignore[no-untyped-def]
    a, b = put(rt, "a", "likes tea"), put(rt, "b", "likes jazz")
    index_now(rt, a, b)
    rt.relations.upsert_edges(a.uri, [RelationEdge(from_uri=a.uri, to_uri=b.uri)])
    report = make_repair(rt).run()
    assert report.uris == {"relations": [a.uri]}
    drain(rt)
    assert sql(rt, "SELECT from_uri, to_uri FROM ctx.relation_edges") == [(a.uri, b.uri)]
    sql(
        rt,
        "INSERT INTO ctx.relation_edges (id, account_id, from_uri, to_uri) "
        "VALUES ('ghost', 'acme', 'ctx://acme/users/alice/gone', %s)",
        b.uri,
    )
    report = make_repair(rt).run(full=True)
    assert report.uris == {"relations": ["ctx://acme/users/alice/gone"]}
    drain(rt)
    assert sql(rt, "SELECT count(*) FROM ctx.relation_edges") == [(1,)]


# ------------------------------------------------------------------ reindex
def replica_snapshot(rt: Runtime) -> dict[str, Any]:
    nodes = sql(
        rt,
        "SELECT uri, account_id, parent_uri, context_type, category, owner_space, "
        "abstract_text, version, content_hash, source_refs, metadata, fs_path, "
        "created_at, updated_at FROM ctx.context_nodes ORDER BY uri",
    )
    chunks = sql(
        rt,
        "SELECT chunk_id, uri, account_id, parent_uri, level, chunk_index, "
        "text_content, context_type, category, owner_space, source_refs, metadata, "
        "node_version FROM ctx.context_chunks ORDER BY chunk_id",
    )
    vectors = dict(sql(rt, "SELECT chunk_id, embedding FROM ctx.context_chunks"))
    edges = sql(
        rt,
        "SELECT id, account_id, from_uri, to_uri, relation_type, reason, weight "
        "FROM ctx.relation_edges ORDER BY id",
    )
    units = sql(rt, "SELECT chunk_id, unit_key FROM ctx.chunk_units ORDER BY chunk_id, unit_key")
    unit_vectors = {
        (r[0], r[1]): r[2]
        for r in sql(rt, "SELECT chunk_id, unit_key, embedding FROM ctx.chunk_units")
    }
    return {
        "nodes": nodes,
        "chunks": chunks,
        "vectors": vectors,
        "edges": edges,
        "units": units,
        "unit_vectors": unit_vectors,
    }


def commit_fixtures(rt: Runtime) -> None:
    service = ContextEngineService(rt)
    for path in sorted(FIXTURES.glob("*.json")):
        session = SessionInput.model_validate_json(path.read_text())
        req = CommitRequest.from_session(session, commit_id=f"ix-{path.stem}")
        result = asyncio.run(service.commit_session_async(req))
        assert result.status.value == "success", result.reason
        drain(rt)  # the next commit's dedup sees this one's memories, as in production


def test_reindex_from_empty_equals_incremental_indexing(rt):  # type: ignore[no-untyped-def]
    commit_fixtures(rt)
    incremental = replica_snapshot(rt)
    assert len(incremental["nodes"]) >= 8 and incremental["edges"]
    assert sum(1 for c in incremental["chunks"] if c[4] == 2) > len(incremental["nodes"])
    archive_chunks = [c for c in incremental["chunks"] if "/archives/" in c[1] and c[4] == 2]
    assert archive_chunks and all(c[10] for c in archive_chunks)  # every chunk cites turns

    rt.db.close()
    sql(rt, "TRUNCATE ctx.chunk_units, ctx.context_chunks, ctx.context_nodes, ctx.relation_edges")
    seen: list[tuple[int, int]] = []
    report = reindex(make_indexer(rt), batch_size=5, progress=lambda d, t: seen.append((d, t)))
    assert not report.errors and report.indexed == len(incremental["nodes"])
    assert seen[0][0] == 0 and seen[-1][0] == seen[-1][1] == len(incremental["nodes"])

    rebuilt = replica_snapshot(rt)
    # the line and sentence vectors find ranks are rebuilt too
    assert len(incremental["units"]) > len(incremental["chunks"])
    for key in ("nodes", "chunks", "edges", "units"):
        assert rebuilt[key] == incremental[key], key
    for cid, vec in incremental["vectors"].items():  # same texts, same model: same vectors
        cos = float(np.dot(json.loads(vec), json.loads(rebuilt["vectors"][cid])))
        assert cos > 0.9999, cid
    for uid, vec in incremental["unit_vectors"].items():
        cos = float(np.dot(json.loads(vec), json.loads(rebuilt["unit_vectors"][uid])))
        assert cos > 0.9999, uid

    # in place (no --clean): rows rewritten, nothing lost, a stray row removed
    sql(
        rt,
        "INSERT INTO ctx.context_nodes (uri, account_id, owner_space, version) "
        "VALUES ('ctx://acme/users/alice/stray', 'acme', 'users/alice', 1)",
    )
    again = reindex(make_indexer(rt), clean=False)
    assert again.deleted == 1 and again.indexed == len(incremental["nodes"])
    in_place = replica_snapshot(rt)
    assert in_place["chunks"] == incremental["chunks"]
    assert in_place["units"] == incremental["units"]
    assert make_repair(rt).run(full=True).events_queued == 0


def vector_index(rt: Runtime) -> str | None:
    rows = sql(
        rt,
        "SELECT indexdef FROM pg_indexes WHERE schemaname = 'ctx' "
        "AND indexname = 'idx_chunks_embedding'",
    )
    return str(rows[0][0]) if rows else None


def test_a_clean_reindex_builds_the_vector_index_once_after_the_load(rt):  # type: ignore[no-untyped-def]
    """A clean reindex is a bulk load: the HNSW index of the chunks' vectors is left out while
    the rows go in (pgvector would update it row by row) and built once after, as the
    migration made it; built again when the load fails, and by any reindex when a killed one
    left it out."""
    commit_fixtures(rt)
    migrated = vector_index(rt)
    assert migrated is not None and "hnsw" in migrated
    incremental = replica_snapshot(rt)
    during: list[str | None] = []
    report = reindex(
        make_indexer(rt),
        clean=True,
        batch_size=5,
        progress=lambda d, t: during.append(vector_index(rt) if d else migrated),
    )
    assert not report.errors and report.indexed == len(incremental["nodes"])
    assert len(during) > 2 and set(during[1:]) == {None}  # left out while loading
    assert vector_index(rt) == migrated
    assert replica_snapshot(rt)["chunks"] == incremental["chunks"]

    indexer = make_indexer(rt)
    calls = 0

    def failing(*args: Any, **kwargs: Any) -> None:
        nonlocal calls
        calls += 1
        raise RuntimeError("the load broke")

    indexer.sync_nodes = failing  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="the load broke"):
        reindex(indexer, clean=True)
    assert calls == 1 and vector_index(rt) == migrated  # built again on the way out

    sql(rt, "DROP INDEX ctx.idx_chunks_embedding")  # as a reindex killed mid-load leaves it
    assert not reindex(make_indexer(rt)).errors
    assert vector_index(rt) == migrated


# ------------------------------------------------------------------ CLI and status
def test_cli_repair_reindex_status(rt, make_settings, redis_url, tmp_path):  # type: ignore[no-untyped-def]
    from ctxpipe.cli import app

    put(rt, "a", "likes tea")
    put(rt, "b", "likes jazz")
    s = rt.settings
    env = {
        "CTXPIPE_DATABASE_URL": s.database_url,
        "CTXPIPE_FS_ROOT": str(s.fs_root),
        "CTXPIPE_REDIS_URL": redis_url,
    }
    runner = CliRunner()
    out = runner.invoke(app, ["status", "--json"], env=env)
    assert out.exit_code == 0, out.output
    st = json.loads(out.stdout)
    assert st["fs_nodes"] == 2 and st["replica_nodes"] == 0 and st["in_sync"] is False
    assert set(st["queues"]) == {"commit", "extract", "embed", "maintenance"}
    assert st["last_repair"] is None

    out = runner.invoke(app, ["repair", "--dry-run", "--json"], env=env)
    assert out.exit_code == 0 and json.loads(out.stdout)["missing"] == 2
    out = runner.invoke(app, ["repair"], env=env)
    assert out.exit_code == 0 and "queued 2 event(s)" in out.stdout
    st = json.loads(runner.invoke(app, ["status", "--json"], env=env).stdout)
    assert st["outbox"]["pending"] == 2 and st["oldest_pending_age_s"] is not None
    assert st["last_repair"]["missing"] == 2

    out = runner.invoke(app, ["reindex"], env=env)
    assert out.exit_code == 0, out.output
    assert "reindexing nodes" in out.stdout and "reindexed 2 node(s)" in out.stdout
    drain(rt)  # the repair events find the rows already there
    st = collect_status(make_settings(redis_url=redis_url, fs_root=s.fs_root), db=rt.db, fs=rt.fs)
    assert st.in_sync and st.replica_nodes == 2 and st.replica_chunks == 6
    out = runner.invoke(app, ["status"], env=env)
    assert out.exit_code == 0 and "in sync" in out.stdout
    assert "2 on FS, 2 in the replica" in out.stdout
