"""The local server launchers (embedded PostgreSQL, redis-server) start and stop cleanly."""

from __future__ import annotations

import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import redis

from ctxpipe.core.errors import StorageError
from ctxpipe.storage import embedded_pg, redis_server
from ctxpipe.storage.netutil import free_port, port_open


@pytest.fixture
def server_dir() -> Iterator[Path]:
    # Outside tmp_path on purpose: as root, the PostgreSQL account must traverse the path.
    root = Path(tempfile.mkdtemp(prefix="ctxpipe-test-srv-"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_embedded_postgres_lifecycle(server_dir: Path) -> None:
    data, port = server_dir / "pg", free_port()
    try:
        url = embedded_pg.start_postgres(data, port, options={"fsync": "off"})
        assert url == f"postgresql://ctxpipe@127.0.0.1:{port}/ctxpipe"
        assert embedded_pg.running_port(data) == port
        with psycopg.connect(url, autocommit=True) as conn:
            version = conn.execute("SHOW server_version_num").fetchone()
            assert version is not None and int(version[0]) >= 180000
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")  # role may create it
            conn.execute("CREATE TABLE kept (x int)")
        assert embedded_pg.start_postgres(data, port) == url  # idempotent
        with pytest.raises(StorageError, match=f"already running on port {port}"):
            embedded_pg.start_postgres(data, free_port())

        assert embedded_pg.stop_postgres(data) is True
        assert embedded_pg.running_port(data) is None
        assert not port_open("127.0.0.1", port)
        assert embedded_pg.stop_postgres(data) is False  # idempotent

        assert embedded_pg.start_postgres(data, port) == url  # restart keeps the data
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT to_regclass('kept') IS NOT NULL").fetchone() == (True,)
    finally:
        embedded_pg.stop_postgres(data)


def test_embedded_postgres_refuses_busy_port(server_dir: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(StorageError, match=f"port {port} on 127.0.0.1 is in use"):
            embedded_pg.start_postgres(server_dir / "pg", port)
    assert embedded_pg.running_port(server_dir / "pg") is None


def test_embedded_postgres_refuses_foreign_directory(server_dir: Path) -> None:
    (server_dir / "pg").mkdir()
    (server_dir / "pg" / "notes.txt").write_text("mine")
    with pytest.raises(StorageError, match="not empty and not a PostgreSQL data directory"):
        embedded_pg.init_postgres(server_dir / "pg")


def test_redis_lifecycle(server_dir: Path) -> None:
    state, port = server_dir / "redis", free_port()
    try:
        url = redis_server.start_redis(state, port)
        assert url == f"redis://127.0.0.1:{port}/0"
        pid = redis_server.running_pid(state)
        assert pid is not None and (state / redis_server.PID_NAME).exists()
        client = redis.Redis.from_url(url)
        assert client.ping() is True
        assert client.config_get("save") == {"save": ""}
        assert client.config_get("appendonly") == {"appendonly": "no"}
        client.close()
        assert redis_server.start_redis(state, port) == url  # idempotent
        assert redis_server.running_pid(state) == pid
        with pytest.raises(StorageError, match="not on 127.0.0.1"):
            redis_server.start_redis(state, free_port())
    finally:
        assert redis_server.stop_redis(state) is True
    assert redis_server.running_pid(state) is None
    assert not redis_server.ping("127.0.0.1", port)
    assert redis_server.stop_redis(state) is False
    assert (state / redis_server.LOG_NAME).exists()


def test_redis_missing_binary_is_one_clear_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(StorageError) as info:
        redis_server.start_redis(tmp_path / "redis", free_port())
    message = str(info.value)
    assert "\n" not in message
    assert "redis-server not found" in message and "apt-get install redis-server" in message


def test_redis_refuses_busy_port(server_dir: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(StorageError, match="in use"):
            redis_server.start_redis(server_dir / "redis", port)


def test_session_fixtures_are_live(pg_url: str, redis_url: str, clean_redis: str) -> None:
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM ctx.schema_migrations").fetchone() != (0,)
    client = redis.Redis.from_url(clean_redis)
    try:
        assert client.dbsize() == 0
    finally:
        client.close()


def test_make_settings_starts_only_what_is_asked(make_settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cfg = make_settings(db=False, redis=False, llm_model="x")
    assert cfg.fs_root == tmp_path / "fs" and cfg.var_dir == tmp_path / "var"
    assert cfg.database_url.endswith("127.0.0.1:1/ctxpipe")
    assert cfg.llm_model == "x"
