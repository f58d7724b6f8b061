"""The commit ledger port, and the in-memory ledger the inline dispatcher runs the steps on.

`steps.*` read and write a commit's phase and its write-once phase outputs through
`LedgerPort`. Celery's tasks pass the PostgreSQL `CommitLedger`; `CommitCoordinator` passes an
`InMemoryLedger`, so a commit run in process goes through the very code the workers run (as
dramatiq tests its actors on a stub broker). Both follow the same rules: a phase only moves
forward and never out of `failed`, a failure never overwrites `registered`, and the first
stored output of a phase wins.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from ctxpipe.commit.backlog import admits
from ctxpipe.core.enums import CommitPhase
from ctxpipe.storage.commit_ledger import (
    DRAIN_WINDOW_S,
    PHASE_ORDER,
    CommitBacklog,
    Completion,
    LedgerRow,
    StepState,
)


class LedgerPort(Protocol):
    """What the steps need of a commit ledger (`CommitLedger` and `InMemoryLedger`)."""

    def create(
        self,
        commit_id: str,
        ctx: dict[str, str],
        request: dict[str, Any],
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
        extractors: dict[str, Any] | None = None,
        timings: dict[str, Any] | None = None,
        result: dict[str, Any] | None = None,
    ) -> None: ...

    def fail(self, commit_id: str, phase: str, error: str) -> None: ...

    def touch(self, commit_id: str) -> None: ...

    def complete(
        self,
        commit_id: str,
        key: str,
        payload: dict[str, Any],
        phase: CommitPhase,
        *,
        status: str | None = None,
        extractors: dict[str, Any] | None = None,
        timings: dict[str, Any] | None = None,
        with_result: bool = False,
        extracted_when: int | None = None,
    ) -> dict[str, Any]: ...

    def complete_all(
        self, commit_id: str, completions: list[Completion]
    ) -> list[dict[str, Any]]: ...

    def save_output(self, commit_id: str, key: str, payload: dict[str, Any]) -> dict[str, Any]: ...

    def load_output(self, commit_id: str, key: str) -> dict[str, Any] | None: ...

    def load_outputs(self, commit_id: str, prefix: str) -> dict[str, dict[str, Any]]: ...

    def state(
        self,
        commit_id: str,
        keys: list[str],
        delivery: str | None = None,
        done: str | None = None,
    ) -> StepState | None: ...


def store(ledger: LedgerPort, commit_id: str, done: Completion) -> dict[str, Any]:
    """`ledger.complete` of one `Completion` (one statement); returns the stored output."""
    return ledger.complete(
        commit_id,
        done.key,
        done.payload,
        done.phase,
        extractors=done.extractors,
        timings=done.timings,
        extracted_when=done.extracted_when,
    )


_FINISHED = (CommitPhase.REGISTERED.value, CommitPhase.FAILED.value)


@dataclass
class _Commit:
    row: LedgerRow
    outputs: dict[str, dict[str, Any]] = field(default_factory=dict)


class InMemoryLedger:
    """`LedgerPort` in a dict: one process, nothing durable. Thread-safe (extractor steps may
    complete concurrently)."""

    def __init__(self) -> None:
        self._commits: dict[str, _Commit] = {}
        self._lock = threading.Lock()

    def create(
        self,
        commit_id: str,
        ctx: dict[str, str],
        request: dict[str, Any],
        *,
        max_pending: int = 0,
    ) -> bool:
        with self._lock:
            if commit_id in self._commits:
                return False
            if not admits(self._in_flight(), max_pending):
                return False
            now = datetime.now(UTC)
            self._commits[commit_id] = _Commit(
                LedgerRow(
                    commit_id=commit_id,
                    account_id=ctx.get("account_id", ""),
                    user_id=ctx.get("user_id", ""),
                    agent_id=ctx.get("agent_id", ""),
                    session_id=ctx.get("session_id", ""),
                    phase=CommitPhase.ENQUEUED.value,
                    request=request,
                    created_at=now,
                    updated_at=now,
                )
            )
            return True

    def _in_flight(self) -> int:
        return sum(1 for c in self._commits.values() if c.row.phase not in _FINISHED)

    def backlog(self, window_s: float = DRAIN_WINDOW_S) -> CommitBacklog:
        now = datetime.now(UTC)
        with self._lock:
            rows = [c.row for c in self._commits.values()]
        waiting = [r.created_at for r in rows if r.phase not in _FINISHED and r.created_at]
        finished = sum(
            1
            for r in rows
            if r.phase in _FINISHED
            and r.updated_at is not None
            and (now - r.updated_at).total_seconds() < window_s
        )
        return CommitBacklog(
            in_flight=sum(1 for r in rows if r.phase not in _FINISHED),
            oldest_age_s=(now - min(waiting)).total_seconds() if waiting else None,
            finished_recently=finished,
            window_s=window_s,
        )

    def get(self, commit_id: str) -> LedgerRow | None:
        with self._lock:
            found = self._commits.get(commit_id)
            return found.row.model_copy(deep=True) if found else None

    def advance(
        self,
        commit_id: str,
        phase: CommitPhase,
        *,
        status: str | None = None,
        extractors: dict[str, Any] | None = None,
        timings: dict[str, Any] | None = None,
        result: dict[str, Any] | None = None,
    ) -> None:
        """Move forward to `phase` (never backwards, never out of `failed`)."""
        with self._lock:
            self._advance(commit_id, phase, status, extractors, timings, result)

    def _advance(
        self,
        commit_id: str,
        phase: CommitPhase,
        status: str | None,
        extractors: dict[str, Any] | None,
        timings: dict[str, Any] | None,
        result: dict[str, Any] | None,
    ) -> None:
        found = self._commits.get(commit_id)
        if found is None:
            return
        row = found.row
        if row.phase == CommitPhase.FAILED.value:
            return
        if _after(row.phase, phase.value):
            return
        if row.phase != phase.value:  # progress resets the sweeper's re-drive count
            row.attempts.pop("sweep", None)
        row.phase = phase.value
        row.status = status if status is not None else row.status
        row.extractors.update(extractors or {})
        row.timings.update(timings or {})
        row.result = result if result is not None else row.result
        row.updated_at = datetime.now(UTC)

    def fail(self, commit_id: str, phase: str, error: str) -> None:
        with self._lock:
            found = self._commits.get(commit_id)
            if found is None or found.row.phase == CommitPhase.REGISTERED.value:
                return
            row = found.row
            row.phase = row.status = CommitPhase.FAILED.value
            row.error, row.error_phase = error[:2000], phase
            row.updated_at = datetime.now(UTC)

    def touch(self, commit_id: str) -> None:
        with self._lock:
            found = self._commits.get(commit_id)
            if found is not None:
                found.row.updated_at = datetime.now(UTC)

    def complete(
        self,
        commit_id: str,
        key: str,
        payload: dict[str, Any],
        phase: CommitPhase,
        *,
        status: str | None = None,
        extractors: dict[str, Any] | None = None,
        timings: dict[str, Any] | None = None,
        with_result: bool = False,
        extracted_when: int | None = None,
    ) -> dict[str, Any]:
        """Store a phase output (first writer wins) and advance the phase under one lock;
        `extracted_when`: with an extractor's report, move on to `extracted` once that many
        extractors have reported. Returns the stored output."""
        with self._lock:
            stored = self._save(commit_id, key, payload)
            row = self._commits[commit_id].row
            if row.phase == CommitPhase.FAILED.value or _after(row.phase, phase.value):
                return stored  # a late or concurrent run: the phase never moves backwards
            target = phase
            reported = set(row.extractors) | set(extractors or {})
            if extracted_when is not None and len(reported) >= extracted_when:
                target = CommitPhase.EXTRACTED
            result = stored if with_result else None
            self._advance(commit_id, target, status, extractors, timings, result)
        return stored

    def complete_all(self, commit_id: str, completions: list[Completion]) -> list[dict[str, Any]]:
        """`complete` for each, in order."""
        return [store(self, commit_id, c) for c in completions]

    def save_output(self, commit_id: str, key: str, payload: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            return self._save(commit_id, key, payload)

    def _save(self, commit_id: str, key: str, payload: dict[str, Any]) -> dict[str, Any]:
        found = self._commits.get(commit_id)
        if found is None:  # the PostgreSQL ledger refuses it by its foreign key
            raise KeyError(f"unknown commit {commit_id}")
        return found.outputs.setdefault(key, payload)

    def load_output(self, commit_id: str, key: str) -> dict[str, Any] | None:
        with self._lock:
            found = self._commits.get(commit_id)
            return found.outputs.get(key) if found else None

    def load_outputs(self, commit_id: str, prefix: str) -> dict[str, dict[str, Any]]:
        with self._lock:
            found = self._commits.get(commit_id)
            if found is None:
                return {}
            return {k: v for k, v in sorted(found.outputs.items()) if k.startswith(prefix)}

    def state(
        self,
        commit_id: str,
        keys: list[str],
        delivery: str | None = None,
        done: str | None = None,
    ) -> StepState | None:
        """The request, creation time, phase and the listed outputs; with `delivery`, this
        delivery counted in `attempts` unless output `done` exists (as the PostgreSQL ledger
        does)."""
        with self._lock:
            found = self._commits.get(commit_id)
            if found is None:
                return None
            row = found.row
            deliveries = 0
            if delivery is not None and (done or "") not in found.outputs:
                deliveries = int(row.attempts.get(delivery, 0)) + 1
                row.attempts[delivery] = deliveries
            outputs = {k: found.outputs[k] for k in keys if k in found.outputs}
            assert row.created_at is not None
            return StepState(row.request, row.created_at, row.phase, outputs, deliveries)


def _after(phase: str, other: str) -> bool:
    return PHASE_ORDER.index(phase) > PHASE_ORDER.index(other)
