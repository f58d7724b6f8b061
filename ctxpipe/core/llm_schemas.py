"""Structured outputs of the prompts: archive summary, extraction, dedup decision, merge.

Each prompt id maps to one pydantic model; LLM providers validate their output against it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from ctxpipe.core.enums import DedupDecision, MemoryCategory
from ctxpipe.core.models import ArchiveSummary


class ExtractedMemory(BaseModel):
    """One memory as an extractor prompt returns it."""

    category: MemoryCategory
    routing_key: str = Field(min_length=1, max_length=200, description="topic slug / entity / tool")
    abstract: str = Field(min_length=1, description="L0: one or two sentences")
    overview: str = Field("", description="L1: structured key points")
    content: str = Field("", description="L2: the full narrative")
    confidence: float = Field(ge=0.0, le=1.0)
    source_refs: list[str] = Field(description="ids of the messages it was derived from")
    event_time: str | None = Field(None, description="ISO date of an event, when known")
    # tool / skill usage guide (procedure extractor)
    tool_name: str = ""
    skill_name: str = ""
    best_for: str = ""
    common_failures: str = ""


class ExtractionOutput(BaseModel):
    memories: list[ExtractedMemory] = Field(default_factory=list)


class SessionDigest(ArchiveSummary):
    """Structured output of `extraction.session`: the session's summary and the memories of
    every extractor it was asked for, in one call (`CTXPIPE_COMMIT__EXTRACTION_CALLS=session`)."""

    memories: list[ExtractedMemory] = Field(default_factory=list)


class MergeOutput(BaseModel):
    abstract: str = Field(min_length=1)
    overview: str = ""
    content: str = ""
    reason: str = ""
    conflicts: list[str] = Field(default_factory=list)


class DedupDecisionOutput(BaseModel):
    decision: DedupDecision
    reason: str


class TypedQuery(BaseModel):
    query: str = Field(min_length=1)
    context_type: Literal["memory", "resource", "skill"] = "memory"
    intent: str = ""
    priority: int = Field(3, ge=1, le=5)


class IntentOutput(BaseModel):
    queries: list[TypedQuery] = Field(default_factory=list, max_length=5)
    reasoning: str = ""


PROMPT_SCHEMAS: dict[str, type[BaseModel]] = {
    "compression.archive_summary": ArchiveSummary,
    "extraction.profile": ExtractionOutput,
    "extraction.preferences": ExtractionOutput,
    "extraction.entity_event": ExtractionOutput,
    "extraction.procedure": ExtractionOutput,
    "extraction.session": SessionDigest,
    "policy.merge_bundle": MergeOutput,
    "policy.dedup_decision": DedupDecisionOutput,
    "retrieval.intent_analysis": IntentOutput,
}
