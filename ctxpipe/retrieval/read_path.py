"""ReadPath: the read side wired from its parts (index replica, embedder, FS, LLM) — what the
service, the CLI and the benchmarks call. Every call takes a `RequestContext`: the account is
always applied and only the owner spaces the context may see are searched or read."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import date
from typing import Any, Protocol

from opentelemetry.trace import Span
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from ctxpipe.client.find_request import FindRequest
from ctxpipe.client.search_request import SearchRequest
from ctxpipe.core.caches import LockedCache
from ctxpipe.core.config import Settings, UnitContext
from ctxpipe.core.models import ContextNode, NodeStat, NodeSummary, RelationEdge
from ctxpipe.core.session import RequestContext
from ctxpipe.core.validity import parse_as_of
from ctxpipe.fs import ContextFS, FSRelationStore
from ctxpipe.fs.history import HistoryEntry
from ctxpipe.fs.session_owner import SessionOwners
from ctxpipe.observability.spans import memory_span, record_ids
from ctxpipe.providers.base import LLM, Embedder
from ctxpipe.retrieval.access import check_readable, owner_spaces, visible
from ctxpipe.retrieval.config import RetrievalConfig
from ctxpipe.retrieval.context.context_builder import ContextBuilder, ContextRequest, ContextResult
from ctxpipe.retrieval.context.snapshots import PgSnapshotStore, SnapshotStore
from ctxpipe.retrieval.find.hybrid_finder import HybridFinder
from ctxpipe.retrieval.find.recall_stats import RecallStatsStore
from ctxpipe.retrieval.graph import GraphNeighbour, traverse
from ctxpipe.retrieval.models import FindFilters, FindHit, FindResult, SearchResult, TagCount
from ctxpipe.retrieval.search.intent_analyzer import IntentAnalyzer
from ctxpipe.retrieval.search.search_engine import SearchEngine
from ctxpipe.retrieval.tokens import TokenCounter, counter_for_model
from ctxpipe.storage.db import Database
from ctxpipe.storage.queries import Queries

log = logging.getLogger(__name__)
TOP_K = "gen_ai.retrieval.top_k"


def _span(kind: str, ctx: RequestContext, query: str, **attrs: Any) -> AbstractContextManager[Span]:
    """The read's span: GenAI `search_memory` on the account's store, for who asks."""
    who = f"users/{ctx.user_id}"
    return memory_span(kind, ctx.account_id, owner=who, query=query, **attrs)


class ReadAdapters(Protocol):
    """What `ReadPath.from_runtime` builds on (read-only; the application's `Runtime` is one)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def db(self) -> Database: ...
    @property
    def embedder(self) -> Embedder: ...
    @property
    def fs(self) -> ContextFS: ...
    @property
    def llm(self) -> LLM: ...
    @property
    def relations(self) -> FSRelationStore: ...


class ReadPath:
    def __init__(
        self,
        db: Database,
        embedder: Embedder,
        fs: ContextFS,
        llm: LLM,
        *,
        schema: str = "ctx",
        config: RetrievalConfig | None = None,
        counter: TokenCounter | None = None,
        snapshots: SnapshotStore | None = None,
        relations: FSRelationStore | None = None,
        unit_context: UnitContext = "chunk",
    ) -> None:
        self.config = config or RetrievalConfig()
        self.db = db
        self.fs = fs
        self.schema = schema
        self.queries = Queries(schema)
        self.counter = counter or counter_for_model(embedder.model_name)
        self.recall_stats = RecallStatsStore(db, schema)
        self.finder = HybridFinder(
            db,
            embedder,
            self.counter,
            schema=schema,
            config=self.config.find,
            recall_stats=self.recall_stats,
            unit_context=unit_context,
        )
        self.intent = IntentAnalyzer(llm, self.config.intent)
        self.searcher = SearchEngine(self.finder, self.intent, self.config.hierarchical)
        self.builder = ContextBuilder(
            self.counter,
            finder=self.finder,
            fs=fs,
            intent=self.intent,
            config=self.config.context,
            snapshots=snapshots or PgSnapshotStore(db, schema),
            schema=schema,
        )
        self.relations = relations or FSRelationStore(fs)
        # the user's sessions (one query joining the replica): briefly stale is harmless
        self._sessions_cache: LockedCache[list[str]] = LockedCache.ttl(
            4096, self.config.find.count_cache_s
        )
        self.owners = SessionOwners(fs)

    @classmethod
    def from_runtime(cls, rt: ReadAdapters, config: RetrievalConfig | None = None) -> ReadPath:
        """The read path of `rt`; without `config`, the settings' (`CTXPIPE_RETRIEVAL__…`,
        `CTXPIPE_RETRIEVAL_PRESET`)."""
        return cls(
            rt.db,
            rt.embedder,
            rt.fs,
            rt.llm,
            schema=rt.settings.db_schema,
            config=config or rt.settings.retrieval,
            relations=rt.relations,
            unit_context=rt.settings.chunking.unit_context,
        )

    # ------------------------------------------------------------------ scope
    def user_sessions(self, ctx: RequestContext) -> list[str]:
        """Owner spaces of the sessions that belong to `ctx`'s user (cached briefly): those the
        index relates to the user, less any whose owner on the FS is another user."""
        key = (ctx.account_id, ctx.user_id)
        cached = self._sessions_cache.get(key)
        if cached is not None:
            return list(cached)
        with self.db.connection() as conn:
            rows = conn.execute(
                self.queries["retrieval_user_sessions"],
                {
                    "account": ctx.account_id,
                    "owner": Jsonb({"user_id": ctx.user_id}),
                    "space": ctx.user_space,
                },
            ).fetchall()
        found = sorted(
            str(r[0])
            for r in rows
            if self.owners.may_read(ctx, str(r[0]).split("/", 1)[1]) is not False
        )
        self._sessions_cache.put(key, found)
        return found

    def filters_for(
        self,
        ctx: RequestContext,
        *,
        scopes: Sequence[str] | None = None,
        categories: Sequence[str] | None = None,
        context_types: Sequence[str] | None = None,
        min_score: float = 0.0,
        tags: Sequence[str] | None = None,
        as_of: date | str | None = None,
    ) -> FindFilters:
        """The filters of a request: its account, the owner spaces it may see, and the
        caller's narrowing (URI prefixes, categories, context types, tags: nodes carrying
        every one of them; `as_of`: the facts valid on that date instead of now)."""
        prefixes = None
        if scopes:
            prefixes = []
            for s in scopes:
                u = check_readable(ctx, s, self._session_is_users(ctx))
                prefixes.append(str(u.as_dir()) if u.segments else str(u))
        spaces = self.spaces(ctx)
        return FindFilters(
            account_id=ctx.account_id,
            owner_spaces=spaces,
            uris=self._tagged(ctx, spaces, tags) if tags else None,
            uri_prefixes=prefixes,
            categories=list(categories) if categories else None,
            context_types=list(context_types) if context_types else None,
            min_score=min_score,
            as_of=parse_as_of(as_of),
        )

    def spaces(self, ctx: RequestContext) -> list[str]:
        """Every owner space `ctx` may read (its own session only if no one else owns it)."""
        current = self.owners.may_read(ctx, ctx.session_id) is not False
        return owner_spaces(ctx, self.user_sessions(ctx), current=current)

    def _tagged(self, ctx: RequestContext, spaces: list[str], tags: Sequence[str]) -> list[str]:
        wanted = sorted({t.strip().lower() for t in tags if t.strip()})
        with self.db.connection() as conn:
            rows = conn.execute(
                self.queries["tags_nodes"],
                {"account": ctx.account_id, "spaces": spaces, "tags": Jsonb(wanted)},
            ).fetchall()
        return [str(r[0]) for r in rows]

    def find_tags(self, ctx: RequestContext, prefix: str = "", limit: int = 50) -> list[TagCount]:
        """Tags used in what `ctx` may see that start with `prefix`, most used first."""
        like = prefix.strip().lower().replace("\\", "").replace("%", "").replace("_", "\\_")
        with self.db.connection() as conn:
            rows = conn.execute(
                self.queries["tags_by_prefix"],
                {
                    "account": ctx.account_id,
                    "spaces": self.spaces(ctx),
                    "prefix": like + "%",
                    "limit": limit,
                },
            ).fetchall()
        return [TagCount(tag=str(r[0]), nodes=int(r[1])) for r in rows]

    def _session_is_users(self, ctx: RequestContext) -> Any:
        """The session rule of `check_readable`: the FS owner decides; an unowned session is
        readable when it is `ctx`'s own or the index relates it to the user."""
        cache: dict[str, set[str]] = {}

        def check(session_id: str) -> bool:
            verdict = self.owners.may_read(ctx, session_id)
            if verdict is not None:
                return verdict
            if session_id == ctx.session_id:
                return True
            if "s" not in cache:
                cache["s"] = {s.split("/", 1)[1] for s in self.user_sessions(ctx)}
            return session_id in cache["s"]

        return check

    # ------------------------------------------------------------------ reads
    def find(
        self,
        request: FindRequest | str,
        ctx: RequestContext,
        top_k: int | None = None,
        **narrow: Any,
    ) -> FindResult:
        """Hybrid find of `request` within what `ctx` may see (a bare query with `top_k` and
        the `FindRequest` fields as keywords is made into one)."""
        req = as_find_request(request, top_k=top_k, **narrow)
        with _span("find", ctx, req.query, **{TOP_K: req.top_k}) as span:
            res = self._find(req, ctx)
            record_ids(span, [h.uri for h in res.hits])
        return res

    def _find(self, req: FindRequest, ctx: RequestContext) -> FindResult:
        filters = self.filters_for(
            ctx,
            scopes=req.scopes,
            categories=req.categories,
            context_types=req.context_types,
            min_score=req.min_score,
            tags=req.tags,
            as_of=req.as_of,
        )
        res = self.finder.find(req.query, filters, req.top_k, budget_tokens=req.budget_tokens)
        _scrub(res.groups, filters)
        return res

    def search(self, req: SearchRequest, ctx: RequestContext) -> SearchResult:
        """Intent analysis of the request's query with its recent messages, then hierarchical
        retrieval for each typed query, within what `ctx` may see."""
        with _span("search", ctx, req.query) as span:
            filters = self.filters_for(ctx, scopes=req.scopes, as_of=req.as_of)
            res = self.searcher.search(
                req.query, filters, recent=req.recent, ctx=ctx, agent_id=ctx.agent_id
            )
            _scrub(res.groups, filters)
            for q in res.queries:
                _scrub({"": q.hits}, filters)
            record_ids(span, [h.uri for h in res.hits])
            span.set_attribute("ctxpipe.typed_queries", len(res.queries))
        return res

    def build_context(self, req: ContextRequest, ctx: RequestContext) -> ContextResult:
        with _span("build_context", ctx, req.query) as span:
            res = self._build_context(req, ctx)
            uris = [i.uri for sec in res.sections for i in sec.items if i.uri]
            record_ids(span, list(dict.fromkeys(uris)))
            span.set_attributes(
                {"ctxpipe.budget": res.budget.total, "ctxpipe.tokens": res.total_tokens}
            )
        return res

    def _build_context(self, req: ContextRequest, ctx: RequestContext) -> ContextResult:
        filters = self.filters_for(ctx, as_of=req.as_of)
        res = self.builder.build(req, ctx, filters)
        sessions = _sessions(filters)
        for section in res.sections:
            for item in section.items:
                item.source_refs = [r for r in item.source_refs if _ref_visible(r, sessions)]
        res.cited_refs = [r for r in res.cited_refs if _ref_visible(r, sessions)]
        return res

    def read(self, uri: str, level: int, ctx: RequestContext) -> str:
        u = check_readable(ctx, uri, self._session_is_users(ctx))
        return self.fs.read_level(u, level, ctx)

    def node(self, uri: str, ctx: RequestContext) -> ContextNode:
        """The whole node at `uri` (levels, metadata, source refs of sessions `ctx` may read)."""
        u = check_readable(ctx, uri, self._session_is_users(ctx))
        node = self.fs.read_node(u, ctx=ctx)
        sessions = {s.split("/", 1)[1] for s in self.spaces(ctx) if s.startswith("sessions/")}
        node.source_refs = [r for r in node.source_refs if _ref_visible(r, sessions)]
        return node

    def stat(self, uri: str, ctx: RequestContext) -> NodeStat:
        u = check_readable(ctx, uri, self._session_is_users(ctx))
        return self.fs.stat_node(u, ctx)

    def ls(self, uri: str, ctx: RequestContext) -> list[NodeSummary]:
        return self._listing(uri, ctx, depth=1)

    def tree(self, uri: str, ctx: RequestContext, depth: int = 3) -> list[NodeSummary]:
        return self._listing(uri, ctx, depth=depth)

    def _listing(self, uri: str, ctx: RequestContext, depth: int) -> list[NodeSummary]:
        """Children of `uri`; at a scope root only the owners `ctx` may see are listed."""
        u = self.fs.parse(uri, ctx)
        if u.segments:
            check_readable(ctx, u, self._session_is_users(ctx))
            return self.fs.list_children(u, depth=depth, ctx=ctx)
        spaces = self.spaces(ctx)
        children = self.fs.list_children(u, depth=depth, ctx=ctx)
        return [c for c in children if visible(ctx, c.uri, spaces)]

    def relations_of(self, uri: str, ctx: RequestContext) -> list[RelationEdge]:
        """Edges of a node, without those pointing at data `ctx` may not see."""
        u = check_readable(ctx, uri, self._session_is_users(ctx))
        spaces = self.spaces(ctx)
        return [e for e in self.relations.get_edges(u, ctx) if visible(ctx, e.to_uri, spaces)]

    def history(self, uri: str, ctx: RequestContext) -> list[HistoryEntry]:
        """Every recorded change of a node `ctx` may read (source refs of sessions it may not
        read are left out)."""
        u = check_readable(ctx, uri, self._session_is_users(ctx))
        spaces = self.spaces(ctx)
        sessions = {s.split("/", 1)[1] for s in spaces if s.startswith("sessions/")}
        entries = self.fs.history(u, ctx)
        for e in entries:
            e.source_refs = [r for r in e.source_refs if _ref_visible(r, sessions)]
        return entries

    def graph(self, uri: str, ctx: RequestContext, depth: int = 1) -> list[GraphNeighbour]:
        """Nodes within `depth` relation hops of `uri` (`retrieval.graph.traverse`): outgoing
        edges from the FS, incoming ones from the replica, only through nodes `ctx` may see
        (the start node itself must be readable)."""
        u = check_readable(ctx, uri, self._session_is_users(ctx))
        spaces = self.spaces(ctx)

        def outgoing(node: str) -> list[RelationEdge]:
            return self.relations.get_edges(node, ctx)

        def incoming(nodes: list[str]) -> list[RelationEdge]:
            with self.db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
                rows = cur.execute(
                    self.queries["graph_incoming"], {"account_id": ctx.account_id, "uris": nodes}
                ).fetchall()
            return [RelationEdge.model_validate(r) for r in rows]

        def readable(other: str) -> bool:
            return visible(ctx, other, spaces)

        return traverse(str(u.node), depth, outgoing, incoming, visible=readable)


def _sessions(filters: FindFilters) -> set[str]:
    return {s.split("/", 1)[1] for s in filters.owner_spaces or () if s.startswith("sessions/")}


def _ref_visible(ref: str, sessions: set[str]) -> bool:
    session, sep, _ = ref.partition(":")
    return not sep or session in sessions


def _scrub(groups: dict[str, list[FindHit]], filters: FindFilters) -> None:
    """Drop cited message ids of sessions the request may not read (an agent's memory can be
    derived from several users' sessions: its text is the agent's, their turns are not)."""
    if filters.owner_spaces is None:
        return
    sessions = _sessions(filters)
    for hits in groups.values():
        for h in hits:
            h.source_refs = [r for r in h.source_refs if _ref_visible(r, sessions)]


def as_find_request(
    request: FindRequest | str, top_k: int | None = None, **fields: Any
) -> FindRequest:
    """`request` itself, or the `FindRequest` of a bare query, `top_k` and `fields`
    (ValueError, a pydantic ValidationError, when they are not a valid find)."""
    if isinstance(request, FindRequest):
        if top_k is not None or fields:
            changed = {**request.model_dump(), "top_k": top_k or request.top_k, **fields}
            return FindRequest.model_validate(changed)
        return request
    return FindRequest.model_validate({"query": request, "top_k": top_k, **fields})


__all__ = ["ReadPath", "as_find_request"]
