"""Every exception ctxpipe defines survives pickling with its type, message and attributes: a
Celery worker pickles what a task raises (a retry's reason, a final failure) and replaces an
exception that does not come back intact with a stand-in that has lost its type."""

from __future__ import annotations

import importlib
import pickle
import pkgutil
from collections.abc import Callable

import pytest

import ctxpipe
from ctxpipe.api.errors import ApiError
from ctxpipe.api.middleware import _BodyTooLarge
from ctxpipe.api.ratelimit import RateLimited
from ctxpipe.api.ui.visitor import SignInRequired
from ctxpipe.client._base import CommitFailedError, CtxApiError
from ctxpipe.client.models import CommitStatus
from ctxpipe.commit.failures import (
    CommitAlreadyFailedError,
    CommitIdConflictError,
    TransientStepError,
)
from ctxpipe.core.errors import (
    BacklogFullError,
    CommitError,
    CtxError,
    EmbeddingError,
    FilesystemUnavailableError,
    InvalidURIError,
    LLMError,
    LLMThrottledError,
    LockTimeoutError,
    NodeNotFoundError,
    Picklable,
    PromptError,
    StorageError,
    TenancyError,
    UnavailableError,
    VersionConflictError,
)
from ctxpipe.core.session import InputLimitError, RequestContext
from ctxpipe.fs.erasure_marks import UserErasedError
from ctxpipe.fs.session_owner import SessionOwnerError
from ctxpipe.index.worker import PermanentEventError
from ctxpipe.observability.tracing import TracingConfigError
from ctxpipe.portability.importer import ImportFileError
from ctxpipe.portability.records import RecordError
from ctxpipe.providers.openai_llm import _FormatRejected, _RetryableError, _ServerThrottled
from ctxpipe.providers.structured_output import OutputRefused
from ctxpipe.resources import ResourceNotFoundError
from ctxpipe.retrieval.access import OwnerAccessError
from ctxpipe.service import CommitNotFoundError
from ctxpipe.storage.migrations import MigrationError
from ctxpipe.storage.pipelined import NoIdleConnection


class _UnpicklableCause(ConnectionError):
    """A cause that cannot be pickled (as one holding a lock, a socket or a generator)."""

    def __reduce__(self) -> str | tuple[object, ...]:
        raise TypeError("cannot pickle this cause")


_CTX = RequestContext(account_id="acme", user_id="bob", agent_id="a1", session_id="s1")

# An instance of each exception class of ctxpipe, built as the code raises it.
SAMPLES: dict[str, Callable[[], BaseException]] = {
    "Picklable": lambda: Picklable("something failed"),
    "CtxError": lambda: CtxError("something failed"),
    "InvalidURIError": lambda: InvalidURIError("ctx://x/../y", "escapes its root"),
    "NodeNotFoundError": lambda: NodeNotFoundError("ctx://acme/users/bob/memories/a"),
    "VersionConflictError": lambda: VersionConflictError("ctx://acme/a", 3, 4),
    "LockTimeoutError": lambda: LockTimeoutError("acme/users/bob", 2.5),
    "PromptError": lambda: PromptError("prompt compression.archive_summary is missing"),
    "LLMError": lambda: LLMError("provider answered 500", transient=True),
    "LLMThrottledError": lambda: LLMThrottledError(12.5, "requests per minute"),
    "EmbeddingError": lambda: EmbeddingError("model not loaded"),
    "StorageError": lambda: StorageError("cannot connect"),
    "CommitError": lambda: CommitError("bad plan", phase="plan", partial_results=["ctx://acme/a"]),
    "TenancyError": lambda: TenancyError("ctx://other/a", "acme"),
    "FilesystemUnavailableError": lambda: FilesystemUnavailableError("disk full"),
    "UnavailableError": lambda: UnavailableError("broker unreachable"),
    "BacklogFullError": lambda: BacklogFullError(120, 100, 30.0, oldest_age_s=4.0),
    "InputLimitError": lambda: InputLimitError("the session has 5000 messages"),
    "TransientStepError": lambda: TransientStepError("archive", ConnectionError("refused")),
    "TransientStepError of an unpicklable cause": lambda: TransientStepError(
        "extract", _UnpicklableCause("socket closed")
    ),
    "CommitIdConflictError": lambda: CommitIdConflictError("c-1"),
    "CommitAlreadyFailedError": lambda: CommitAlreadyFailedError("c-1"),
    "CommitNotFoundError": lambda: CommitNotFoundError("c-1"),
    "UserErasedError": lambda: UserErasedError("acme", "bob"),
    "SessionOwnerError": lambda: SessionOwnerError("acme", "s1", _CTX, "user"),
    "OwnerAccessError": lambda: OwnerAccessError("ctx://acme/users/eve/a", "user bob"),
    "MigrationError": lambda: MigrationError("001_init.sql was changed after it was applied"),
    "NoIdleConnection": lambda: NoIdleConnection(),
    "ResourceNotFoundError": lambda: ResourceNotFoundError("cannot find the sql/ directory"),
    "OutputRefused": lambda: OutputRefused("does not match schema Plan"),
    "_RetryableError": lambda: _RetryableError("connection reset", transient=True),
    "_ServerThrottled": lambda: _ServerThrottled("HTTP 429", 3.0),
    "_FormatRejected": lambda: _FormatRejected("response_format is not supported"),
    "RecordError": lambda: RecordError(7, "unknown field 'x'"),
    "ImportFileError": lambda: ImportFileError([RecordError(7, "unknown field 'x'")], 3),
    "TracingConfigError": lambda: TracingConfigError("unknown exporter 'zipkin'"),
    "PermanentEventError": lambda: PermanentEventError("bad payload"),
    "SignInRequired": lambda: SignInRequired("no session"),
    "ApiError": lambda: ApiError(403, "missing scope commit", details={"scope": "commit"}),
    "_BodyTooLarge": lambda: _BodyTooLarge(1024),
    "RateLimited": lambda: RateLimited("100/minute", 7),
    "CtxApiError": lambda: CtxApiError(404, "not_found", "no such node", {"uri": "ctx://a"}),
    "CommitFailedError": lambda: CommitFailedError(
        CommitStatus(
            commit_id="c-1", phase="failed", finished=True, error="boom", error_phase="plan"
        )
    ),
}


def _defined_in_ctxpipe() -> set[type[BaseException]]:
    """Every exception class a module of the ctxpipe package defines."""
    found: set[type[BaseException]] = set()
    for info in pkgutil.walk_packages(ctxpipe.__path__, "ctxpipe."):
        if info.name.endswith("__main__"):
            continue  # running it is the command itself
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, BaseException)
                and value.__module__ == module.__name__
            ):
                found.add(value)
    return found


def test_every_exception_class_of_ctxpipe_has_a_sample_above() -> None:
    sampled = {type(make()) for make in SAMPLES.values()}
    missing = sorted(f"{c.__module__}.{c.__qualname__}" for c in _defined_in_ctxpipe() - sampled)
    assert missing == []


@pytest.mark.parametrize("name", list(SAMPLES))
def test_an_error_comes_back_from_pickle_with_its_type_message_and_attributes(name: str) -> None:
    err = SAMPLES[name]()

    back = pickle.loads(pickle.dumps(err))

    assert type(back) is type(err)
    assert str(back) == str(err)
    assert back.args == err.args
    assert vars(back).keys() == vars(err).keys()
    for attr, value in vars(err).items():
        if isinstance(value, list) and value and isinstance(value[0], BaseException):
            assert [str(e) for e in getattr(back, attr)] == [str(e) for e in value], attr
        else:
            assert getattr(back, attr) == value, attr
