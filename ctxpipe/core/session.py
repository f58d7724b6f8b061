"""The commit input: who is committing (RequestContext) and what (a session of messages)."""

from __future__ import annotations

import re
import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,127}$")


def _check_id(value: str, what: str) -> str:
    if not _ID_RE.fullmatch(value) or ".." in value:
        raise ValueError(
            f"{what} {value!r} must be 1-128 chars of letters, digits, '_', '-', '.', '@' "
            "and start with a letter or digit"
        )
    return value


class RequestContext(BaseModel):
    """Request-scoped context carried through the whole write path (seed 004 §3.1)."""

    model_config = ConfigDict(frozen=True)

    account_id: str
    user_id: str
    agent_id: str = "default"
    session_id: str
    trace_id: str = Field(default_factory=lambda: uuid.uuid4().hex)

    @field_validator("account_id")
    @classmethod
    def _account(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}", v):
            raise ValueError(f"account_id {v!r} must be 1-64 chars of letters, digits, '-' or '_'")
        return v

    @field_validator("user_id", "agent_id", "session_id")
    @classmethod
    def _ids(cls, v: str, info: Any) -> str:
        return _check_id(v, info.field_name)

    @property
    def user_space(self) -> str:
        return f"users/{self.user_id}"

    @property
    def agent_space(self) -> str:
        return f"agents/{self.agent_id}"


class Message(BaseModel):
    """One chat message. `injected` marks text recalled from memory (never re-stored)."""

    id: str = Field(min_length=1, max_length=128)
    role: Literal["user", "assistant", "system", "tool"]
    name: str | None = None
    content: str
    created_at: datetime | None = None
    injected: bool = False

    @field_validator("content")
    @classmethod
    def _content(cls, v: str) -> str:
        if "\x00" in v:
            raise ValueError("content contains a NUL character")
        return v


class ToolUse(BaseModel):
    """One tool or skill invocation recorded during the session."""

    name: str = Field(min_length=1, max_length=128)
    kind: Literal["tool", "skill"] = "tool"
    success: bool = True
    duration_ms: int = Field(0, ge=0)
    tokens: int = Field(0, ge=0)
    input: str | None = None
    output: str | None = None
    error: str | None = None
    message_id: str | None = None


class SessionInput(BaseModel):
    """The JSON a producer commits: identity, messages, and what the session used."""

    account_id: str
    user_id: str
    agent_id: str = "default"
    session_id: str
    messages: list[Message] = Field(min_length=1)
    used_contexts: list[str] = Field(default_factory=list)
    used_tools: list[ToolUse] = Field(default_factory=list)
    commit_id: str | None = None

    @model_validator(mode="after")
    def _unique_ids(self) -> SessionInput:
        seen: set[str] = set()
        for m in self.messages:
            if m.id in seen:
                raise ValueError(f"duplicate message id {m.id!r}")
            seen.add(m.id)
        return self

    def context(self, trace_id: str | None = None) -> RequestContext:
        data = dict(
            account_id=self.account_id,
            user_id=self.user_id,
            agent_id=self.agent_id,
            session_id=self.session_id,
        )
        if trace_id:
            data["trace_id"] = trace_id
        return RequestContext(**data)


def message_vars(messages: list[Message]) -> list[dict[str, Any]]:
    """Messages as the plain dicts prompt templates and LLM providers receive."""
    return [
        {
            "id": m.id,
            "role": m.role,
            "name": m.name,
            "content": m.content,
            "created_at": m.created_at.isoformat() if m.created_at else None,
        }
        for m in messages
    ]
