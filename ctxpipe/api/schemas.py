"""Request and response bodies of the /v1 API (results of the read path are the library's own
models)."""

from __future__ import annotations

from datetime import date
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ctxpipe.api.keys import Scope
from ctxpipe.core.models import CommitOptions, CommitResult
from ctxpipe.core.session import Message, ToolUse

_ID = Field(None, max_length=128)
AS_OF = "profile and preference facts valid on this date (YYYY-MM-DD); omitted: valid now"


class Identity(BaseModel):
    """Who the request acts for. The account comes from the key (naming another one is
    refused); a key bound to a user or agent fixes that id."""

    model_config = ConfigDict(extra="forbid")

    account_id: str | None = Field(None, max_length=64)
    user_id: str | None = _ID
    agent_id: str | None = _ID
    session_id: str | None = _ID


class CommitIn(Identity):
    session_id: str = Field(max_length=128)
    messages: list[Message] = Field(min_length=1)
    used_contexts: list[str] = Field(default_factory=list)
    used_tools: list[ToolUse] = Field(default_factory=list)
    commit_id: str | None = Field(
        None, max_length=128, description="idempotency key: submitting it again changes nothing"
    )
    options: CommitOptions | None = None


class CommitAccepted(BaseModel):
    commit_id: str
    phase: str = "enqueued"
    status_url: str


class CommitStatus(BaseModel):
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


class FindIn(Identity):
    query: str = Field(min_length=1, max_length=8000)
    top_k: int = Field(10, ge=1, le=200)
    scopes: list[str] | None = Field(None, max_length=50)
    categories: list[str] | None = Field(None, max_length=50)
    context_types: list[str] | None = Field(None, max_length=10)
    min_score: float = Field(0.0, ge=-1.0, le=1.0)
    tags: list[str] | None = Field(None, max_length=50)
    as_of: date | None = Field(None, description=AS_OF)


class SearchIn(Identity):
    query: str = Field(min_length=1, max_length=8000)
    recent: list[Message] = Field(default_factory=list, max_length=200)
    scopes: list[str] | None = Field(None, max_length=50)
    as_of: date | None = Field(None, description=AS_OF)


class ContextIn(Identity):
    query: str = Field(min_length=1, max_length=8000)
    messages: list[Message] = Field(default_factory=list, max_length=2000)
    budget: int | None = Field(None, ge=1, le=1_000_000)
    profile: str = Field("default", max_length=64)
    system_prompt: str = Field("", max_length=100_000)
    incremental: bool = True
    as_of: date | None = Field(None, description=AS_OF)


class ReadOut(BaseModel):
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
    model_config = ConfigDict(extra="forbid")

    user_id: str | None = _ID
    agent_id: str | None = _ID
    scopes: list[Scope] = Field(min_length=1, max_length=3)
    name: str = Field("", max_length=128)


__all__ = [
    "CommitAccepted",
    "CommitIn",
    "CommitStatus",
    "ContextIn",
    "FindIn",
    "Health",
    "Identity",
    "KeyIn",
    "ReadOut",
    "RemoveOut",
    "SearchIn",
]
