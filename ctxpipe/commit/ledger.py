"""The commit ledger port: what `steps.*` read and write a commit through.

`steps.*` read and write a commit's phase and its write-once phase outputs through
`LedgerPort`. Celery's tasks pass the PostgreSQL `CommitLedger`; `CommitCoordinator` passes an
`InMemoryLedger` (`ctxpipe.commit.memory_ledger`), so a commit run in process goes through the
very code the workers run (as dramatiq tests its actors on a stub broker). Both keep the same
rules: a phase only moves forward and never out of `failed`, a failure never overwrites
`registered`, the first stored output of a phase wins, and what is stored is a JSON copy.
`tests/integration/ledger/` runs one suite of these rules against both.
"""

from __future__ import annotations

from typing import Protocol

from ctxpipe.core.enums import CommitPhase
from ctxpipe.storage.commit_ledger import (
    DRAIN_WINDOW_S,
    CommitBacklog,
    Completion,
    JsonObject,
    LedgerRow,
    StepState,
    Timings,
)


class LedgerPort(Protocol):
    """What the steps need of a commit ledger (`CommitLedger` and `InMemoryLedger`)."""

    def create(
        self,
        commit_id: str,
        ctx: dict[str, str],
        request: JsonObject,
        *,
        max_pending: int = 0,
    ) -> bool: ...

    def backlog(self, window_s: float = DRAIN_WINDOW_S) -> CommitBacklog: ...

    def get(self, commit_id: str) -> LedgerRow | None: ...

    def advance(
        self,
        commit_id: str,
        phase: CommitPhase,
        *,
        status: str | None = None,
        extractors: dict[str, JsonObject] | None = None,
        timings: Timings | None = None,
        result: JsonObject | None = None,
    ) -> None: ...

    def fail(self, commit_id: str, phase: str, error: str) -> None: ...

    def touch(self, commit_id: str) -> None: ...

    def complete(
        self,
        commit_id: str,
        key: str,
        payload: JsonObject,
        phase: CommitPhase,
        *,
        status: str | None = None,
        extractors: dict[str, JsonObject] | None = None,
        timings: Timings | None = None,
        with_result: bool = False,
        extracted_when: int | None = None,
        durable: bool = True,
    ) -> JsonObject: ...

    def complete_all(self, commit_id: str, completions: list[Completion]) -> list[JsonObject]: ...

    def save_output(self, commit_id: str, key: str, payload: JsonObject) -> JsonObject: ...

    def load_output(self, commit_id: str, key: str) -> JsonObject | None: ...

    def load_outputs(self, commit_id: str, prefix: str) -> dict[str, JsonObject]: ...

    def state(
        self,
        commit_id: str,
        keys: list[str],
        delivery: str | None = None,
        done: str | None = None,
    ) -> StepState | None: ...


def store(ledger: LedgerPort, commit_id: str, done: Completion) -> JsonObject:
    """`ledger.complete` of one `Completion` (one statement); returns the stored output."""
    return ledger.complete(
        commit_id,
        done.key,
        done.payload,
        done.phase,
        extractors=done.extractors,
        timings=done.timings,
        extracted_when=done.extracted_when,
        durable=done.durable,
    )
