"""LatencyLLM: wraps an LLM and adds a fixed delay per call.

Used to simulate a remote model with the offline provider (benchmarks and demos show that the
four extractors really run in parallel); `CTXPIPE_LLM_SIMULATED_LATENCY_S` turns it on.
"""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar

from pydantic import BaseModel

from ctxpipe.core.session import RequestContext
from ctxpipe.providers.base import LLM, LLMUsage, run_sync

T = TypeVar("T", bound=BaseModel)


class LatencyLLM:
    def __init__(self, inner: LLM, delay_s: float) -> None:
        self.inner = inner
        self.delay_s = delay_s
        self.name = f"{inner.name}+{delay_s:g}s"

    async def complete_json(
        self,
        prompt_id: str,
        variables: dict[str, Any],
        schema: type[T],
        ctx: RequestContext | None = None,
        usage: LLMUsage | None = None,
    ) -> T:
        await asyncio.sleep(self.delay_s)
        return await self.inner.complete_json(prompt_id, variables, schema, ctx, usage)

    def complete_json_sync(
        self,
        prompt_id: str,
        variables: dict[str, Any],
        schema: type[T],
        ctx: RequestContext | None = None,
        usage: LLMUsage | None = None,
    ) -> T:
        return run_sync(self.complete_json(prompt_id, variables, schema, ctx, usage))
