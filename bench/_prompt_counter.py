"""The configured LLM with its calls and prompt tokens counted per prompt id (bench/ingest_cost.py
counts what each phase of a commit asks of the LLM)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ctxpipe.core.session import RequestContext
from ctxpipe.providers.base import LLM, LLMUsage


class PromptCounter:
    """The configured LLM, with its calls and prompt tokens counted per prompt id."""

    def __init__(self, inner: LLM) -> None:
        self.inner = inner
        self.name = inner.name
        self.calls: Counter[str] = Counter()
        self.prompt_tokens: Counter[str] = Counter()

    async def complete_json(
        self,
        prompt_id: str,
        variables: dict[str, Any],
        schema: Any,
        ctx: RequestContext | None = None,
        usage: LLMUsage | None = None,
    ) -> Any:
        call = LLMUsage()
        try:
            return await self.inner.complete_json(prompt_id, variables, schema, ctx, call)
        finally:
            self._count(prompt_id, call, usage)

    def complete_json_sync(
        self,
        prompt_id: str,
        variables: dict[str, Any],
        schema: Any,
        ctx: RequestContext | None = None,
        usage: LLMUsage | None = None,
    ) -> Any:
        call = LLMUsage()
        try:
            return self.inner.complete_json_sync(prompt_id, variables, schema, ctx, call)
        finally:
            self._count(prompt_id, call, usage)

    def _count(self, prompt_id: str, call: LLMUsage, usage: LLMUsage | None) -> None:
        self.calls[prompt_id] += call.calls
        self.prompt_tokens[prompt_id] += call.prompt_tokens
        if usage is not None:
            usage.add(call)
