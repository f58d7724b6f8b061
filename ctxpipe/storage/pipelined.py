"""A read statement sent ahead: PostgreSQL runs it while the caller works on.

`SentStatement` takes a pooled connection in autocommit mode, sends one statement in pipeline
mode (psycopg returns as soon as it is on the wire) and keeps the connection until `rows()`
reads the result. `find` sends its full-text arm this way before it embeds the question: the
server ranks the text while the model runs, in its own process, with no second Python thread
to contend with the model for the interpreter lock. A flush request follows the statement, so
that its rows are on their way as soon as they are made (a pipeline's results otherwise wait
in the server until the reader asks for them: one more round trip at the read).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from typing import Any, Generic, TypeVar

import psycopg
from psycopg import sql
from psycopg.rows import RowFactory

from ctxpipe.core.errors import StorageError
from ctxpipe.storage.db import Database

R = TypeVar("R")
T = TypeVar("T", covariant=True)
U = TypeVar("U")


class NoIdleConnection(Exception):
    """The pool had no idle connection for a statement sent only if it had one (`wait`
    False)."""


class SentStatement(Generic[R]):
    """One statement on the wire. `rows()` waits for its rows and gives the connection back;
    `close()` (or leaving the `with` block) gives it back unread. `what` names the statement
    in a failure's message; `setup` prepares the cursor before the statement is sent (a
    loader of its own for a column type, say). With `wait` False the statement takes a
    connection the pool has idle now or raises `NoIdleConnection`, waiting for none
    (`Database.idle_autocommit`): for a statement worth sending only while the caller holds
    another connection."""

    def __init__(
        self,
        db: Database,
        query: str | sql.Composed,
        params: dict[str, Any],
        rows: RowFactory[R],
        what: str,
        setup: Callable[[psycopg.Cursor[R]], None] | None = None,
        *,
        wait: bool = True,
    ) -> None:
        self._what = what
        self._read = False
        self._stack = ExitStack()
        try:
            idle = self._stack.enter_context(db.autocommit() if wait else db.idle_autocommit())
            if idle is None:
                raise NoIdleConnection
            conn = idle
            self._stack.enter_context(conn.pipeline())
            self._cur = self._stack.enter_context(conn.cursor(row_factory=rows, binary=True))
            if setup is not None:
                setup(self._cur)
            self._cur.execute(query, params)
            # the server keeps a pipeline's results until asked to flush them: asked now, the
            # rows come as they are made, and reading them costs no round trip
            conn.pgconn.send_flush_request()
            conn.pgconn.flush()
        except psycopg.Error as exc:
            self.close()
            raise self._failed(exc) from exc
        except BaseException:
            self.close()
            raise

    def _failed(self, exc: psycopg.Error) -> StorageError:
        return StorageError(f"{self._what} failed: {' '.join(str(exc).split())}")

    def rows(self) -> list[R]:
        if self._read:  # its connection is back in the pool, maybe in another's hands
            raise RuntimeError(f"{self._what}: its rows were read already")
        self._read = True
        try:
            return self._cur.fetchall()
        except psycopg.Error as exc:
            raise self._failed(exc) from exc
        finally:
            self.close()

    def close(self) -> None:
        try:
            self._stack.close()
        except psycopg.Error:
            pass  # the statement failed or the connection broke: the pool discards it

    def __enter__(self) -> SentStatement[R]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Pending(Generic[T]):
    """What a statement sent ahead will give (`finish` reads it, when there is one, and
    makes the result): `result()` waits for it; `close()`, or leaving the `with` block, gives
    the statement's connection back unread."""

    def __init__(self, finish: Callable[[], T], sent: SentStatement[Any] | None = None) -> None:
        self._finish = finish
        self._sent = sent

    def result(self) -> T:
        return self._finish()

    def then(self, after: Callable[[T], U]) -> Pending[U]:
        """What `after` makes of this result, on the same statement (read when it is)."""
        return Pending(lambda: after(self._finish()), self._sent)

    def close(self) -> None:
        if self._sent is not None:
            self._sent.close()

    def __enter__(self) -> Pending[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["NoIdleConnection", "Pending", "SentStatement"]
