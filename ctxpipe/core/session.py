"""The commit input: who is committing (RequestContext) and what (a session of messages)."""

from __future__ import annotations

import re
import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ctxpipe.core.errors import CtxError

_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,127}$")


def check_text(value: str, what: str) -> str:
    """Text that can be stored: valid Unicode (no lone surrogates) and no NUL byte."""
    if "\x00" in value:
        raise ValueError(f"{what} contains a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{what} is not valid Unicode text (a lone surrogate)") from None
    return value


def check_label(value: str, what: str) -> str:
    """An id or name that reaches files and archive lines: printable, single-line text.

    Refuses NUL, newlines, tabs and every other control or format character (right-to-left
    overrides, zero-width characters), lone surrogates and leading/trailing whitespace."""
    bad = next((ch for ch in value if not ch.isprintable()), None)
    if bad is not None:
        raise ValueError(f"{what} must be printable single-line text (found U+{ord(bad):04X})")
    if value != value.strip():
        raise ValueError(f"{what} must not start or end with whitespace")
    return value


def shown(value: str, limit: int = 40) -> str:
    """`value` as an error message shows it: quoted, escaped, and cut to `limit` characters."""
    return repr(value) if len(value) <= limit else repr(value[:limit]) + f"… ({len(value)} chars)"


def _check_id(value: str, what: str) -> str:
    if not _ID_RE.fullmatch(value) or ".." in value:
        raise ValueError(
            f"{what} {shown(value)} must be 1-128 chars of letters, digits, '_', '-', '.', '@' "
            "and start with a letter or digit"
        )
    return value


class RequestContext(BaseModel):
    """Request-scoped context carried through the whole write path."""

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
            raise ValueError(
                f"account_id {shown(v)} must be 1-64 chars of letters, digits, '-' or '_'"
            )
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
    original_chars: int | None = Field(None, ge=0)
    """set when `content` is a bounded excerpt of a longer message: the message's length then
    (see `LimitsConfig.max_message_keep_chars`); None: the message is whole"""

    @field_validator("content")
    @classmethod
    def _content(cls, v: str) -> str:
        return check_text(v, "content")

    @field_validator("id", "name")
    @classmethod
    def _label(cls, v: str | None, info: Any) -> str | None:
        return v if v is None else check_label(v, f"message {info.field_name}")


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

    @field_validator("name", "message_id")
    @classmethod
    def _label(cls, v: str | None, info: Any) -> str | None:
        return v if v is None else check_label(v, f"tool {info.field_name}")

    @field_validator("input", "output", "error")
    @classmethod
    def _text(cls, v: str | None, info: Any) -> str | None:
        return v if v is None else check_text(v, f"tool {info.field_name}")


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


class LimitsConfig(BaseModel):
    """Size limits of a committed session (`Settings.limits`, `CTXPIPE_LIMITS__*`), enforced
    where the input enters (a larger input is refused with one clear error before anything is
    recorded or written; one long message is kept, or cut to a marked excerpt, never refused:
    see `ctxpipe.commit.big_messages`)."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    max_message_chars: int = Field(100_000, ge=1)
    """characters of one message the pipeline reads (the archive summary and the extractors
    read a longer message's first this many characters; the message itself is kept, and the
    commit's result carries a warning)"""
    max_message_keep_chars: int = Field(2_000_000, ge=1)
    """characters of one message that are kept: a longer message is kept as a bounded excerpt
    (its first this many characters, an explicit marker and its original length) with a
    warning, never refused"""
    max_messages: int = Field(2_000, ge=1)
    """messages per commit; commit a longer session in parts"""
    max_session_chars: int = Field(2_000_000, ge=1)
    """characters the pipeline reads of one commit: the sum over its messages of at most
    `max_message_chars` each"""
    max_used_items: int = Field(1_000, ge=0)
    """entries of `used_contexts`, and of `used_tools`, per commit"""


class InputLimitError(CtxError, ValueError):
    """A committed session exceeds a documented size limit (`CTXPIPE_LIMITS__*`)."""


def check_limits(
    messages: list[Message],
    used_contexts: list[str],
    used_tools: list[ToolUse],
    limits: LimitsConfig,
) -> None:
    """Refuse, with one clear line, a session larger than `limits` allows."""
    if len(messages) > limits.max_messages:
        raise InputLimitError(
            f"the session has {len(messages)} messages; at most {limits.max_messages} are "
            "accepted per commit (CTXPIPE_LIMITS__MAX_MESSAGES): commit it in parts"
        )
    # a long message is never refused: the pipeline reads a bounded window of it
    total = sum(min(len(m.content), limits.max_message_chars) for m in messages)
    if total > limits.max_session_chars:
        raise InputLimitError(
            f"the session's messages hold {total} characters (each counted up to "
            f"{limits.max_message_chars}, CTXPIPE_LIMITS__MAX_MESSAGE_CHARS); at most "
            f"{limits.max_session_chars} are accepted per commit "
            "(CTXPIPE_LIMITS__MAX_SESSION_CHARS): commit it in parts"
        )
    for what, items in (("used_contexts", used_contexts), ("used_tools", used_tools)):
        if len(items) > limits.max_used_items:
            raise InputLimitError(
                f"{what} has {len(items)} entries; at most {limits.max_used_items} are "
                "accepted (CTXPIPE_LIMITS__MAX_USED_ITEMS)"
            )
