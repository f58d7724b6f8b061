"""A service over its own freshly migrated schema, with sessions committed in process and the
replica indexed: the read-path tests' common world (no Redis: commits run inline)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import psycopg

from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.config import Settings
from ctxpipe.core.models import CommitResult
from ctxpipe.core.session import SessionInput
from ctxpipe.index.reindex import reindex
from ctxpipe.index.wiring import make_indexer
from ctxpipe.runtime import Runtime
from ctxpipe.service import ContextEngineService
from ctxpipe.storage.migrations import migrate


def committed_service(
    pg_url: str, root: Path, schema: str, sessions: Iterable[SessionInput]
) -> tuple[ContextEngineService, list[CommitResult]]:
    """The service and the result of each session's commit; the replica is indexed."""
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
    svc = ContextEngineService(Runtime(settings))
    results = [svc.coordinator.commit_sync(CommitRequest.from_session(s)) for s in sessions]
    assert not reindex(make_indexer(svc.runtime)).errors
    return svc, results
