"""ContextEngineService: the one facade producers and agents use.

Commits go through a `CommitDispatcher` port: the inline dispatcher runs the pipeline in this
process; the Celery dispatcher (in `tasks/`) enqueues the workflow on the broker.
"""

from __future__ import annotations

import asyncio
import time
from datetime import date, datetime
from functools import cached_property
from typing import Any, Protocol, TypedDict, Unpack

from pydantic import BaseModel, Field

from ctxpipe.client.context_request import ContextRequest, context_request
from ctxpipe.client.find_request import FindRequest, find_request
from ctxpipe.client.search_request import SearchRequest, search_request
from ctxpipe.client.session_models import SessionAppended
from ctxpipe.commit.coordinator import CommitCoordinator
from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.errors import CommitError, CtxError
from ctxpipe.core.models import (
    CommitOptions,
    CommitResult,
    ContextNode,
    NodeStat,
    NodeSummary,
    RelationEdge,
    utcnow,
)
from ctxpipe.core.session import Message, RequestContext, SessionInput, ToolUse
from ctxpipe.fs.history import HistoryEntry
from ctxpipe.observability.spans import phase_span
from ctxpipe.retrieval import ContextResult, FindResult, ReadPath, SearchResult
from ctxpipe.retrieval.graph import GraphNeighbour
from ctxpipe.retrieval.models import TagCount
from ctxpipe.runtime import Runtime
from ctxpipe.sessions.open_sessions import OpenSessions
from ctxpipe.storage.commit_list import CommitSummary


class CommitView(BaseModel):
    """What a producer can learn about a commit it submitted."""

    commit_id: str
    account_id: str = ""
    user_id: str = ""
    agent_id: str = ""
    session_id: str = ""
    phase: str
    status: str | None = None
    extractors: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None
    error_phase: str | None = None
    result: CommitResult | None = None
    # milliseconds by phase ("archive_ms", ...), as the ledger records them ({} in process)
    timings: dict[str, int | float] = Field(default_factory=dict)
    created_at: datetime | None = None
    updated_at: datetime | None = None

    @property
    def finished(self) -> bool:
        return self.result is not None or self.phase == "failed"

    def summary(self) -> CommitSummary:
        """This commit as a commit list shows it."""
        return CommitSummary(
            **self.model_dump(exclude={"result"}),
            stats=self.result.stats if self.result is not None else None,
        )


class CommitNotFoundError(CtxError, KeyError):
    def __init__(self, commit_id: str) -> None:
        super().__init__(f"no such commit: {commit_id}")


class CommitDispatcher(Protocol):
    def submit(self, req: CommitRequest) -> str: ...

    def get(self, commit_id: str) -> CommitView: ...

    def recent(
        self, account_id: str, user_id: str | None, agent_id: str | None, limit: int
    ) -> list[CommitSummary]:
        """The latest commits of an account (of a user and/or agent when given)."""
        ...


class InlineDispatcher:
    """Runs each commit to completion in the calling process."""

    def __init__(self, coordinator: CommitCoordinator) -> None:
        self._coordinator = coordinator
        self._views: dict[str, CommitView] = {}

    def submit(self, req: CommitRequest) -> str:
        with phase_span("submit", req.commit_id):
            return self._submit(req)

    def _submit(self, req: CommitRequest) -> str:
        who = req.ctx.model_dump(include={"account_id", "user_id", "agent_id", "session_id"})
        known = self._views.get(req.commit_id)
        if known is not None:
            # a commit id is an idempotency key, as in the ledger of the Celery dispatcher
            mine = known.model_dump(include={"account_id", "user_id", "agent_id", "session_id"})
            if mine != who:
                from ctxpipe.commit.steps import CommitIdConflictError

                raise CommitIdConflictError(req.commit_id)
            if known.phase != "failed":
                return req.commit_id
        self._views.pop(req.commit_id, None)  # a failed commit runs again, as the latest
        started = utcnow()
        try:
            result = self._coordinator.commit_sync(req)
            self._views[req.commit_id] = CommitView(
                **who,
                commit_id=req.commit_id,
                phase="registered",
                status=result.status.value,
                result=result,
                created_at=started,
                updated_at=utcnow(),
            )
        except CommitError as exc:
            self._views[req.commit_id] = CommitView(
                **who,
                commit_id=req.commit_id,
                phase="failed",
                status="failed",
                error=str(exc),
                error_phase=exc.phase,
                created_at=started,
                updated_at=utcnow(),
            )
        return req.commit_id

    def get(self, commit_id: str) -> CommitView:
        try:
            return self._views[commit_id]
        except KeyError:
            raise CommitNotFoundError(commit_id) from None

    def recent(
        self, account_id: str, user_id: str | None, agent_id: str | None, limit: int
    ) -> list[CommitSummary]:
        mine = [
            v
            for v in self._views.values()
            if v.account_id == account_id
            and user_id in (None, v.user_id)
            and agent_id in (None, v.agent_id)
        ]
        return [v.summary() for v in reversed(mine)][:limit]  # submitted last, first


class CommitExtras(TypedDict, total=False):
    """What a commit carries besides its session and messages (see `CommitRequest`)."""

    used_contexts: list[str] | None
    used_tools: list[ToolUse] | list[dict] | None
    options: CommitOptions | None
    commit_id: str | None


class ContextEngineService:
    def __init__(self, runtime: Runtime, dispatcher: CommitDispatcher | None = None) -> None:
        self.runtime = runtime
        self.coordinator = CommitCoordinator(runtime.components())
        self.dispatcher: CommitDispatcher = dispatcher or InlineDispatcher(self.coordinator)

    # -------------------------------------------------------------- write path
    @staticmethod
    def build_request(
        ctx: RequestContext,
        messages: list[Message] | list[dict],
        used_contexts: list[str] | None = None,
        used_tools: list[ToolUse] | list[dict] | None = None,
        options: CommitOptions | None = None,
        commit_id: str | None = None,
    ) -> CommitRequest:
        data: dict = {
            "ctx": ctx,
            "messages": messages,
            "used_contexts": used_contexts or [],
            "used_tools": used_tools or [],
            "options": options or CommitOptions(),
        }
        if commit_id:
            data["commit_id"] = commit_id
        return CommitRequest.model_validate(data)

    async def commit_session_async(self, req: CommitRequest) -> CommitResult:
        """Run the whole pipeline in this process and return its result."""
        return await self.coordinator.commit(req)

    def commit_session_sync(
        self,
        ctx: RequestContext,
        messages: list[Message] | list[dict],
        **extra: Unpack[CommitExtras],
    ) -> CommitResult:
        """Run the whole pipeline in this process (blocking) and return its result."""
        req = self.build_request(ctx, messages, **extra)
        return asyncio.run(self.commit_session_async(req))

    def commit_session(
        self,
        ctx: RequestContext,
        messages: list[Message] | list[dict],
        **extra: Unpack[CommitExtras],
    ) -> str:
        """Submit a commit through the dispatcher; returns its commit id."""
        req = self.build_request(ctx, messages, **extra)
        return self.dispatcher.submit(req)

    def submit(self, session: SessionInput, options: CommitOptions | None = None) -> str:
        return self.dispatcher.submit(CommitRequest.from_session(session, options))

    def get_commit(self, commit_id: str) -> CommitView:
        return self.dispatcher.get(commit_id)

    def recent_commits(
        self,
        account_id: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        limit: int = 50,
    ) -> list[CommitSummary]:
        """The latest `limit` commits of an account (only a user's and/or an agent's when
        given), newest first."""
        return self.dispatcher.recent(account_id, user_id, agent_id, limit)

    def wait_commit(
        self, commit_id: str, timeout: float = 60.0, poll_s: float = 0.05
    ) -> CommitView:
        deadline = time.monotonic() + timeout
        while True:
            view = self.dispatcher.get(commit_id)
            if view.finished:
                return view
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"commit {commit_id} not finished after {timeout:.0f}s (phase {view.phase})"
                )
            time.sleep(poll_s)

    # -------------------------------------------------------------- open sessions
    @cached_property
    def open_sessions(self) -> OpenSessions:
        """Open sessions (built on first use), whose cuts go through this service's dispatcher."""
        from ctxpipe.sessions.wiring import make_open_sessions

        rt = self.runtime
        db = rt.db if rt.use_database else None
        return make_open_sessions(rt.settings, db, rt.fs, self.dispatcher.submit)

    def add_messages(
        self, ctx: RequestContext, messages: list[Message] | list[dict], *, close: bool = False
    ) -> SessionAppended:
        """Append messages to `ctx`'s open session (idempotent by message id); commits are cut
        by size, idle time or `close` and submitted like any commit."""
        msgs = [m if isinstance(m, Message) else Message.model_validate(m) for m in messages]
        return self.open_sessions.append(ctx, msgs, close=close)

    def close_session(self, ctx: RequestContext) -> SessionAppended:
        """Commit what is still open of `ctx`'s session now."""
        return self.open_sessions.close(ctx)

    def close(self) -> None:
        rp = self.__dict__.get("read_path")  # only when it was built
        if rp is not None:
            rp.recall_stats.flush()  # recalls are recorded in the background
        closer = getattr(self.dispatcher, "close", None)
        if closer is not None:
            closer()
        self.runtime.close()

    # -------------------------------------------------------------- read path
    @cached_property
    def read_path(self) -> ReadPath:
        """The read side (built on first use: it needs the index replica and the model)."""
        return ReadPath.from_runtime(self.runtime)

    def find(
        self,
        query: str | FindRequest,
        ctx: RequestContext,
        top_k: int | None = None,
        *,
        scopes: list[str] | None = None,
        categories: list[str] | None = None,
        context_types: list[str] | None = None,
        min_score: float = 0.0,
        tags: list[str] | None = None,
        budget_tokens: int | None = None,
        as_of: date | str | None = None,
    ) -> FindResult:
        """Hybrid find within what `ctx` may see, grouped by context type (`tags`: only
        nodes that carry every one of them; `budget_tokens`: no more hits than fit in it;
        `as_of`: profile and preference facts valid on that date instead of now). `query`
        may be a whole `FindRequest` (the keywords are then not used)."""
        req = find_request(
            query,
            top_k,
            as_of,
            budget_tokens=budget_tokens,
            scopes=scopes,
            categories=categories,
            context_types=context_types,
            min_score=min_score,
            tags=tags,
        )
        return self.read_path.find(req, ctx)

    def find_tags(self, ctx: RequestContext, prefix: str = "", limit: int = 50) -> list[TagCount]:
        """Tags in use (what `ctx` may see) starting with `prefix`, most used first."""
        return self.read_path.find_tags(ctx, prefix, limit)

    def search(
        self,
        query: str | SearchRequest,
        ctx: RequestContext,
        recent: list[Message] | list[dict[str, Any]] | None = None,
        *,
        scopes: list[str] | None = None,
        as_of: date | str | None = None,
    ) -> SearchResult:
        """Intent analysis + hierarchical retrieval (the trajectory is in the result). `query`
        may be a whole `SearchRequest` (the other arguments are then not used)."""
        return self.read_path.search(search_request(query, recent, scopes, as_of), ctx)

    def build_context(
        self,
        query: str | ContextRequest,
        ctx: RequestContext,
        messages: list[Message] | list[dict[str, Any]] | None = None,
        budget: int | None = None,
        profile: str = "default",
        *,
        system_prompt: str = "",
        incremental: bool = True,
        as_of: date | str | None = None,
    ) -> ContextResult:
        """A prompt context of at most `budget` tokens (incremental per session; `as_of`:
        profile and preference facts valid on that date instead of now). `query` may be a
        whole `ContextRequest` (the other arguments are then not used)."""
        req = context_request(query, messages, budget, profile, system_prompt, incremental, as_of)
        return self.read_path.build_context(req, ctx)

    def read(self, uri: str, ctx: RequestContext, level: int = 2) -> str:
        return self.read_path.read(uri, level, ctx)

    def ls(self, uri: str, ctx: RequestContext) -> list[NodeSummary]:
        return self.read_path.ls(uri, ctx)

    def tree(self, uri: str, ctx: RequestContext, depth: int = 3) -> list[NodeSummary]:
        return self.read_path.tree(uri, ctx, depth)

    def stat(self, uri: str, ctx: RequestContext) -> NodeStat:
        return self.read_path.stat(uri, ctx)

    def node(self, uri: str, ctx: RequestContext) -> ContextNode:
        """A node `ctx` may read, whole: its levels, metadata (tags, category, validity of
        its facts), source refs, version and timestamps."""
        return self.read_path.node(uri, ctx)

    def relations(self, uri: str, ctx: RequestContext) -> list[RelationEdge]:
        return self.read_path.relations_of(uri, ctx)

    def history(self, uri: str, ctx: RequestContext) -> list[HistoryEntry]:
        """Every recorded change of a node: version, action, commit, source messages, diff."""
        return self.read_path.history(uri, ctx)

    def graph(self, uri: str, ctx: RequestContext, depth: int = 1) -> list[GraphNeighbour]:
        """Nodes within `depth` relation hops (both directions), scored 1/(1+distance)."""
        return self.read_path.graph(uri, ctx, depth)

    # -------------------------------------------------------------- removal
    def remove(self, uri: str, ctx: RequestContext) -> bool:
        """Remove one memory of `ctx`'s own user (FS + index); False when it did not exist."""
        from ctxpipe.maintenance.removal import remove_memory

        return remove_memory(self.runtime, uri, ctx)
