"""`SearchRequest`: one search — the query, the recent conversation it is read with (intent
analysis), and how it is narrowed — as the API, the CLI, the client and the MCP server pass it
down to the read path (`ReadPath.search`). Who asks travels beside it as a `RequestContext`;
the API body is the two together (`SearchIn`)."""

from __future__ import annotations

from datetime import date
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ctxpipe.client.request_fields import AS_OF, AsOf, Query
from ctxpipe.core.session import Message


class SearchRequest(BaseModel):
    """A hierarchical search: the query is read with the recent messages (intent analysis)."""

    model_config = ConfigDict(extra="forbid")

    query: Query
    recent: list[Message] = Field(default_factory=list, max_length=200)
    scopes: list[str] | None = Field(None, max_length=50)
    as_of: AsOf = Field(None, description=AS_OF)


def search_request(
    query: str | SearchRequest,
    recent: list[Message] | list[dict[str, Any]] | None,
    scopes: list[str] | None,
    as_of: date | str | None,
) -> SearchRequest:
    """The `SearchRequest` of the client's `search(...)` arguments (a ValidationError, before
    any request is sent, when they are not a valid search)."""
    if isinstance(query, SearchRequest):
        return query
    return SearchRequest.model_validate(
        {"query": query, "recent": recent or [], "scopes": scopes, "as_of": as_of}
    )


__all__ = ["SearchRequest", "search_request"]
