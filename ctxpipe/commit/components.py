"""The dependencies every commit phase receives, wired once by the composition root."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from ctxpipe.commit.step_cache import StepCache
from ctxpipe.core.config import Settings
from ctxpipe.core.models import OutboxEvent
from ctxpipe.fs import ContextFS, FSRelationStore, OwnerLock
from ctxpipe.providers.base import LLM, Embedder, VectorIndex
from ctxpipe.providers.prompts import PromptRegistry


class OutboxSink(Protocol):
    """Where phase 5 registers outbox events (the Postgres OutboxStore in production)."""

    def append_batch(self, events: list[OutboxEvent]) -> list[OutboxEvent]: ...


@dataclass
class CommitComponents:
    settings: Settings
    fs: ContextFS
    relations: FSRelationStore
    llm: LLM
    lock: OwnerLock
    prompts: PromptRegistry | None = None
    embedder: Embedder | None = None
    vector_index: VectorIndex | None = None
    outbox: OutboxSink | None = None
    # parsed requests of the commits this process runs steps of (one per Runtime)
    step_cache: StepCache = field(default_factory=StepCache)
