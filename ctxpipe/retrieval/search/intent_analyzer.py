"""Intent analysis (IntentAnalyzer): a query plus the recent conversation become 0-5
typed queries (memory / resource / skill) through the ``retrieval.intent_analysis`` prompt —
answered by the offline rules provider or any OpenAI-compatible LLM.

Constants: the last 5 messages, at most 5 queries, temperature 0 (the provider's setting).
An LLM failure never fails a search: the raw query becomes one memory query and the result
says so (``source = "fallback"``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from ctxpipe.core.errors import CtxError
from ctxpipe.core.llm_schemas import IntentOutput, TypedQuery
from ctxpipe.core.session import Message, RequestContext
from ctxpipe.providers.base import LLM
from ctxpipe.retrieval.config import IntentConfig

log = logging.getLogger(__name__)


class IntentResult(BaseModel):
    queries: list[TypedQuery] = Field(default_factory=list)
    reasoning: str = ""
    source: str = "llm"  # llm | fallback | none


def _message_vars(messages: Sequence[Message | dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        msg = m if isinstance(m, Message) else Message.model_validate(m)
        if msg.injected:
            continue  # recalled text is not what the user said
        out.append({"id": msg.id, "role": msg.role, "content": msg.content})
    return out


def normalise(queries: Sequence[TypedQuery], max_queries: int) -> list[TypedQuery]:
    """Priority order (1 first, stable), duplicates removed, at most `max_queries`."""
    seen: set[tuple[str, str]] = set()
    out: list[TypedQuery] = []
    for q in sorted(queries, key=lambda q: q.priority):
        key = (" ".join(q.query.lower().split()), q.context_type)
        if key in seen:
            continue
        seen.add(key)
        out.append(q)
        if len(out) >= max_queries:
            break
    return out


class IntentAnalyzer:
    def __init__(self, llm: LLM, config: IntentConfig | None = None) -> None:
        self.llm = llm
        self.config = config or IntentConfig()

    def _variables(self, query: str, recent: Sequence[Message | dict[str, Any]]) -> dict[str, Any]:
        n = self.config.recent_messages
        messages = _message_vars(recent)[-n:] if n else []
        return {"query": query, "recent_messages": messages, "max_queries": self.config.max_queries}

    def _fallback(self, query: str, why: str) -> IntentResult:
        if not self.config.fallback_to_query or not query.strip():
            return IntentResult(reasoning=why, source="none")
        return IntentResult(
            queries=[TypedQuery(query=query.strip(), context_type="memory", priority=1)],
            reasoning=why,
            source="fallback",
        )

    async def analyze(
        self,
        query: str,
        recent: Sequence[Message | dict[str, Any]] = (),
        ctx: RequestContext | None = None,
    ) -> IntentResult:
        """The same analysis off the event loop (the LLM's sync call may block)."""
        return await asyncio.to_thread(self.analyze_sync, query, recent, ctx)

    def analyze_sync(
        self,
        query: str,
        recent: Sequence[Message | dict[str, Any]] = (),
        ctx: RequestContext | None = None,
    ) -> IntentResult:
        if self.config.max_queries == 0:
            return self._fallback(query, "intent analysis disabled (max_queries=0)")
        try:
            out = self.llm.complete_json_sync(
                "retrieval.intent_analysis", self._variables(query, recent), IntentOutput, ctx=ctx
            )
        except (CtxError, ValueError) as exc:
            log.warning("intent analysis failed, searching the raw query: %s", exc)
            return self._fallback(query, f"intent analysis failed: {exc}")
        return IntentResult(
            queries=normalise(out.queries, self.config.max_queries),
            reasoning=out.reasoning,
            source="llm",
        )


__all__ = ["IntentAnalyzer", "IntentResult", "normalise"]
