"""`ContextRequest`: one build_context — the query, the conversation, the token budget and
its profile, the system prompt, whether to reuse the session's previous build — as the API,
the CLI, the client and the MCP server pass it down to the read path
(`ReadPath.build_context`). Who asks travels beside it as a `RequestContext`; the API body is
the two together (`ContextIn`)."""

from __future__ import annotations

from datetime import date
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ctxpipe.client.request_fields import AS_OF, AsOf, Query
from ctxpipe.core.session import Message


class ContextRequest(BaseModel):
    """A token-budgeted context for the next LLM call."""

    model_config = ConfigDict(extra="forbid")

    query: Query
    messages: list[Message] = Field(default_factory=list, max_length=2000)
    budget: int | None = Field(None, ge=1, le=1_000_000)
    profile: str = Field("default", max_length=64)
    system_prompt: str = Field("", max_length=100_000)
    incremental: bool = True
    as_of: AsOf = Field(None, description=AS_OF)


def context_request(
    query: str | ContextRequest,
    messages: list[Message] | list[dict[str, Any]] | None,
    budget: int | None,
    profile: str,
    system_prompt: str,
    incremental: bool,
    as_of: date | str | None,
) -> ContextRequest:
    """The `ContextRequest` of the client's `build_context(...)` arguments (a ValidationError,
    before any request is sent, when they are not a valid build)."""
    if isinstance(query, ContextRequest):
        return query
    return ContextRequest.model_validate(
        {
            "query": query,
            "messages": messages or [],
            "budget": budget,
            "profile": profile,
            "system_prompt": system_prompt,
            "incremental": incremental,
            "as_of": as_of,
        }
    )


__all__ = ["ContextRequest", "context_request"]
