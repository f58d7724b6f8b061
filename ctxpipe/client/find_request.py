"""`FindRequest`: one find — the query and how it is narrowed — as the API, the CLI, the client
and the MCP server pass it down to the read path (`ReadPath.find`). Who asks (the account,
user, agent and session) travels beside it as a `RequestContext`; the API body is the two
together (`FindIn`). `SearchRequest` and `ContextRequest` are the same for search and
build_context."""

from __future__ import annotations

from datetime import date
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ctxpipe.client.request_fields import AS_OF, AsOf, Query


class FindRequest(BaseModel):
    """One hybrid (vector + full-text) retrieval."""

    model_config = ConfigDict(extra="forbid")

    query: Query
    top_k: int | None = Field(
        None, ge=1, le=200, description="hits at most (omitted: the server's find top_k, 10)"
    )
    budget_tokens: int | None = Field(
        None, ge=1, le=1_000_000, description="no more hits than fit in this many tokens"
    )
    scopes: list[str] | None = Field(None, max_length=50, description="URI prefixes")
    categories: list[str] | None = Field(None, max_length=50)
    context_types: list[str] | None = Field(None, max_length=10)
    min_score: float = Field(0.0, ge=-1.0, le=1.0, description="minimum cosine similarity")
    tags: list[str] | None = Field(
        None, max_length=50, description="only nodes that carry every one of these tags"
    )
    as_of: AsOf = Field(None, description=AS_OF)


def find_request(
    query: str | FindRequest, top_k: int | None, as_of: date | str | None, **filters: Any
) -> FindRequest:
    """The `FindRequest` of the client's `find(...)` arguments (a ValidationError, before any
    request is sent, when they are not a valid find)."""
    if isinstance(query, FindRequest):
        return query
    fields = {k: v for k, v in filters.items() if v is not None}
    return FindRequest.model_validate({"query": query, "top_k": top_k, "as_of": as_of, **fields})


__all__ = ["AS_OF", "FindRequest", "find_request"]
