"""Error hierarchy. Every error carries a message a user can act on."""

from __future__ import annotations

from typing import Any


def rebuilt(
    cls: type[BaseException], args: tuple[Any, ...], state: dict[str, Any]
) -> BaseException:
    """An error as it was pickled: its `args` (its message) and attributes set back, its
    `__init__` not run again (the unpickling half of `Picklable`)."""
    err = cls.__new__(cls, *args)
    err.args = args
    err.__dict__.update(state)
    return err


class Picklable(Exception):
    """Pickles an error whose `__init__` takes other arguments than the message it passes on.
    The default pickling calls `type(err)(*err.args)`, which fails (or wraps the message
    twice) for such an error; a Celery worker pickles what a task raises (a retry's reason, a
    final failure) and puts a stand-in of another type in place of one that does not come
    back. Its attributes must pickle (keep a cause as its text)."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (rebuilt, (type(self), self.args, dict(vars(self))))


class CtxError(Picklable):
    """Base class of every ctxpipe error."""


class InvalidURIError(CtxError, ValueError):
    """A ctx:// URI is malformed or would escape its root."""

    def __init__(self, uri: str, why: str) -> None:
        self.uri = uri
        self.why = why
        super().__init__(f"invalid URI {uri!r}: {why}")


class NodeNotFoundError(CtxError, FileNotFoundError):
    def __init__(self, uri: str) -> None:
        self.uri = uri
        super().__init__(f"no such node: {uri}")


class VersionConflictError(CtxError):
    def __init__(self, uri: str, expected: int, actual: int) -> None:
        self.uri = uri
        self.expected = expected
        self.actual = actual
        super().__init__(f"version conflict on {uri}: expected version {expected}, found {actual}")


class LockTimeoutError(CtxError, TimeoutError):
    def __init__(self, key: str, timeout: float) -> None:
        super().__init__(f"could not acquire lock {key!r} within {timeout:.1f}s")


class PromptError(CtxError):
    """A prompt template is missing, malformed, or rendered with missing variables."""


class LLMError(CtxError):
    """The LLM provider failed or returned output that does not match the schema."""

    def __init__(self, message: str, *, transient: bool = False) -> None:
        self.transient = transient
        super().__init__(message)


class LLMThrottledError(LLMError):
    """An LLM call that would wait longer than its bound for a permit of the rate limits (or a
    `Retry-After`): nothing was sent. Try the call again after `retry_after_s`; a Celery task
    retries with that countdown, which gives its worker slot back meanwhile."""

    def __init__(self, retry_after_s: float, why: str) -> None:
        self.retry_after_s = retry_after_s
        self.why = why
        super().__init__(
            f"LLM calls throttled ({why}); try again in {retry_after_s:.1f}s", transient=True
        )


class EmbeddingError(CtxError):
    pass


class StorageError(CtxError):
    pass


class CommitError(CtxError):
    """A commit failed in `phase`; for phases 1-3 nothing was written."""

    def __init__(self, message: str, phase: str, partial_results: list[Any] | None = None) -> None:
        self.phase = phase
        self.partial_results = partial_results or []
        super().__init__(f"commit failed in phase {phase}: {message}")


class TenancyError(CtxError, PermissionError):
    """A request tried to touch another account's or owner's data."""

    def __init__(self, uri: str, account: str) -> None:
        super().__init__(f"URI {uri} is outside account {account!r}")


class FilesystemUnavailableError(CtxError):
    """The ContextFS cannot take writes (full, below its free-space floor, or read-only)."""


class UnavailableError(CtxError):
    """A store or the broker the request needs cannot be reached right now (retry later)."""


class BacklogFullError(CtxError):
    """A submit refused by back-pressure: more commits are accepted but unfinished than the
    cap allows. Nothing was recorded; submit the same commit again after `retry_after_s`."""

    def __init__(
        self,
        pending: int,
        cap: int,
        retry_after_s: float,
        oldest_age_s: float | None = None,
    ) -> None:
        self.pending = pending
        self.cap = cap
        self.retry_after_s = retry_after_s
        self.oldest_age_s = oldest_age_s
        super().__init__(
            f"commit backlog full: {pending} commits accepted and not finished (cap {cap}); "
            f"nothing was recorded, submit again in {retry_after_s:.0f}s"
        )
