"""The typed outputs of a commit's phases, as the ledger stores them.

Each step's output is a pydantic model, stored write-once in the ledger under its key as its
JSON (`model_dump(mode="json")`) and read back with `model_validate`:

| key                  | model              |
|----------------------|--------------------|
| `archive`            | `ArchiveOutcome`   |
| `extract:<name>`     | `ExtractionResult` |
| `plan`               | `PlanOutcome`      |
| `write`              | `WriteOutcome`     |
| `result`             | `CommitResult`     |

The field names of each model are the keys of the JSON stored, so an output written by an
earlier release (a commit in flight across a deploy) reads back as it was written. The ledger
itself knows no model: it stores and returns JSON objects (`JsonObject`); `PhaseOutputs` parses
what a step read, and `ExtractorProgress` is an extractor's entry in the ledger row's
`extractors`.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

from ctxpipe.commit.payloads import ArchiveOutcome, PlanOutcome, WriteOutcome
from ctxpipe.core.enums import ExtractorStatus
from ctxpipe.core.errors import CommitError
from ctxpipe.core.models import CommitResult, ExtractionResult, ExtractorReport
from ctxpipe.extraction.extractors import EXTRACTOR_NAMES
from ctxpipe.storage.commit_ledger import JsonObject

ARCHIVE, PLAN, WRITE, RESULT = "archive", "plan", "write", "result"
EXTRACT_PREFIX = "extract:"
EXTRACT_KEYS = [EXTRACT_PREFIX + n for n in EXTRACTOR_NAMES]


class ExtractorProgress(BaseModel):
    """An extractor's entry in the ledger row's `extractors` (by name), stored with its
    output: what `ctxpipe commits show` and the commit's status report per extractor."""

    status: ExtractorStatus
    candidates: int = 0
    reason: str = ""
    duration_ms: int = 0

    @classmethod
    def of(cls, report: ExtractorReport) -> ExtractorProgress:
        return cls(
            status=report.status,
            candidates=report.candidates,
            reason=report.reason,
            duration_ms=report.duration_ms,
        )


class PhaseOutputs(BaseModel):
    """The stored outputs of a commit that a step read (those of the keys it asked for that
    exist), parsed: None (or no entry) where an output is not stored yet."""

    model_config = ConfigDict(extra="forbid")

    archive: ArchiveOutcome | None = None
    extracted: dict[str, ExtractionResult] = Field(default_factory=dict)  # by extractor
    plan: PlanOutcome | None = None
    write: WriteOutcome | None = None
    result: CommitResult | None = None

    @classmethod
    def from_stored(cls, stored: Mapping[str, JsonObject]) -> PhaseOutputs:
        """The outputs as the ledger returns them (JSON by key) parsed; a key that is no
        phase's output is refused (ValidationError)."""
        extracted = {
            k.removeprefix(EXTRACT_PREFIX): v
            for k, v in stored.items()
            if k.startswith(EXTRACT_PREFIX)
        }
        others = {k: v for k, v in stored.items() if not k.startswith(EXTRACT_PREFIX)}
        return cls.model_validate({**others, "extracted": extracted})

    def merged(self, stored: Mapping[str, JsonObject]) -> PhaseOutputs:
        """These outputs and those just `stored` (as the ledger returned them: a concurrent
        run's may have won), parsed; a stored one replaces this one."""
        new = PhaseOutputs.from_stored(stored)
        return PhaseOutputs(
            archive=self.archive if new.archive is None else new.archive,
            extracted={**self.extracted, **new.extracted},
            plan=self.plan if new.plan is None else new.plan,
            write=self.write if new.write is None else new.write,
            result=self.result if new.result is None else new.result,
        )

    def extraction_results(self) -> list[ExtractionResult]:
        """Every extractor's output, in `EXTRACTOR_NAMES` order (CommitError: one missing)."""
        missing = [n for n in EXTRACTOR_NAMES if n not in self.extracted]
        if missing:
            raise CommitError(f"extractor output missing: {', '.join(missing)}", phase="extract")
        return [self.extracted[n] for n in EXTRACTOR_NAMES]


__all__ = [
    "ARCHIVE",
    "EXTRACT_KEYS",
    "EXTRACT_PREFIX",
    "PLAN",
    "RESULT",
    "WRITE",
    "ExtractorProgress",
    "PhaseOutputs",
]
