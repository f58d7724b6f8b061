"""The request and response bodies of the /v1 API, owned by the client.

The API imports them from here (`ctxpipe.api.schemas`), never the reverse: the client needs
only httpx and pydantic. Sessions, messages and commit results are the shared domain models of
`ctxpipe.core` (pydantic only, no I/O); the read path's results are in
`ctxpipe.client.results`.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from ctxpipe.client.context_request import ContextRequest
from ctxpipe.client.find_request import FindRequest
from ctxpipe.client.request_fields import AS_OF
from ctxpipe.client.search_request import SearchRequest
from ctxpipe.core.models import CommitOptions, CommitResult
from ctxpipe.core.session import Message, ToolUse

_ID = Field(None, max_length=128)


class Scope(StrEnum):
    """What an API key may do."""

    READ = "read"  # find, search, context, node reads, commit status
    COMMIT = "commit"  # submit commits, remove one's memories
    ADMIN = "admin"  # manage the keys of its account


class ApiKey(BaseModel):
    """A stored key (never its secret)."""

    key_id: str
    account_id: str
    user_id: str | None = None
    agent_id: str | None = None
    scopes: list[Scope]
    name: str = ""
    created_at: datetime | None = None
    revoked_at: datetime | None = None
    last_used_at: datetime | None = None

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None

    def allows(self, scope: Scope) -> bool:
        return scope in self.scopes


class CreatedKey(BaseModel):
    """A new key: its secret (shown once) and its record."""

    key: str
    record: ApiKey


class Identity(BaseModel):
    """Who the request acts for. The account comes from the key (naming another one is
    refused); a key bound to a user or agent fixes that id."""

    model_config = ConfigDict(extra="forbid")

    account_id: str | None = Field(None, max_length=64)
    user_id: str | None = _ID
    agent_id: str | None = _ID
    session_id: str | None = _ID


class CommitIn(Identity):
    """A session to commit: its messages and what the agent used while answering."""

    session_id: str = Field(max_length=128)
    messages: list[Message] = Field(min_length=1)
    used_contexts: list[str] = Field(default_factory=list)
    used_tools: list[ToolUse] = Field(default_factory=list)
    commit_id: str | None = Field(
        None, max_length=128, description="idempotency key: submitting it again changes nothing"
    )
    options: CommitOptions | None = None


class CommitAccepted(BaseModel):
    """A commit was accepted: poll `status_url` (or `wait_commit`) for its end."""

    commit_id: str
    phase: str = "enqueued"
    status_url: str


class CommitStatus(BaseModel):
    """Where a commit is: its phase, whether it finished, and its result once it has."""

    commit_id: str
    user_id: str = ""
    agent_id: str = ""
    session_id: str = ""
    phase: str
    status: str | None = None
    finished: bool
    extractors: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None
    error_phase: str | None = None
    result: CommitResult | None = None


R = TypeVar("R", bound=BaseModel)


def _request_of(body: BaseModel, request: type[R]) -> R:
    """The request part of an API body (its own fields, without who asks); the values are
    already valid, so messages are handed over as they are."""
    return request.model_validate({name: getattr(body, name) for name in request.model_fields})


class FindIn(Identity, FindRequest):
    """One hybrid (vector + full-text) retrieval: who asks, and the `FindRequest`."""

    def request(self) -> FindRequest:
        """The find itself, without who asks."""
        return _request_of(self, FindRequest)


class SearchIn(Identity, SearchRequest):
    """A hierarchical search (the query read with the recent messages): who asks, and the
    `SearchRequest`."""

    def request(self) -> SearchRequest:
        """The search itself, without who asks."""
        return _request_of(self, SearchRequest)


class ContextIn(Identity, ContextRequest):
    """A token-budgeted context for the next LLM call: who asks, and the `ContextRequest`."""

    def request(self) -> ContextRequest:
        """The build itself, without who asks."""
        return _request_of(self, ContextRequest)


class ReadOut(BaseModel):
    """One level of a node: 0 = its one-line abstract, 1 = overview, 2 = full content."""

    uri: str
    level: int
    text: str


class RemoveOut(BaseModel):
    uri: str
    removed: bool


class Health(BaseModel):
    status: str
    checks: dict[str, str] = Field(default_factory=dict)


class KeyIn(BaseModel):
    """A key to create in the caller's account."""

    model_config = ConfigDict(extra="forbid")

    user_id: str | None = _ID
    agent_id: str | None = _ID
    scopes: list[Scope] = Field(min_length=1, max_length=3)
    name: str = Field("", max_length=128)


__all__ = [
    "AS_OF",
    "ApiKey",
    "CommitAccepted",
    "CommitIn",
    "CommitStatus",
    "ContextIn",
    "ContextRequest",
    "CreatedKey",
    "FindIn",
    "FindRequest",
    "Health",
    "Identity",
    "KeyIn",
    "ReadOut",
    "RemoveOut",
    "Scope",
    "SearchIn",
    "SearchRequest",
]
