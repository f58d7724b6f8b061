"""`AsyncCtxClient`: the asyncio client of the ctxpipe API (httpx)."""

from __future__ import annotations

import asyncio
import time
from datetime import date
from typing import Any

import httpx

from ctxpipe.client import _calls as calls
from ctxpipe.client._base import CommitFailedError, CtxApiError, Defaults, headers, raise_for
from ctxpipe.client.context_request import ContextRequest, context_request
from ctxpipe.client.find_request import FindRequest, find_request
from ctxpipe.client.models import ApiKey, CommitStatus
from ctxpipe.client.results import ContextResult, FindResult, SearchResult
from ctxpipe.client.search_request import SearchRequest, search_request
from ctxpipe.client.session_models import SessionAppended
from ctxpipe.core.models import CommitOptions, NodeStat, NodeSummary, RelationEdge
from ctxpipe.core.session import Message

Msgs = list[Message] | list[dict[str, Any]]


class AsyncCtxClient:
    """``AsyncCtxClient(url, api_key, user_id=…)``: commit, wait, find, search, build_context, read.

    `user_id`/`agent_id`/`session_id` are defaults each call may override (a key bound to a
    user or agent fixes those)."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.defaults = Defaults(user_id, agent_id, session_id)
        self._http = httpx.AsyncClient(
            base_url=base_url, headers=headers(api_key), timeout=timeout, transport=transport
        )

    async def __aenter__(self) -> AsyncCtxClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the HTTP connection pool (the `with` block does it)."""
        await self._http.aclose()

    async def _run(self, call: calls.Call) -> Any:
        try:
            resp = await self._http.request(
                call.method, call.path, params=call.params, json=call.body
            )
        except httpx.HTTPError as exc:
            raise CtxApiError(0, "unreachable", f"{type(exc).__name__}: {exc}") from exc
        raise_for(resp)
        return call.parse(resp.json())

    async def whoami(self) -> ApiKey:
        """The key's account, bound user or agent, and scopes."""
        return await self._run(calls.whoami())

    # ------------------------------------------------------------------ commits
    async def commit(
        self,
        messages: Msgs,
        *,
        session_id: str | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        commit_id: str | None = None,
        used_contexts: list[str] | None = None,
        used_tools: list[dict[str, Any]] | None = None,
        options: CommitOptions | None = None,
    ) -> str:
        """Submit a session; returns its commit id at once (the commit runs on the workers)."""
        who = self.defaults.who(user_id, agent_id, session_id)
        return await self._run(
            calls.commit(
                who,
                messages,
                commit_id=commit_id,
                used_contexts=used_contexts,
                used_tools=used_tools,
                options=options,
            )
        )

    async def add_messages(
        self,
        messages: Msgs,
        *,
        session_id: str | None = None,
        close: bool = False,
        user_id: str | None = None,
        agent_id: str | None = None,
    ) -> SessionAppended:
        """Append messages to an open session (a message id it holds is not appended again);
        the server cuts commits by size, idle time or `close` (`commit_ids` of the result)."""
        who = self.defaults.who(user_id, agent_id, session_id)
        return await self._run(calls.add_messages(who, messages, close))

    async def close_session(
        self,
        session_id: str | None = None,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
    ) -> SessionAppended:
        """Commit what is still open of an open session now."""
        who = self.defaults.who(user_id, agent_id, session_id)
        return await self._run(calls.close_session(who))

    async def get_commit(self, commit_id: str) -> CommitStatus:
        """The commit's status: phase, per-extractor status, error, and its result once finished."""
        return await self._run(calls.get_commit(commit_id))

    async def wait(
        self, commit_id: str, timeout: float = 120.0, poll_s: float = 0.2
    ) -> CommitStatus:
        """Poll until the commit finished; `CommitFailedError` if it failed."""
        deadline = time.monotonic() + timeout
        while True:
            st = await self.get_commit(commit_id)
            if st.finished:
                if st.result is None:
                    raise CommitFailedError(st)
                return st
            if time.monotonic() >= deadline:
                raise TimeoutError(f"commit {commit_id} not finished after {timeout:.0f}s")
            await asyncio.sleep(poll_s)

    # ---------------------------------------------------------------- read path
    async def find(
        self,
        query: str | FindRequest,
        top_k: int | None = 10,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
        as_of: date | str | None = None,
        **filters: Any,
    ) -> FindResult:
        """`filters`: scopes, categories, context_types, min_score, tags; `as_of`: profile
        and preference facts valid on that date (a date or YYYY-MM-DD) instead of now;
        `query` may be a whole `FindRequest` (the other arguments are then not used)."""
        who = self.defaults.who(user_id, agent_id, session_id)
        return await self._run(calls.find(who, find_request(query, top_k, as_of, **filters)))

    async def search(
        self,
        query: str | SearchRequest,
        recent: Msgs | None = None,
        *,
        scopes: list[str] | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
        as_of: date | str | None = None,
    ) -> SearchResult:
        """Intent analysis of `query` with the `recent` messages into typed queries, then a
        hierarchical drill-down for each; `as_of`: facts valid on that date instead of now;
        `query` may be a whole `SearchRequest` (the other arguments are then not used)."""
        who = self.defaults.who(user_id, agent_id, session_id)
        req = search_request(query, recent, scopes, as_of)
        return await self._run(calls.search(who, req))

    async def build_context(
        self,
        query: str | ContextRequest,
        messages: Msgs | None = None,
        budget: int | None = None,
        profile: str = "default",
        *,
        system_prompt: str = "",
        incremental: bool = True,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
        as_of: date | str | None = None,
    ) -> ContextResult:
        """A prompt context of at most `budget` tokens for `query` and the conversation
        `messages` (incremental per session); `as_of`: profile and preference facts valid on
        that date instead of now; `query` may be a whole `ContextRequest` (the other
        arguments are then not used)."""
        who = self.defaults.who(user_id, agent_id, session_id)
        req = context_request(query, messages, budget, profile, system_prompt, incremental, as_of)
        return await self._run(calls.build_context(who, req))

    async def read(self, uri: str, level: int = 2, **who: str) -> str:
        """One level of a node: 0 = its abstract (L0), 1 = overview (L1), 2 = content (L2)."""
        return await self._run(calls.read(self._who(who), uri, level))

    async def ls(self, uri: str, **who: str) -> list[NodeSummary]:
        """The children of a directory URI the acting identity may see."""
        return await self._run(calls.ls(self._who(who), uri))

    async def tree(self, uri: str, depth: int = 3, **who: str) -> list[NodeSummary]:
        """The nodes below a URI, `depth` levels down, in pre-order."""
        return await self._run(calls.tree(self._who(who), uri, depth))

    async def stat(self, uri: str, **who: str) -> NodeStat:
        """Version, size, content hash, category and update time of a node."""
        return await self._run(calls.stat(self._who(who), uri))

    async def relations(self, uri: str, **who: str) -> list[RelationEdge]:
        """A node's relation edges (edges to data the identity may not see are left out)."""
        return await self._run(calls.relations(self._who(who), uri))

    async def remove(self, uri: str, **who: str) -> bool:
        """Remove one memory of the acting user; False when it did not exist."""
        return await self._run(calls.remove(self._who(who), uri))

    def _who(self, who: dict[str, str]) -> dict[str, str]:
        return self.defaults.who(who.get("user_id"), who.get("agent_id"), who.get("session_id"))
