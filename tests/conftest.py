"""Root fixtures. Servers start only when a test asks for them, and are the suite's own.

Session-scoped:
  pg_url      embedded PostgreSQL 18 + pgvector on a free port, migrated (schema "ctx")
  redis_url   own redis-server on a free port
  database    a ctxpipe.storage.db.Database on pg_url (closed at the end)
Function-scoped:
  clean_db       truncates every ctx table (not schema_migrations); returns pg_url
  clean_redis    FLUSHALL; returns redis_url
  make_settings  factory: make_settings(db=True, redis=True, **overrides) -> Settings
                 (starts only the servers it is asked for)
  settings       make_settings() — fs_root/var_dir under tmp_path, both servers

A missing binary or package FAILS the test with one clear line (never skips).
"""

from __future__ import annotations

import gc
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest

from ctxpipe.core.config import Settings
from ctxpipe.core.errors import StorageError

TESTS_DIR = Path(__file__).resolve().parent
SCHEMA = "ctx"
EMBEDDING_DIM = 384
# Unreachable URLs for settings that must not touch a server (port 1 refuses at once).
NO_DB_URL = "postgresql://ctxpipe@127.0.0.1:1/ctxpipe"
NO_REDIS_URL = "redis://127.0.0.1:1/0"
# Throw-away test cluster: durability is irrelevant, speed is not.
PG_TEST_OPTIONS = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


def pytest_configure(config: pytest.Config) -> None:
    # Hermetic: a developer's CTXPIPE_* environment must not leak into tests; never go online.
    for key in [k for k in os.environ if k.startswith("CTXPIPE_")]:
        del os.environ[key]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    markers = {
        "integration": pytest.mark.integration,
        "e2e": pytest.mark.e2e,
        "perf": pytest.mark.perf,
    }
    for item in items:
        try:
            top = Path(item.path).resolve().relative_to(TESTS_DIR).parts[0]
        except (ValueError, IndexError):
            continue
        if top in markers:
            item.add_marker(markers[top])


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection imported and built (modules, test items) lives as long as the run: out
    of the collector's sight, every garbage collection during the tests, and pytest's own at
    the end, walks only what the tests make."""
    gc.collect()
    gc.freeze()


def _fail(what: str, exc: BaseException) -> NoReturn:
    pytest.fail(f"{what}: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def _server_root() -> Iterator[Path]:
    # Not tmp_path_factory: when run as root the PostgreSQL account must traverse this path.
    root = Path(tempfile.mkdtemp(prefix="ctxpipe-test-servers-"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_url(_server_root: Path) -> Iterator[str]:
    from ctxpipe.storage import embedded_pg
    from ctxpipe.storage.migrations import migrate
    from ctxpipe.storage.netutil import free_port

    data_dir = _server_root / "pg"
    try:
        url = embedded_pg.start_postgres(data_dir, free_port(), options=PG_TEST_OPTIONS)
    except (StorageError, OSError) as exc:
        _fail("cannot start the embedded PostgreSQL test server", exc)
    try:
        try:
            migrate(url, schema=SCHEMA, embedding_dim=EMBEDDING_DIM)
        except StorageError as exc:
            _fail("cannot migrate the test database", exc)
        yield url
    finally:
        embedded_pg.stop_postgres(data_dir)


@pytest.fixture(scope="session")
def redis_url(_server_root: Path) -> Iterator[str]:
    from ctxpipe.storage import redis_server
    from ctxpipe.storage.netutil import free_port

    state_dir = _server_root / "redis"
    try:
        url = redis_server.start_redis(state_dir, free_port())
    except (StorageError, OSError) as exc:
        _fail("cannot start the test redis-server", exc)
    try:
        yield url
    finally:
        redis_server.stop_redis(state_dir)


@pytest.fixture(scope="session")
def database(pg_url: str) -> Iterator[Any]:
    from ctxpipe.storage.db import Database

    db = Database(pg_url, min_size=1, max_size=4)
    yield db
    db.close()


@pytest.fixture
def clean_db(pg_url: str) -> str:
    import psycopg
    from psycopg import sql

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("SET lock_timeout = '10s'")  # a leaked open transaction fails loudly
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s "
                "AND tablename <> 'schema_migrations' ORDER BY tablename",
                (SCHEMA,),
            )
        ]
        if tables:
            names = sql.SQL(", ").join(sql.Identifier(SCHEMA, t) for t in tables)
            conn.execute(sql.SQL("TRUNCATE {} RESTART IDENTITY CASCADE").format(names))
    return pg_url


@pytest.fixture
def clean_redis(redis_url: str) -> str:
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        client.flushall()
    finally:
        client.close()
    return redis_url


@pytest.fixture
def make_settings(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[..., Settings]:
    def factory(*, db: bool = True, redis: bool = True, **overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "fs_root": tmp_path / "fs",
            "var_dir": tmp_path / "var",
            "database_url": request.getfixturevalue("pg_url") if db else NO_DB_URL,
            "redis_url": request.getfixturevalue("redis_url") if redis else NO_REDIS_URL,
            "db_schema": SCHEMA,
            "embedding_dim": EMBEDDING_DIM,
        }
        values.update(overrides)
        return Settings(**values)

    return factory


@pytest.fixture
def settings(make_settings: Callable[..., Settings]) -> Settings:
    return make_settings()
