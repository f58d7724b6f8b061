"""PostgreSQL connection pool (psycopg 3 + pgvector adapters), fork-safe for Celery prefork."""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import psycopg
from pgvector.psycopg import register_vector
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolTimeout

from ctxpipe.core.errors import StorageError

if TYPE_CHECKING:
    from ctxpipe.core.config import Settings

log = logging.getLogger(__name__)

# Pools inherited across fork(). They are never closed nor garbage-collected in the child:
# closing would send a Terminate message on sockets the parent still uses.
_ABANDONED: list[ConnectionPool[Any]] = []


def redact(conninfo: str) -> str:
    """`user@host:port/dbname` (no password) for messages and logs."""
    try:
        parts = conninfo_to_dict(conninfo)
    except psycopg.Error:
        return "<invalid conninfo>"
    host = parts.get("host") or parts.get("hostaddr") or "localhost"
    port = parts.get("port") or "5432"
    user = f"{parts['user']}@" if parts.get("user") else ""
    return f"{user}{host}:{port}/{parts.get('dbname') or ''}"


def connect_error(conninfo: str, exc: BaseException) -> StorageError:
    """One actionable line for a failed connection (never shows the password)."""
    detail = " ".join(str(exc).split()) or type(exc).__name__
    return StorageError(f"cannot connect to PostgreSQL at {redact(conninfo)}: {detail}")


# how long `idle_autocommit` lets the pool look for an idle connection (it refuses a zero wait)
_IDLE_ONLY_S = 0.001


def wait_ready(conninfo: str, timeout: float = 30.0, interval: float = 0.2) -> None:
    """Block until `SELECT 1` succeeds on `conninfo`; StorageError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        try:
            with psycopg.connect(conninfo, connect_timeout=max(1, int(interval * 10))) as conn:
                conn.execute("SELECT 1")
                return
        except psycopg.Error as exc:
            last = exc
        if time.monotonic() >= deadline:
            err = connect_error(conninfo, last or TimeoutError("timed out"))
            raise StorageError(f"{err} (not ready after {timeout:.0f}s)") from last
        time.sleep(interval)


def _register_vector(conn: psycopg.Connection[Any]) -> bool:
    """Register pgvector adapters on `conn` if the extension exists; leave `conn` idle."""
    try:
        with conn.transaction():
            register_vector(conn)
        return True
    except psycopg.ProgrammingError:  # "vector type not found": not migrated yet
        return False


def _probe(conninfo: str, connect_timeout: float, timeout: PoolTimeout) -> None:
    """Raise StorageError naming the cause (refused, unknown host, bad password) when the
    server cannot be reached directly either."""
    try:
        with psycopg.connect(conninfo, connect_timeout=max(2, math.ceil(connect_timeout))) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        raise connect_error(conninfo, exc) from timeout


# How often the wait for a pool's first connection looks whether the pool has failed one.
_FIRST_POLL_S = 0.02


def _first_getconn(pool: ConnectionPool[Any], timeout: float) -> psycopg.Connection[Any]:
    """`pool.getconn(timeout=timeout)` for a pool that has not connected yet, except that
    PoolTimeout comes as soon as the pool has failed a connection attempt (a server that
    refuses, a bad password): the caller's direct attempt names the cause at once, not after
    `timeout`. A server that is slow to answer is still waited for."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        try:
            return pool.getconn(timeout=max(min(left, _FIRST_POLL_S), 0.001))
        except PoolTimeout:
            if left <= _FIRST_POLL_S or pool.get_stats().get("connections_errors", 0):
                raise


class Database:
    """A lazily opened `psycopg_pool.ConnectionPool` with pgvector types registered.

    `connection()` yields a connection inside a transaction (commit on success, rollback on
    error). After `fork()` the child transparently builds its own pool.
    """

    def __init__(
        self,
        conninfo: str,
        min_size: int = 1,
        max_size: int = 8,
        *,
        timeout: float = 30.0,
        connect_timeout: float = 5.0,
    ) -> None:
        if max_size < 1 or min_size < 0 or min_size > max_size:
            raise ValueError(f"bad pool sizes min={min_size} max={max_size}")
        self.conninfo = conninfo
        self.min_size = min_size
        self.max_size = max_size
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self._connected = False
        self._pool: ConnectionPool[Any] | None = None
        self._pid = os.getpid()
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> Database:
        return cls(
            settings.database_url,
            settings.db_pool_min,
            settings.db_pool_max,
            connect_timeout=settings.db_connect_timeout_s,
        )

    def __repr__(self) -> str:
        return f"Database({redact(self.conninfo)!r}, min={self.min_size}, max={self.max_size})"

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        # Every statement is planned for its own parameters, prepared ones too: after five runs
        # a prepared statement may otherwise switch to a generic plan, one plan for every
        # owner of a multi-tenant table. find's full-text arm on one owner's chunks then ran in
        # 3.4 ms against 1.2 ms planned for the owner (100,000 chunks, 100 owners); planning
        # each run costs a fraction of a millisecond. Only the built-in default is replaced: a
        # mode set in the server's configuration, for the role or the database, or in the
        # connection's options is kept (`auto` too).
        with conn.transaction():
            conn.execute(
                "SELECT set_config('plan_cache_mode', 'force_custom_plan', false) "
                "FROM pg_settings WHERE name = 'plan_cache_mode' AND source = 'default'"
            )
        _register_vector(conn)

    def _get_pool(self) -> ConnectionPool[Any]:
        pid = os.getpid()
        if self._pool is not None and self._pid == pid:
            return self._pool
        with self._lock:
            if self._pid != pid:
                if self._pool is not None:
                    _ABANDONED.append(self._pool)
                self._pool = None
                self._lock = threading.Lock()  # a lock held at fork time would deadlock
                self._pid = pid
            if self._pool is None:
                pool: ConnectionPool[Any] = ConnectionPool(
                    self.conninfo,
                    min_size=self.min_size,
                    max_size=self.max_size,
                    open=False,
                    configure=self._configure,
                    timeout=self.timeout,
                    # libpq waits at most this long per attempt (it counts whole seconds, >= 2)
                    kwargs={"connect_timeout": max(2, math.ceil(self.connect_timeout))},
                    name=f"ctxpipe-{pid}",
                )
                pool.open(wait=False)
                self._pool = pool
            return self._pool

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection in a transaction; commits on success, rolls back on error."""
        pool = self._get_pool()
        conn = self._getconn(pool)
        try:
            if conn.adapters.types.get("vector") is None:
                _register_vector(conn)  # the extension may have been created after connect
            with conn:  # commit on success, rollback on error; pooled conns stay open
                yield conn
        finally:
            pool.putconn(conn)

    @contextmanager
    def autocommit(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection in autocommit mode: each statement is its own transaction and
        goes out without BEGIN and COMMIT, so a one-statement transaction costs one round trip
        (`connection()` costs three). For work that fits in one statement."""
        pool = self._get_pool()
        with self._autocommit(pool, self._getconn(pool)) as conn:
            yield conn

    @contextmanager
    def idle_autocommit(self) -> Iterator[psycopg.Connection[Any] | None]:
        """`autocommit` on a connection the pool has idle now, else None, waiting for none: for
        optional work of a caller that holds a connection already (two callers each holding
        one and waiting for a second could wait for each other until the pool's timeout)."""
        pool = self._get_pool()
        try:
            conn = pool.getconn(timeout=_IDLE_ONLY_S)
        except PoolTimeout:
            yield None
            return
        with self._autocommit(pool, conn) as ready:
            yield ready

    @contextmanager
    def _autocommit(
        self, pool: ConnectionPool[Any], conn: psycopg.Connection[Any]
    ) -> Iterator[psycopg.Connection[Any]]:
        try:
            if conn.adapters.types.get("vector") is None:
                _register_vector(conn)
            conn.autocommit = True
            yield conn
        finally:
            try:
                conn.autocommit = False  # the pool hands out transactional connections
            except psycopg.Error:
                pass  # a broken connection: the pool discards it
            pool.putconn(conn)

    def _getconn(self, pool: ConnectionPool[Any]) -> psycopg.Connection[Any]:
        """A connection. When none comes within `connect_timeout`, one direct attempt tells an
        unreachable server (fail now, naming the cause) from a busy pool (wait up to
        `timeout` in all)."""
        # before the first connection a short wait: an unreachable server is named at once
        first = min(self.connect_timeout, self.timeout, 1.0 if not self._connected else 1e9)
        try:
            try:
                conn = (
                    pool.getconn(timeout=first) if self._connected else _first_getconn(pool, first)
                )
                self._connected = True
                return conn
            except PoolTimeout as exc:
                _probe(self.conninfo, self.connect_timeout, exc)
                return pool.getconn(timeout=max(self.timeout - first, 0.1))
        except StorageError:
            raise
        except (PoolTimeout, psycopg.OperationalError) as exc:
            raise connect_error(self.conninfo, exc) from exc

    def close(self) -> None:
        """Close the pool (only in the process that opened it)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            if self._pid == os.getpid():
                pool.close()
            else:
                _ABANDONED.append(pool)

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["Database", "connect_error", "redact", "wait_ready"]
