"""The two servers of the dev stack: embedded PostgreSQL (+ migrations) and redis-server.

A URL whose host is not local (127.0.0.1 / localhost / ::1) is an *external* server: the dev
stack never starts or stops it, it only checks that it answers.
"""

from __future__ import annotations

from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict

from ctxpipe.core.config import Settings
from ctxpipe.core.errors import StorageError
from ctxpipe.devstack.env import LOCAL_HOSTS, host_port, is_local
from ctxpipe.devstack.models import Component
from ctxpipe.devstack.procs import family
from ctxpipe.storage import embedded_pg, redis_server
from ctxpipe.storage.db import redact
from ctxpipe.storage.migrations import migrate


class PostgresServer:
    name = "postgres"

    def __init__(self, settings: Settings, data_dir: Path) -> None:
        self.settings = settings
        self.data_dir = data_dir
        try:
            parts = conninfo_to_dict(settings.database_url)
        except psycopg.Error as exc:
            raise StorageError(f"invalid CTXPIPE_DATABASE_URL: {exc}") from exc
        self.host = str(parts.get("host") or "127.0.0.1")
        self.port = int(parts.get("port") or 5432)
        self.user = str(parts.get("user") or "ctxpipe")
        self.dbname = str(parts.get("dbname") or "ctxpipe")
        self.managed = self.host in LOCAL_HOSTS
        self.applied: list[str] = []  # migrations applied by the last start()

    def preflight(self) -> None:
        if self.managed:
            embedded_pg.bin_dir()  # one-line error if the wheel is missing

    def _pid(self) -> int | None:
        try:
            first = (self.data_dir / "postmaster.pid").read_text(encoding="utf-8").split("\n", 1)
            return int(first[0])
        except (OSError, ValueError):
            return None

    def running(self) -> bool:
        if self.managed:
            return embedded_pg.running_port(self.data_dir) is not None
        try:
            with psycopg.connect(self.settings.database_url, connect_timeout=3) as conn:
                conn.execute("SELECT 1")
            return True
        except psycopg.Error:
            return False

    def start(self) -> str:
        """Start (if needed) and migrate. Returns the action taken."""
        if not self.managed:
            if not self.running():
                raise StorageError(
                    f"external PostgreSQL at {redact(self.settings.database_url)} does not answer"
                )
            action = "external"
        else:
            was_running = embedded_pg.running_port(self.data_dir) is not None
            # Idempotent: when running, only checks the port and ensures role + database.
            embedded_pg.start_postgres(
                self.data_dir, self.port, database=self.dbname, user=self.user
            )
            action = "already running" if was_running else "started"
        self.applied = migrate(
            self.settings.database_url,
            schema=self.settings.db_schema,
            embedding_dim=self.settings.embedding_dim,
        )
        return action

    def stop(self) -> bool:
        return self.managed and embedded_pg.stop_postgres(self.data_dir)

    def status(self) -> Component:
        alive = self.running()
        pid = self._pid() if self.managed and alive else None
        return Component(
            name=self.name,
            kind="postgres",
            alive=alive,
            managed=self.managed,
            pid=pid,
            pids=family(pid) if pid else [],
            port=self.port,
            endpoint=redact(self.settings.database_url),
            detail=f"pgvector, schema {self.settings.db_schema}",
            log=str(self.data_dir / embedded_pg.LOG_NAME) if self.managed else None,
        )


class RedisServer:
    name = "redis"

    def __init__(self, settings: Settings, state_dir: Path) -> None:
        self.settings = settings
        self.state_dir = state_dir
        self.host, self.port = host_port(settings.redis_url, 6379)
        self.managed = is_local(settings.redis_url)

    def preflight(self) -> None:
        if self.managed and redis_server.running_pid(self.state_dir) is None:
            redis_server.redis_binary()  # one-line install hint if missing

    def running(self) -> bool:
        if self.managed:
            return redis_server.running_pid(self.state_dir) is not None and redis_server.ping(
                "127.0.0.1", self.port
            )
        import redis

        client = redis.Redis.from_url(self.settings.redis_url, socket_timeout=3)
        try:
            return bool(client.ping())
        except redis.RedisError:
            return False
        finally:
            client.close()

    def start(self) -> str:
        if not self.managed:
            if not self.running():
                raise StorageError(f"external Redis at {self.host}:{self.port} does not answer")
            return "external"
        if self.running():
            return "already running"
        # the broker persists (AOF): a restart must not lose an accepted submit or queued task
        redis_server.start_redis(self.state_dir, self.port, persist=True)
        return "started"

    def stop(self) -> bool:
        return self.managed and redis_server.stop_redis(self.state_dir)

    def status(self) -> Component:
        alive = self.running()
        pid = redis_server.running_pid(self.state_dir) if self.managed else None
        return Component(
            name=self.name,
            kind="redis",
            alive=alive,
            managed=self.managed,
            pid=pid,
            pids=family(pid) if pid else [],
            port=self.port,
            endpoint=f"redis://{self.host}:{self.port}",
            detail="broker, results",
            log=str(self.state_dir / redis_server.LOG_NAME) if self.managed else None,
        )


__all__ = ["PostgresServer", "RedisServer"]
