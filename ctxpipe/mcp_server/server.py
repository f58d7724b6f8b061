"""MCP tools an agent needs: find, search, build_context, read, commit_session.

Every tool call goes through the HTTP API with the caller's key, so the keys, scopes and
tenancy rules are the API's own (nothing is decided here). The key is the `Authorization:
Bearer` (or `X-API-Key`) header of the MCP HTTP request when there is one (streamable HTTP),
else the key the server was started with (stdio: ``CTXPIPE_API_KEY``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import httpx
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, ValidationError

from ctxpipe.client import AsyncCtxClient, ContextRequest, CtxApiError, FindRequest, SearchRequest

INSTRUCTIONS = (
    "ctxpipe is the long-term memory of this agent. Call build_context (or find) before "
    "answering with what is known about the user; call add_messages with each new turn "
    "(close=true when the conversation ends), or commit_session with a whole conversation, "
    "so its memories are extracted."
)

R = TypeVar("R", bound=BaseModel)


def _key_from(headers: Mapping[str, str] | None) -> str | None:
    if not headers:
        return None
    lower = {k.lower(): v for k, v in headers.items()}
    auth = lower.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip() or None
    return lower.get("x-api-key") or None


def _request(model: type[R], tool: str, fields: dict[str, Any]) -> R:
    """The tool's typed request, or a tool error that names the invalid arguments (before
    any API call)."""
    try:
        return model.model_validate(fields)
    except ValidationError as exc:
        why = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ToolError(f"invalid {tool}: {why}") from None


def build_server(
    api_url: str,
    api_key: str | None = None,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
) -> MCPServer:
    """An MCP server whose tools call the API at `api_url` (`transport`: tests)."""
    server = MCPServer("ctxpipe", instructions=INSTRUCTIONS)

    def client(ctx: Context, who: dict[str, str | None]) -> AsyncCtxClient:
        headers: Mapping[str, str] | None
        try:
            headers = ctx.headers
        except ValueError:
            headers = None
        key = _key_from(headers) or api_key
        if not key:
            raise ToolError("401 unauthorized: no API key (Authorization: Bearer <key>)")
        return AsyncCtxClient(api_url, key, transport=transport, **who)  # type: ignore[arg-type]

    async def run(ctx: Context, who: dict[str, str | None], fn: Any) -> Any:
        async with client(ctx, who) as c:
            try:
                return await fn(c)
            except CtxApiError as exc:
                raise ToolError(str(exc)) from None

    @server.tool()
    async def find(
        query: str,
        ctx: Context,
        top_k: int = 10,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
        as_of: str | None = None,
    ) -> dict[str, Any]:
        """Hybrid find over the user's memories, the agent's and the user's sessions
        (`as_of` YYYY-MM-DD: profile and preference facts as they held on that date)."""
        who = {"user_id": user_id, "agent_id": agent_id, "session_id": session_id}
        req = _request(FindRequest, "find", {"query": query, "top_k": top_k, "as_of": as_of})
        res = await run(ctx, who, lambda c: c.find(req))
        hits = [h.model_dump(mode="json", include=_HIT) for h in res.hits]
        return {"query": query, "hits": hits}

    @server.tool()
    async def search(
        query: str,
        ctx: Context,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
        as_of: str | None = None,
    ) -> dict[str, Any]:
        """Intent analysis into typed queries, then hierarchical retrieval for each
        (`as_of` YYYY-MM-DD: facts as they held on that date)."""
        who = {"user_id": user_id, "agent_id": agent_id, "session_id": session_id}
        req = _request(SearchRequest, "search", {"query": query, "as_of": as_of})
        res = await run(ctx, who, lambda c: c.search(req))
        return {
            "query": query,
            "reasoning": res.reasoning,
            "hits": [h.model_dump(mode="json", include=_HIT) for h in res.hits],
        }

    @server.tool()
    async def build_context(
        query: str,
        ctx: Context,
        budget: int = 2000,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
        as_of: str | None = None,
    ) -> dict[str, Any]:
        """A prompt context of at most `budget` tokens for the query (incremental per
        session; `as_of` YYYY-MM-DD: facts as they held on that date)."""
        who = {"user_id": user_id, "agent_id": agent_id, "session_id": session_id}
        fields = {"query": query, "budget": budget, "as_of": as_of}
        req = _request(ContextRequest, "build_context", fields)
        res = await run(ctx, who, lambda c: c.build_context(req))
        return {"text": res.text, "total_tokens": res.total_tokens, "cited": res.cited_refs}

    @server.tool()
    async def read(
        uri: str,
        ctx: Context,
        level: int = 2,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
    ) -> dict[str, Any]:
        """One level of a node (0 = one line, 1 = overview, 2 = full content)."""
        who = {"user_id": user_id, "agent_id": agent_id, "session_id": session_id}
        text = await run(ctx, who, lambda c: c.read(uri, level))
        return {"uri": uri, "level": level, "text": text}

    @server.tool()
    async def commit_session(
        session_id: str,
        messages: list[dict[str, Any]],
        ctx: Context,
        commit_id: str | None = None,
        wait: bool = False,
        user_id: str | None = None,
        agent_id: str | None = None,
    ) -> dict[str, Any]:
        """Commit a session (messages: id, role, content[, created_at]) so its memories are
        extracted; `wait` returns once the commit finished."""
        who = {"user_id": user_id, "agent_id": agent_id, "session_id": session_id}

        async def go(c: AsyncCtxClient) -> dict[str, Any]:
            cid = await c.commit(messages, commit_id=commit_id)
            if not wait:
                return {"commit_id": cid, "phase": "enqueued"}
            st = await c.wait(cid)
            return {"commit_id": cid, "phase": st.phase, "status": st.status}

        return await run(ctx, who, go)

    @server.tool()
    async def add_messages(
        session_id: str,
        messages: list[dict[str, Any]],
        ctx: Context,
        close: bool = False,
        user_id: str | None = None,
        agent_id: str | None = None,
    ) -> dict[str, Any]:
        """Append messages (id, role, content[, created_at]) to an open session as the
        conversation goes; a message id already appended is ignored. Commits are cut by size,
        idle time or `close` (close when the conversation ends)."""
        who = {"user_id": user_id, "agent_id": agent_id, "session_id": session_id}
        res = await run(ctx, who, lambda c: c.add_messages(messages, close=close))
        return res.model_dump(mode="json")

    return server


_HIT = {"uri", "score", "context_type", "category", "text", "source_refs"}

__all__ = ["build_server"]
