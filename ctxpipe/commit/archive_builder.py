"""ArchiveBuilder: phase 1 summarises the session (no writes); phase 4 persists the archive
node under ``ctx://{account}/sessions/{session_id}/archives/{n}``."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from ctxpipe.commit.big_messages import reading_window
from ctxpipe.commit.components import CommitComponents
from ctxpipe.commit.payloads import CommitRequest, SessionExtraction
from ctxpipe.core.config import ArchiveConfig
from ctxpipe.core.enums import ContextType
from ctxpipe.core.errors import LLMError, NodeNotFoundError
from ctxpipe.core.llm_schemas import SessionDigest
from ctxpipe.core.models import ArchiveSummary, ContextNode, SessionArchive, SessionStats
from ctxpipe.core.session import message_vars
from ctxpipe.core.uri import CtxURI
from ctxpipe.extraction.base import prompt_vars
from ctxpipe.extraction.extractors import EXTRACTORS
from ctxpipe.fs.history import NodeChange
from ctxpipe.providers.base import LLMUsage

log = logging.getLogger(__name__)


def archives_dir(req: CommitRequest) -> CtxURI:
    return CtxURI.parse(f"ctx://{req.ctx.account_id}/sessions/{req.ctx.session_id}/archives/")


def session_lock_key(req: CommitRequest) -> str:
    return f"{req.ctx.account_id}/sessions/{req.ctx.session_id}"


class ArchiveBuilder:
    def __init__(self, components: CommitComponents, config: ArchiveConfig | None = None) -> None:
        self._c = components
        self._config = config or components.settings.archive

    def _existing_for_commit(
        self, req: CommitRequest, current: SessionArchive
    ) -> SessionArchive | None:
        """The archive this commit already wrote (redelivery), if any."""
        for node in self._archives(req):
            meta = node.metadata
            if meta.get("commit_id") == req.commit_id and meta.get("user_id") == req.ctx.user_id:
                stored = SessionArchive.model_validate(meta["archive"])
                return stored.model_copy(
                    update={
                        "recent_messages": current.recent_messages,
                        "used_contexts": current.used_contexts,
                        "used_tools": current.used_tools,
                    }
                )
        return None

    def _next_index(self, req: CommitRequest) -> int:
        numbers = [int(n.uri.rstrip("/").rsplit("/", 1)[-1]) for n in self._archives(req)]
        return max(numbers, default=0) + 1

    def _archives(self, req: CommitRequest) -> list[ContextNode]:
        """The session's archive nodes. A directory a killed first write left without a node
        (its staged files never committed) is not one: its number is taken again, and the
        write there finishes the repair."""
        base = archives_dir(req)
        fs = self._c.fs
        if not fs.exists(base):
            return []
        out: list[ContextNode] = []
        for child in fs.list_children(base):
            if not child.name.isdigit():
                continue
            try:
                out.append(fs.read_node(child.uri))
            except NodeNotFoundError:
                continue
        return out

    async def build_archive(
        self, req: CommitRequest, usage: LLMUsage
    ) -> tuple[SessionArchive, SessionExtraction | None]:
        """The session's archive (its summary from the LLM, unless it is skipped or this
        commit wrote it already) and, with `commit.extraction_calls = session`, the memories
        of every extractor with something to ask, from the same one call."""
        recent = [m for m in req.messages if not m.injected][-self._config.max_recent_messages :]
        stats = SessionStats(
            total_turns=sum(1 for m in req.messages if m.role == "user"),
            total_tokens=sum(len(m.content.split()) for m in req.messages),
            compression_count=max(0, len(req.messages) - len(recent)),
        )
        base = SessionArchive(
            session_id=req.ctx.session_id,
            recent_messages=recent,
            used_contexts=req.used_contexts,
            used_tools=req.used_tools,
            stats=stats,
        )
        cfg = self._c.settings.commit
        archive: SessionArchive | None = None  # None: it needs its summary
        if req.options.skip_archive:
            archive = base.model_copy(update={"skipped_reason": "skip_archive option"})
        elif cfg.skip_archive_on_short_session and len(recent) < cfg.short_session_threshold:
            archive = base.model_copy(
                update={
                    "skipped_reason": f"short session: {len(recent)} messages "
                    f"< threshold {cfg.short_session_threshold}"
                }
            )
        elif not (req.options.dry_run or cfg.dry_run):
            archive = self._existing_for_commit(req, base)
        extraction = None
        if cfg.extraction_calls == "session":
            digest, extraction = await self._session_call(req, usage)
            if archive is None and digest is not None:
                archive = _summarised(base, digest)
        if archive is None:
            summary = await self._c.llm.complete_json(
                "compression.archive_summary",
                {
                    # a long message is read in part (its first CTXPIPE_LIMITS__MAX_MESSAGE_CHARS)
                    "messages": message_vars(
                        reading_window(recent, self._c.settings.limits.max_message_chars)
                    ),
                    "tools": [t.model_dump() for t in req.used_tools],
                    "session_id": req.ctx.session_id,
                    "max_tokens": self._config.summary_max_tokens,
                },
                ArchiveSummary,
                ctx=req.ctx,
                usage=usage,
            )
            archive = _summarised(base, summary)
        return archive, extraction

    async def _session_call(
        self, req: CommitRequest, usage: LLMUsage
    ) -> tuple[SessionDigest | None, SessionExtraction | None]:
        """`extraction.session` for the extractors with something to ask (their gates and the
        commit's categories filter decide, without the LLM), when there is one. An answer
        the provider cannot give (not a transient error) leaves each extractor to its own
        call and the summary to its own."""
        window = reading_window(req.messages, self._c.settings.limits.max_message_chars)
        own = [m for m in window if not m.injected]
        tools, cats = req.used_tools, req.options.categories_filter
        asked = [n for n, e in EXTRACTORS.items() if e.no_call(own, tools, cats) is None]
        if not asked:
            return None, None
        variables = {
            **prompt_vars(own, tools, req.ctx),
            "session_id": req.ctx.session_id,
            "max_tokens": self._config.summary_max_tokens,
            "extractors": asked,
        }
        try:
            digest = await self._c.llm.complete_json(
                "extraction.session", variables, SessionDigest, ctx=req.ctx, usage=usage
            )
        except LLMError as exc:
            if exc.transient:
                raise
            log.warning("extraction.session failed, one call per extractor instead: %s", exc)
            return None, None
        return digest, SessionExtraction(asked=asked, memories=digest.memories)

    def persist(
        self,
        req: CommitRequest,
        archive: SessionArchive,
        guard: Callable[[], None] | None = None,
    ) -> SessionArchive:
        """Phase 4: write the archive node (the commit point), once per commit id.

        The archive index is allocated here, under the session lock, so two commits of one
        session never race for the same number, and a re-run finds its own archive again."""
        if archive.skipped_reason or not self._config.persist_archive or not archive.summary:
            return archive
        with self._c.lock.hold(session_lock_key(req), self._c.settings.lock_timeout_s):
            if guard is not None:
                guard()
            previous = self._existing_for_commit(req, archive)
            if previous is not None:
                return previous
            uri = archives_dir(req).join(str(self._next_index(req)))
            archive = archive.model_copy(update={"archive_uri": str(uri.node), "persisted": True})
            self._c.fs.write_node(
                self._archive_node(req, archive),
                expected_version=0,
                change=NodeChange(action="create", commit_id=req.commit_id, reason="archive"),
            )
        return archive

    def _archive_node(self, req: CommitRequest, archive: SessionArchive) -> ContextNode:
        assert archive.archive_uri is not None
        overview_lines = [f"Session {archive.session_id} archive", ""]
        for title, items in (
            ("Key topics", archive.key_topics),
            ("Decisions", archive.key_decisions),
            ("Unresolved", archive.unresolved),
        ):
            if items:
                overview_lines.append(f"## {title}")
                overview_lines.extend(f"- {x}" for x in items)
                overview_lines.append("")
        content = "\n".join(
            f"[{m.id}] {m.role}{f' ({m.name})' if m.name else ''}"
            f"{spoken_on(m.created_at)}: {m.content}"
            for m in archive.recent_messages
        )
        uri = CtxURI.parse(archive.archive_uri)
        return ContextNode(
            uri=archive.archive_uri,
            parent_uri=str(uri.parent.node),
            context_type=ContextType.SESSION,
            category="archive",
            owner_space=f"sessions/{req.ctx.session_id}",
            abstract=archive.summary or f"Session {archive.session_id}",
            overview="\n".join(overview_lines).strip(),
            content=content,
            source_refs=[f"{req.ctx.session_id}:{m.id}" for m in archive.recent_messages],
            metadata={
                "commit_id": req.commit_id,
                "user_id": req.ctx.user_id,
                "agent_id": req.ctx.agent_id,
                "message_ids": [m.id for m in archive.recent_messages],
                "archive": archive.model_dump(
                    mode="json", exclude={"recent_messages", "used_contexts", "used_tools"}
                ),
            },
        )


def spoken_on(when: datetime | None) -> str:
    """` on 8 May 2023` — a turn's date as read back with it (a hit of an archive line says
    when it was said), or nothing for a message without a time."""
    return f" on {when.day} {when:%B %Y}" if when is not None else ""


def _summarised(base: SessionArchive, summary: ArchiveSummary) -> SessionArchive:
    return base.model_copy(
        update={
            "summary": summary.summary,
            "key_topics": summary.key_topics,
            "key_decisions": summary.key_decisions,
            "unresolved": summary.unresolved,
        }
    )
