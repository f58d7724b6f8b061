"""A ctxpipe API app over real PostgreSQL and Redis, committing in process (shared by the API
integration tests)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from fastapi.testclient import TestClient

from ctxpipe.api import create_app
from ctxpipe.api.keys import KeySpec, KeyStore
from ctxpipe.core.config import Settings
from ctxpipe.index.reindex import reindex
from ctxpipe.index.wiring import make_indexer
from ctxpipe.runtime import Runtime
from ctxpipe.service import ContextEngineService
from ctxpipe.storage.migrations import migrate


def fresh_schema(url: str, schema: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    migrate(url, schema=schema, embedding_dim=384)


@dataclass
class ApiWorld:
    settings: Settings
    service: ContextEngineService
    client: TestClient
    store: KeyStore
    keys: dict[str, str] = field(default_factory=dict)

    def key(
        self, account: str, scopes: str = "read,commit", *, user: str | None = None,
        agent: str | None = None,
    ) -> str:  # fmt: skip
        spec = KeySpec(
            account_id=account,
            user_id=user,
            agent_id=agent,
            scopes=scopes.split(","),  # type: ignore[arg-type]
        )
        return self.store.create(spec).key

    def reindex(self) -> None:
        report = reindex(make_indexer(self.service.runtime))
        assert not report.errors, report.errors


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@contextmanager
def api_world(
    pg_url: str, redis_url: str, root: Path, schema: str, **overrides: Any
) -> Iterator[ApiWorld]:
    fresh_schema(pg_url, schema)
    values: dict[str, Any] = {
        "fs_root": root / "fs",
        "var_dir": root / "var",
        "database_url": pg_url,
        "redis_url": redis_url,
        "db_schema": schema,
        "embedding_dim": 384,
        "api_key_cache_s": 0.0,
    }
    values.update(overrides)
    settings = Settings(**values)
    settings.fs_root.mkdir(parents=True, exist_ok=True)
    service = ContextEngineService(Runtime(settings))
    store = KeyStore(service.runtime.db, schema=schema, cache_s=0.0)
    app = create_app(settings, service, key_store=store)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield ApiWorld(settings, service, client, store)


@contextmanager
def served(world: ApiWorld) -> Iterator[str]:
    """The world's app on a real uvicorn server in a thread; yields its base URL."""
    import threading
    import time

    import uvicorn

    from ctxpipe.storage.netutil import free_port

    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(world.client.app, host="127.0.0.1", port=port, log_level="warning",
                       lifespan="off")
    )  # fmt: skip
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
