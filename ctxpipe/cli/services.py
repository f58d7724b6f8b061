"""What the commands work on, built in one place: the service, its `Runtime`, a database pool,
the ContextFS.

Every command opens them here, from the settings of the environment (`app.settings`) unless it
passes its own. This is where the CLI, the composition root, reaches `tasks/` for the
`CeleryDispatcher` (lazily: `tasks` imports Celery, the library never does). The adapters are
imported when a command opens them: `ctxpipe --help` and the commands that need no service do
not load the commit pipeline, the read path and the model code."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Literal

from ctxpipe.cli.app import settings
from ctxpipe.core.config import Settings

if TYPE_CHECKING:
    from ctxpipe.fs import ContextFS
    from ctxpipe.runtime import Runtime
    from ctxpipe.service import ContextEngineService
    from ctxpipe.storage.db import Database

Commits = Literal["in-process", "celery"]
"""Where the service's commits run: in this process (`InlineDispatcher`), or enqueued on
Celery (`CeleryDispatcher`). Reads always run in this process."""


def _or_env(cfg: Settings | None) -> Settings:
    return settings() if cfg is None else cfg


def open_runtime(cfg: Settings | None = None, *, optional_database: bool = False) -> Runtime:
    """The adapters of `cfg` (default: the environment's settings); the caller closes it.

    With `optional_database`, PostgreSQL is probed first and, when it cannot be reached,
    in-process commits and maintenance run without it (no dedup prefilter, no outbox: the
    replica catches up with `ctxpipe repair`); `runtime.use_database` tells which."""
    from ctxpipe.runtime import Runtime

    rt = Runtime(_or_env(cfg))
    if optional_database:
        rt.use_database = rt.database_reachable()
    return rt


def build_service(
    cfg: Settings | None = None,
    *,
    commits: Commits = "in-process",
    optional_database: bool = False,
) -> ContextEngineService:
    """The service every command uses (the caller closes it: `service` does)."""
    from ctxpipe.service import ContextEngineService

    rt = open_runtime(cfg, optional_database=optional_database)
    if commits == "in-process":
        return ContextEngineService(rt)
    from tasks.dispatcher import CeleryDispatcher  # the CLI is the composition root

    return ContextEngineService(rt, CeleryDispatcher(rt.settings, rt.db))


@contextmanager
def service(
    cfg: Settings | None = None,
    *,
    commits: Commits = "in-process",
    optional_database: bool = False,
) -> Iterator[ContextEngineService]:
    """`build_service`, closed on the way out (which flushes the recall statistics recorded
    in the background)."""
    svc = build_service(cfg, commits=commits, optional_database=optional_database)
    try:
        yield svc
    finally:
        svc.close()


@contextmanager
def runtime(cfg: Settings | None = None, *, optional_database: bool = False) -> Iterator[Runtime]:
    """`open_runtime`, closed on the way out."""
    rt = open_runtime(cfg, optional_database=optional_database)
    try:
        yield rt
    finally:
        rt.close()


@contextmanager
def database(cfg: Settings | None = None) -> Iterator[Database]:
    """A pool on the index replica's database alone (admin reads of the ledger, API keys)."""
    from ctxpipe.storage.db import Database

    db = Database.from_settings(_or_env(cfg))
    try:
        yield db
    finally:
        db.close()


def open_fs(cfg: Settings | None = None) -> ContextFS:
    """The ContextFS alone, for the admin reads of the FS (no tenancy, no database)."""
    from ctxpipe.fs import ContextFS

    return ContextFS.from_settings(_or_env(cfg))


__all__ = ["Commits", "build_service", "database", "open_fs", "open_runtime", "runtime", "service"]
