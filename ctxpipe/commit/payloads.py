"""JSON payloads passed between commit phases (in-process or as Celery task arguments)."""

from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, Field

from ctxpipe.core.llm_schemas import ExtractedMemory
from ctxpipe.core.models import (
    CandidateMemory,
    CommitOptions,
    ExtractionResult,
    ExtractorReport,
    RelationEdge,
    SessionArchive,
    SkippedCandidate,
    ToolSkillCandidate,
    WritePlan,
    WriteResult,
    utcnow,
)
from ctxpipe.core.session import Message, RequestContext, SessionInput, ToolUse
from ctxpipe.providers.base import LLMUsage


def new_commit_id() -> str:
    return uuid.uuid4().hex


class CommitRequest(BaseModel):
    """Everything a commit needs; the input of phase 1 and carried by every later phase."""

    commit_id: str = Field(
        default_factory=new_commit_id, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,127}$"
    )
    ctx: RequestContext
    messages: list[Message] = Field(min_length=1)
    used_contexts: list[str] = Field(default_factory=list)
    used_tools: list[ToolUse] = Field(default_factory=list)
    options: CommitOptions = CommitOptions()
    # when the commit was accepted: a commit accepted before its user was erased writes nothing
    submitted_at: datetime = Field(default_factory=utcnow)

    @classmethod
    def from_session(
        cls,
        session: SessionInput,
        options: CommitOptions | None = None,
        commit_id: str | None = None,
    ) -> CommitRequest:
        return cls(
            commit_id=commit_id or session.commit_id or new_commit_id(),
            ctx=session.context(),
            messages=session.messages,
            used_contexts=session.used_contexts,
            used_tools=session.used_tools,
            options=options or CommitOptions(),
        )


class SessionExtraction(BaseModel):
    """The memories the session's one extraction call (`extraction.session`, which also wrote
    the archive's summary) proposed for the extractors it was asked for (`asked`, by name; the
    others were gated or filtered out and report so without a call)."""

    asked: list[str] = Field(default_factory=list)
    memories: list[ExtractedMemory] = Field(default_factory=list)


class ArchiveOutcome(BaseModel):
    archive: SessionArchive
    usage: LLMUsage = LLMUsage()
    duration_ms: int = 0
    extraction: SessionExtraction | None = None  # None: each extractor makes its own call


class PlanItem(BaseModel):
    """A write plan and the candidates it was built from (so the writer can re-plan)."""

    plan: WritePlan
    candidates: list[ToolSkillCandidate | CandidateMemory] = Field(default_factory=list)


class PlanOutcome(BaseModel):
    items: list[PlanItem] = Field(default_factory=list)
    skipped: list[SkippedCandidate] = Field(default_factory=list)
    extractors: list[ExtractorReport] = Field(default_factory=list)
    candidates_extracted: int = 0
    usage: LLMUsage = LLMUsage()
    warnings: list[str] = Field(default_factory=list)
    duration_ms: int = 0


class WriteOutcome(BaseModel):
    archive: SessionArchive | None = None
    write_results: list[WriteResult] = Field(default_factory=list)
    relation_edges: list[RelationEdge] = Field(default_factory=list)
    failed: list[str] = Field(default_factory=list)
    usage: LLMUsage = LLMUsage()
    duration_ms: int = 0


__all__ = [
    "ArchiveOutcome",
    "CommitRequest",
    "ExtractionResult",
    "PlanItem",
    "PlanOutcome",
    "WriteOutcome",
    "new_commit_id",
]
