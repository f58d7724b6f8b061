"""TracedLLM: any `LLM` with a span per call, in the OpenTelemetry GenAI conventions
(`chat {model}`: `gen_ai.operation.name`, `gen_ai.provider.name`, `gen_ai.request.model`, the
call's token usage). A no-op wrapper until tracing is set up (`observability.tracing`)."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

from ctxpipe.core.models import LLMUsage
from ctxpipe.core.session import RequestContext
from ctxpipe.observability.spans import llm_span, llm_usage
from ctxpipe.providers.base import LLM, run_sync

T = TypeVar("T", bound=BaseModel)


class TracedLLM:
    def __init__(self, inner: LLM, *, provider: str, model: str) -> None:
        self.inner = inner
        self.name = inner.name
        self.provider = provider
        self.model = model

    async def complete_json(
        self,
        prompt_id: str,
        variables: dict[str, Any],
        schema: type[T],
        ctx: RequestContext | None = None,
        usage: LLMUsage | None = None,
    ) -> T:
        call = LLMUsage()
        with llm_span(self.provider, self.model, prompt_id) as span:
            try:
                return await self.inner.complete_json(prompt_id, variables, schema, ctx, call)
            finally:
                llm_usage(span, call.prompt_tokens, call.completion_tokens)
                if usage is not None:
                    usage.add(call)

    def complete_json_sync(
        self,
        prompt_id: str,
        variables: dict[str, Any],
        schema: type[T],
        ctx: RequestContext | None = None,
        usage: LLMUsage | None = None,
    ) -> T:
        result: T = run_sync(self.complete_json(prompt_id, variables, schema, ctx, usage))
        return result


__all__ = ["TracedLLM"]
