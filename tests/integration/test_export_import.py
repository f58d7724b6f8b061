"""Round trip of export / import on real PostgreSQL/pgvector with the real model: sessions
committed through the pipeline → export → a fresh deployment (new FS root, new schema) →
import → the same FS node for node, and `find` the same hits once the index worker has
drained the outbox."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.config import Settings
from ctxpipe.core.session import RequestContext, SessionInput
from ctxpipe.index.wiring import make_worker
from ctxpipe.portability import Selection, parse_numbered, read_lines, write_export
from ctxpipe.portability.wiring import make_importer
from ctxpipe.runtime import Runtime
from ctxpipe.service import ContextEngineService
from ctxpipe.storage.migrations import migrate

ACME, ANN = "acme", "ann"
SESSIONS = [
    ("ann-s1", "2024-03-01T09:00:00", [
        ("m1", "user", "I adopted a golden retriever puppy named Biscuit last weekend."),
        ("m2", "assistant", "Congratulations! How is Biscuit settling in?"),
        ("m3", "user", "He chews my running shoes. I am training for the Lisbon half marathon."),
    ]),
    ("ann-s2", "2024-03-10T18:30:00", [
        ("m1", "user", "Work update: I started leading the payments team at Globex."),
        ("m2", "user", "My favourite food is ramen, and I prefer vegetarian options."),
        ("m3", "assistant", "Noted, vegetarian ramen it is."),
    ]),
    ("ann-s3", "2024-04-02T12:00:00", [
        ("m1", "user", "My sister Clara is visiting from Porto next Friday."),
        ("m2", "user", "We want to hike in Sintra and visit the Pena Palace on Saturday."),
    ]),
]  # fmt: skip
QUERIES = [
    "What is the name of Ann's dog?",
    "Which race is Ann training for?",
    "What kind of food does Ann like?",
    "Who is coming to visit Ann?",
    "Where do they plan to go hiking?",
]


def session(sid: str, date: str, turns: list[tuple[str, str, str]]) -> SessionInput:
    start = datetime.fromisoformat(date)
    return SessionInput(
        account_id=ACME,
        user_id=ANN,
        agent_id="bot",
        session_id=sid,
        messages=[
            {"id": m, "role": r, "content": t, "created_at": start + timedelta(minutes=i)}
            for i, (m, r, t) in enumerate(turns)
        ],
    )


def deployment(pg_url: str, root: Path, schema: str) -> ContextEngineService:
    """A deployment of its own: an FS root and a freshly migrated schema."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    migrate(pg_url, schema=schema, embedding_dim=384)
    settings = Settings(
        fs_root=root / "fs",
        var_dir=root / "var",
        database_url=pg_url,
        redis_url="redis://127.0.0.1:1/0",
        db_schema=schema,
        embedding_dim=384,
    )
    return ContextEngineService(Runtime(settings))


def drain(svc: ContextEngineService) -> int:
    res = make_worker(svc.runtime, worker_id="t").drain(max_seconds=300)
    assert res.failed == 0 and res.dead == 0, res.errors
    return res.succeeded


def node_files(root: Path) -> dict[str, bytes]:
    """Every node's files (levels, meta, relations, history) and session owners."""
    out: dict[str, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in (".locks", ".commits")]
        for name in filenames:
            if name != ".lock":
                path = Path(dirpath) / name
                out[str(path.relative_to(root))] = path.read_bytes()
    return out


@pytest.fixture
def source(pg_url: str, tmp_path: Path) -> Iterator[ContextEngineService]:
    svc = deployment(pg_url, tmp_path / "src", "rt_export_src")
    for sid, date, turns in SESSIONS:
        result = svc.coordinator.commit_sync(CommitRequest.from_session(session(sid, date, turns)))
        assert result.stats.outbox_events_queued > 0
    assert drain(svc) > 0
    yield svc
    svc.close()


def test_a_deployment_exported_and_imported_is_the_same(
    source: ContextEngineService, pg_url: str, tmp_path: Path
) -> None:
    dump = tmp_path / "acme.jsonl"
    with open(dump, "w") as f:
        exported = write_export(source.runtime.fs, Selection(account=ACME), f)
    assert exported.nodes > 5 and exported.sessions == len(SESSIONS)

    target = deployment(pg_url, tmp_path / "dst", "rt_export_dst")
    try:
        records = read_lines(str(dump), parse_numbered)
        report = make_importer(target.runtime).run(records)
        assert report.written == exported.nodes and report.conflicts == 0
        assert report.events_queued >= exported.nodes
        src_root, dst_root = source.runtime.settings.fs_root, target.runtime.settings.fs_root
        src_files, dst_files = node_files(src_root), node_files(dst_root)
        assert sorted(dst_files) == sorted(src_files)
        assert [k for k in src_files if src_files[k] != dst_files[k]] == []
        assert drain(target) >= exported.nodes

        ctx = RequestContext(account_id=ACME, user_id=ANN, agent_id="bot", session_id="q")
        for query in QUERIES:
            want = [h.uri for h in source.find(query, ctx, 8).hits]
            got = [h.uri for h in target.find(query, ctx, 8).hits]
            assert want and got == want, query

        again = make_importer(target.runtime).run(records)  # idempotent
        assert (again.written, again.events_queued) == (0, 0)
        assert again.unchanged == report.records and node_files(dst_root) == dst_files
    finally:
        target.close()
