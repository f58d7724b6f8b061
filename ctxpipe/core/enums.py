"""Enumerations shared by every layer."""

from __future__ import annotations

from enum import StrEnum


class MemoryCategory(StrEnum):
    PROFILE = "profile"
    PREFERENCES = "preferences"
    ENTITIES = "entities"
    EVENTS = "events"
    CASES = "cases"
    PATTERNS = "patterns"
    SKILLS = "skills"


USER_CATEGORIES = frozenset(
    {
        MemoryCategory.PROFILE,
        MemoryCategory.PREFERENCES,
        MemoryCategory.ENTITIES,
        MemoryCategory.EVENTS,
    }
)
AGENT_CATEGORIES = frozenset({MemoryCategory.CASES, MemoryCategory.PATTERNS, MemoryCategory.SKILLS})


class OwnerScope(StrEnum):
    USER = "user"
    AGENT = "agent"


class WriteAction(StrEnum):
    CREATE = "create"
    MERGE = "merge"
    APPEND = "append"
    SKIP = "skip"


class OutboxEventType(StrEnum):
    UPSERT_CONTEXT = "UPSERT_CONTEXT"
    DELETE_CONTEXT = "DELETE_CONTEXT"
    MOVE_CONTEXT = "MOVE_CONTEXT"
    UPSERT_RELATION = "UPSERT_RELATION"


class OutboxStatus(StrEnum):
    PENDING = "pending"
    CLAIMED = "claimed"
    DONE = "done"
    FAILED = "failed"
    DEAD = "dead"


class CommitStatus(StrEnum):
    SUCCESS = "success"
    PARTIAL = "partial"
    FAILED = "failed"


class CommitPhase(StrEnum):
    """Ledger phases of a commit, in order."""

    ENQUEUED = "enqueued"
    ARCHIVED = "archived"
    EXTRACTED = "extracted"
    PLANNED = "planned"
    WRITTEN = "written"
    REGISTERED = "registered"
    FAILED = "failed"


class ExtractorStatus(StrEnum):
    OK = "ok"
    EMPTY = "empty"
    FAILED = "failed"
    SKIPPED = "skipped"


class DedupDecision(StrEnum):
    CREATE = "create"
    SKIP = "skip"
    MERGE_EXISTING = "merge_existing"


class RelationType(StrEnum):
    RELATED_TO = "related_to"
    DERIVED_FROM = "derived_from"
    PART_OF = "part_of"
    REFERENCES = "references"


class ContextType(StrEnum):
    MEMORY = "memory"
    SESSION = "session"
    RESOURCE = "resource"
    SKILL = "skill"
