"""Data models of the write path, as pydantic v2 models.

All of them are JSON-serialisable so the same phase functions run in-process and as Celery tasks.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from ctxpipe.core.enums import (
    CommitStatus,
    ContextType,
    DedupDecision,
    ExtractorStatus,
    MemoryCategory,
    OutboxEventType,
    OutboxStatus,
    OwnerScope,
    WriteAction,
)
from ctxpipe.core.session import Message, ToolUse


def utcnow() -> datetime:
    return datetime.now(UTC)


def content_hash(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode("utf-8"))
        h.update(b"\x1f")
    return h.hexdigest()


def stable_id(*parts: object, length: int = 32) -> str:
    """Deterministic id from parts (used for chunk ids, event ids, edge ids)."""
    return content_hash(*(str(p) for p in parts))[:length]


# --------------------------------------------------------------------------- archive
class SessionStats(BaseModel):
    total_turns: int = 0
    total_tokens: int = 0
    compression_count: int = 0
    memories_extracted: int = 0


class ArchiveSummary(BaseModel):
    """Structured output of `compression.archive_summary`."""

    summary: str
    key_topics: list[str] = Field(default_factory=list)
    key_decisions: list[str] = Field(default_factory=list)
    unresolved: list[str] = Field(default_factory=list)


class SessionArchive(BaseModel):
    session_id: str
    archive_uri: str | None = None
    summary: str = ""
    key_topics: list[str] = Field(default_factory=list)
    key_decisions: list[str] = Field(default_factory=list)
    unresolved: list[str] = Field(default_factory=list)
    recent_messages: list[Message] = Field(default_factory=list)
    used_contexts: list[str] = Field(default_factory=list)
    used_tools: list[ToolUse] = Field(default_factory=list)
    stats: SessionStats = SessionStats()
    persisted: bool = False
    skipped_reason: str | None = None


# ------------------------------------------------------------------------ candidates
class CandidateMemory(BaseModel):
    """A memory proposed by an extractor; carries no storage details."""

    kind: Literal["memory"] = "memory"
    category: MemoryCategory
    owner_scope: OwnerScope
    routing_key: str = Field(min_length=1, max_length=200)
    abstract: str = Field(min_length=1)
    overview: str = ""
    content: str = ""
    confidence: float = Field(ge=0.0, le=1.0)
    source_refs: list[str] = Field(default_factory=list)
    language: str = "en"
    event_time: str | None = None
    observed_at: str | None = Field(None, description="time of the session it was learned from")

    def fingerprint(self) -> str:
        return content_hash(self.category.value, self.abstract.strip().lower(), self.content)


class ToolSkillCandidate(CandidateMemory):
    """Tool/skill candidate with usage statistics."""

    kind: Literal["tool_skill"] = "tool_skill"  # type: ignore[assignment]
    tool_name: str = ""
    skill_name: str = ""
    call_count: int = Field(0, ge=0)
    success_count: int = Field(0, ge=0)
    total_duration_ms: int = Field(0, ge=0)
    total_tokens: int = Field(0, ge=0)
    best_for: str = ""
    common_failures: str = ""


AnyCandidate = CandidateMemory | ToolSkillCandidate


class LLMUsage(BaseModel):
    """Token accounting collected across the LLM calls of one commit."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    retries: int = 0  # attempts re-sent, for any cause (timeouts, 429 and 5xx, bad output)
    # structured output: calls answered by a reply that was repaired locally (fences, prose,
    # trailing commas, ...); attempts re-sent because the reply held no valid object even
    # repaired (part of `retries`); calls that ended without an object, after every attempt
    repaired: int = 0
    retried: int = 0
    failed: int = 0

    def add(self, other: LLMUsage) -> None:
        self.calls += other.calls
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.retries += other.retries
        self.repaired += other.repaired
        self.retried += other.retried
        self.failed += other.failed


class ExtractorReport(BaseModel):
    """Why an extractor produced what it did; every commit carries one per extractor."""

    extractor: str
    status: ExtractorStatus
    candidates: int = 0
    reason: str = ""
    duration_ms: int = 0
    started_at: float | None = None  # epoch seconds, to show the extractors' overlap
    finished_at: float | None = None


class ExtractionResult(BaseModel):
    report: ExtractorReport
    usage: LLMUsage = Field(default_factory=lambda: LLMUsage())
    candidates: list[ToolSkillCandidate | CandidateMemory] = Field(default_factory=list)


# ---------------------------------------------------------------------- nodes & edges
class RelationEdge(BaseModel):
    from_uri: str
    to_uri: str
    relation_type: str = "related_to"
    reason: str = ""
    weight: float = 1.0
    created_at: datetime | None = None

    @property
    def edge_id(self) -> str:
        return stable_id(self.from_uri, self.to_uri, self.relation_type, length=16)


class RelationOp(BaseModel):
    op: Literal["upsert", "append", "remove"]
    edges: list[RelationEdge]


class ContextNode(BaseModel):
    uri: str
    parent_uri: str = ""
    context_type: ContextType = ContextType.MEMORY
    category: str = ""
    owner_space: str = ""
    abstract: str = ""
    overview: str = ""
    content: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)
    source_refs: list[str] = Field(default_factory=list)
    version: int = 0
    content_hash: str = ""
    created_at: datetime | None = None
    updated_at: datetime | None = None

    def compute_hash(self) -> str:
        return content_hash(self.abstract, self.overview, self.content)


class NodeStat(BaseModel):
    uri: str
    exists: bool
    version: int = 0
    size: int = 0
    content_hash: str = ""
    category: str = ""
    updated_at: datetime | None = None


class NodeSummary(BaseModel):
    uri: str
    name: str
    is_dir: bool
    has_children: bool = False
    category: str = ""
    abstract: str = ""
    version: int = 0
    depth: int = 1
    updated_at: datetime | None = None


class ChunkRecord(BaseModel):
    chunk_id: str
    uri: str
    parent_uri: str = ""
    level: int = Field(0, ge=0, le=2)
    chunk_index: int = Field(0, ge=0)
    text_content: str = ""
    context_type: str = "memory"
    category: str = ""
    owner_space: str = ""
    source_refs: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @staticmethod
    def make_id(uri: str, level: int, index: int) -> str:
        return stable_id(uri, level, index)


# ------------------------------------------------------------------------ plans
class DedupResult(BaseModel):
    decision: DedupDecision
    merge_target: str | None = None
    score: float | None = None
    reason: str


class WritePlan(BaseModel):
    action: WriteAction
    target_uri: str
    category: MemoryCategory | None = None
    owner_space: str = ""
    node_patch: dict[str, str] = Field(default_factory=dict)
    relation_ops: list[RelationOp] = Field(default_factory=list)
    reason: str = ""
    metadata_patch: dict[str, Any] = Field(default_factory=dict)
    source_refs: list[str] = Field(default_factory=list)
    expected_version: int | None = None
    dedup: DedupResult | None = None


class WriteResult(BaseModel):
    uri: str
    action: WriteAction
    node_version: int = 0
    created: bool = False
    updated: bool = False
    error: str | None = None


# ------------------------------------------------------------------------ outbox
class OutboxEvent(BaseModel):
    event_id: str
    event_type: OutboxEventType
    uri: str
    payload: dict[str, Any] = Field(default_factory=dict)
    status: OutboxStatus = OutboxStatus.PENDING
    retry_count: int = 0
    max_retries: int = 5
    worker_id: str | None = None
    lease_until: datetime | None = None
    next_attempt_at: datetime | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    error_message: str | None = None

    @staticmethod
    def make_id(event_type: OutboxEventType | str, uri: str, version: int | str) -> str:
        return stable_id(str(event_type), uri, version)


# ------------------------------------------------------------------------ commit
class CommitOptions(BaseModel):
    dry_run: bool = False
    skip_archive: bool = False
    skip_dedup: bool = False
    skip_relations: bool = False
    categories_filter: list[MemoryCategory] | None = None
    max_candidates: int | None = Field(None, ge=0)


class CommitStats(BaseModel):
    candidates_extracted: int = 0
    candidates_skipped: int = 0
    nodes_created: int = 0
    nodes_merged: int = 0
    nodes_appended: int = 0
    relations_written: int = 0
    outbox_events_queued: int = 0
    duration_ms: int = 0
    llm_calls: int = 0
    llm_prompt_tokens: int = 0
    llm_completion_tokens: int = 0
    # LLM cost per phase: archive, extract_{name}, plan (dedup decisions, merges), write
    # (merges re-planned after a version conflict)
    llm_by_phase: dict[str, LLMUsage] = Field(default_factory=dict)


class SkippedCandidate(BaseModel):
    routing_key: str
    category: str
    reason: str


class CommitResult(BaseModel):
    commit_id: str
    status: CommitStatus
    archive: SessionArchive | None = None
    write_results: list[WriteResult] = Field(default_factory=list)
    outbox_events: list[OutboxEvent] = Field(default_factory=list)
    relation_edges: list[RelationEdge] = Field(default_factory=list)
    plans: list[WritePlan] = Field(default_factory=list)
    extractors: list[ExtractorReport] = Field(default_factory=list)
    skipped: list[SkippedCandidate] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    stats: CommitStats = CommitStats()
    reason: str = ""
    dry_run: bool = False
