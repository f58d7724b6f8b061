"""How a commit step fails: transient failures (retried by the task layer with backoff) and
permanent ones (the commit is marked failed at once), told apart by type along the cause
chain, never by name."""

from __future__ import annotations

import functools
import inspect
from typing import Any

import psycopg
import redis

from ctxpipe.core.errors import (
    CommitError,
    CtxError,
    LLMError,
    LLMThrottledError,
    LockTimeoutError,
    Picklable,
    StorageError,
)


class TransientStepError(Picklable):
    """A failure worth retrying (timeouts, connection loss, lock contention). It pickles (a
    Celery worker pickles a retry's reason) with its message, which holds the cause's text: the
    cause itself, which may not pickle, stays its `__cause__`."""

    def __init__(self, phase: str, cause: BaseException) -> None:
        self.phase = phase
        super().__init__(f"transient failure in {phase}: {cause}")


class CommitIdConflictError(CtxError):
    def __init__(self, commit_id: str) -> None:
        super().__init__(
            f"commit id {commit_id!r} was already used for another account, user, agent or session"
        )


class CommitAlreadyFailedError(CommitError):
    """A task of a commit the ledger already marked failed: it must not run."""

    def __init__(self, commit_id: str) -> None:
        super().__init__(f"commit {commit_id} is already marked failed", phase="failed")


# Failures of infrastructure that come back by themselves: a connection lost or refused, a
# server shutting down or restarting, a pool with no free connection in time.
TRANSIENT_TYPES: tuple[type[BaseException], ...] = (
    LockTimeoutError,
    TimeoutError,
    ConnectionError,
    psycopg.OperationalError,  # connection failures, admin/crash shutdown, PoolTimeout
    psycopg.InterfaceError,  # a connection already closed under us
    redis.ConnectionError,
    redis.TimeoutError,
    redis.BusyLoadingError,
)


def is_transient(exc: BaseException | None) -> bool:
    """Retry, or fail the commit? By type, along the cause chain: an LLM error says itself; a
    `StorageError` is transient when it wraps a transient error or nothing (our own "cannot
    connect" errors); schema and programming errors are permanent."""
    seen = 0
    while exc is not None and seen < 5:
        if isinstance(exc, LLMError):
            return exc.transient
        if isinstance(exc, TRANSIENT_TYPES):
            return True
        if isinstance(exc, StorageError) and exc.__cause__ is None:
            return True
        exc = exc.__cause__
        seen += 1
    return False


def throttle_delay(exc: BaseException | None) -> float | None:
    """The wait an LLM call asked for when it was throttled (`LLMThrottledError` along the
    cause chain), or None: the task retries after that wait rather than with its backoff."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, LLMThrottledError):
            return exc.retry_after_s
        exc = exc.__cause__
        seen += 1
    return None


def transient_as_retry(phase: str) -> Any:
    """Decorate a step: any transient failure — also of the ledger reads and writes around the
    phase itself — becomes `TransientStepError`, which the task layer retries with backoff."""

    def classify(exc: Exception) -> None:
        if not isinstance(exc, TransientStepError | CommitError) and is_transient(exc):
            raise TransientStepError(phase, exc) from exc

    def wrap(fn: Any) -> Any:
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def astep(*args: Any, **kwargs: Any) -> Any:
                try:
                    return await fn(*args, **kwargs)
                except Exception as exc:
                    classify(exc)
                    raise

            return astep

        @functools.wraps(fn)
        def step(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except Exception as exc:
                classify(exc)
                raise

        return step

    return wrap


__all__ = [
    "TRANSIENT_TYPES",
    "CommitAlreadyFailedError",
    "CommitIdConflictError",
    "TransientStepError",
    "is_transient",
    "throttle_delay",
    "transient_as_retry",
]
