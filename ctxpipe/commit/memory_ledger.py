"""`InMemoryLedger`: the commit ledger in a dict, the twin of `sql/queries/ledger.sql`.

One method per named query, named in its docstring (as procrastinate's in-memory connector is
the twin of its SQL); the inline dispatcher (`CommitCoordinator`) runs a commit's steps on it.
`tests/integration/ledger/` holds it and the PostgreSQL `CommitLedger` to
the same rules.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TypeVar

from pydantic import JsonValue

from ctxpipe.commit.backlog import admits
from ctxpipe.core.enums import CommitPhase
from ctxpipe.core.models import CommitStats, LLMUsage
from ctxpipe.storage.commit_ledger import (
    DRAIN_WINDOW_S,
    PHASE_ORDER,
    CommitBacklog,
    Completion,
    JsonObject,
    LedgerRow,
    LLMCost,
    RecentCommit,
    StepState,
    Timings,
)

_FINISHED = (CommitPhase.REGISTERED.value, CommitPhase.FAILED.value)
J = TypeVar("J")


def _json(value: J) -> J:
    """`value` as a jsonb column gives it back: a copy, never the caller's object; TypeError
    where it is not JSON (as psycopg's `Jsonb` raises before the statement is sent)."""
    return json.loads(json.dumps(value))


@dataclass
class _Commit:
    """A row of `commits` and its rows of `commit_outputs` (each payload kept as JSON text,
    so every read returns a fresh copy)."""

    row: LedgerRow
    outputs: dict[str, str] = field(default_factory=dict)

    def output(self, key: str) -> JsonObject | None:
        text = self.outputs.get(key)
        return None if text is None else dict(json.loads(text))


class InMemoryLedger:
    """`CommitLedger` in a dict: one process, nothing durable. One method per named query of
    `sql/queries/ledger.sql`, each one's docstring naming it. Thread-safe (extractor steps may
    complete concurrently): one lock plays the part of a transaction."""

    def __init__(self) -> None:
        self._commits: dict[str, _Commit] = {}
        self._lock = threading.Lock()

    def create(
        self,
        commit_id: str,
        ctx: dict[str, str],
        request: JsonObject,
        *,
        max_pending: int = 0,
    ) -> bool:
        """`ledger_create`: False if the id is known or `max_pending` commits are in flight."""
        stored = _json(request)
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
                    request=stored,
                    created_at=now,
                    updated_at=now,
                )
            )
            return True

    def _in_flight(self) -> int:
        return sum(1 for c in self._commits.values() if c.row.phase not in _FINISHED)

    def get(self, commit_id: str) -> LedgerRow | None:
        """`ledger_get`."""
        with self._lock:
            found = self._commits.get(commit_id)
            return found.row.model_copy(deep=True) if found else None

    def advance(
        self,
        commit_id: str,
        phase: CommitPhase,
        *,
        status: str | None = None,
        extractors: dict[str, JsonObject] | None = None,
        timings: Timings | None = None,
        result: JsonObject | None = None,
    ) -> None:
        """`ledger_advance`: move forward to `phase` (never backwards, never out of
        `failed`)."""
        extractors, timings, result = _json(extractors), _json(timings), _json(result)
        with self._lock:
            self._advance(commit_id, phase, status, extractors, timings, result)

    def _advance(
        self,
        commit_id: str,
        phase: CommitPhase,
        status: str | None,
        extractors: dict[str, JsonObject] | None,
        timings: Timings | None,
        result: JsonObject | None,
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
        """`ledger_fail`: any commit but a registered one."""
        with self._lock:
            found = self._commits.get(commit_id)
            if found is None or found.row.phase == CommitPhase.REGISTERED.value:
                return
            row = found.row
            row.phase = row.status = CommitPhase.FAILED.value
            row.error, row.error_phase = error[:2000], phase
            row.updated_at = datetime.now(UTC)

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
    ) -> JsonObject:
        """`ledger_complete`: store a phase output (first writer wins) and advance the phase
        under one lock; `extracted_when`: with an extractor's report, move on to `extracted`
        once that many extractors have reported. `durable`: nothing to flush here. Returns
        the stored output."""
        done = _encode(
            Completion(key, payload, phase, extractors, timings, extracted_when, durable)
        )
        with self._lock:
            return self._complete(commit_id, *done, status, with_result)

    def _complete(
        self,
        commit_id: str,
        done: Completion,
        text: str,
        status: str | None,
        with_result: bool,
    ) -> JsonObject:
        """`done` and its payload's JSON `text` as `_encode` gives them."""
        stored = self._save(commit_id, done.key, text)
        row = self._commits[commit_id].row
        if row.phase == CommitPhase.FAILED.value or _after(row.phase, done.phase.value):
            return stored  # a late or concurrent run: the phase never moves backwards
        target = done.phase
        reported = set(row.extractors) | set(done.extractors or {})
        if done.extracted_when is not None and len(reported) >= done.extracted_when:
            target = CommitPhase.EXTRACTED
        result = _json(stored) if with_result else None
        self._advance(commit_id, target, status, done.extractors, done.timings, result)
        return stored

    def complete_all(self, commit_id: str, completions: list[Completion]) -> list[JsonObject]:
        """`ledger_complete` for each, in order, in one transaction: all are stored or none
        (one that is not JSON stores nothing, as on PostgreSQL)."""
        encoded = [_encode(c) for c in completions]
        with self._lock:
            if encoded and commit_id not in self._commits:
                raise KeyError(f"unknown commit {commit_id}")  # before anything is stored
            return [self._complete(commit_id, *c, None, False) for c in encoded]

    def state(
        self,
        commit_id: str,
        keys: list[str],
        delivery: str | None = None,
        done: str | None = None,
    ) -> StepState | None:
        """`ledger_state`, or with `delivery` `ledger_state_deliver`: the request, creation
        time, phase and the listed outputs; this delivery counted in `attempts` (not in
        `updated_at`) unless output `done` exists."""
        with self._lock:
            found = self._commits.get(commit_id)
            if found is None:
                return None
            row = found.row
            deliveries = 0
            if delivery is not None and (done or "") not in found.outputs:
                deliveries = int(row.attempts.get(delivery, 0)) + 1
                row.attempts[delivery] = deliveries
            outputs = {k: v for k in keys if (v := found.output(k)) is not None}
            assert row.created_at is not None
            return StepState(_json(row.request), row.created_at, row.phase, outputs, deliveries)

    def bump_attempt(self, commit_id: str, key: str) -> int:
        """`ledger_bump_attempt`: `attempts[key]` + 1 (0: unknown commit); `updated_at`
        stays."""
        with self._lock:
            found = self._commits.get(commit_id)
            if found is None:
                return 0
            count = int(found.row.attempts.get(key, 0)) + 1
            found.row.attempts[key] = count
            return count

    def touch(self, commit_id: str) -> None:
        """`ledger_touch`."""
        with self._lock:
            found = self._commits.get(commit_id)
            if found is not None:
                found.row.updated_at = datetime.now(UTC)

    def save_output(self, commit_id: str, key: str, payload: JsonObject) -> JsonObject:
        """`output_save_get`: store a phase output once; returns the stored one."""
        text = json.dumps(payload)
        with self._lock:
            return self._save(commit_id, key, text)

    def _save(self, commit_id: str, key: str, text: str) -> JsonObject:
        found = self._commits.get(commit_id)
        if found is None:  # the PostgreSQL ledger refuses it by its foreign key
            raise KeyError(f"unknown commit {commit_id}")
        found.outputs.setdefault(key, text)
        stored = found.output(key)
        assert stored is not None
        return stored

    def load_output(self, commit_id: str, key: str) -> JsonObject | None:
        """`output_get`."""
        with self._lock:
            found = self._commits.get(commit_id)
            return found.output(key) if found else None

    def load_outputs(self, commit_id: str, prefix: str) -> dict[str, JsonObject]:
        """`output_prefix`: the outputs whose key starts with `prefix`, by key."""
        with self._lock:
            found = self._commits.get(commit_id)
            if found is None:
                return {}
            return {
                k: json.loads(v) for k, v in sorted(found.outputs.items()) if k.startswith(prefix)
            }

    def stuck(self, older_than_s: float, limit: int = 100) -> list[tuple[str, str, dict]]:
        """`ledger_stuck`: commits in flight without progress for `older_than_s`, the
        longest first."""
        return self._in_flight_since("updated_at", older_than_s, limit)

    def accepted_before(self, age_s: float, limit: int = 100) -> list[tuple[str, str, dict]]:
        """`ledger_accepted_before`: commits in flight accepted more than `age_s` seconds
        ago, the oldest first."""
        return self._in_flight_since("created_at", age_s, limit)

    def _in_flight_since(self, stamp: str, age_s: float, limit: int) -> list[tuple[str, str, dict]]:
        """Commits in flight whose `stamp` (a `LedgerRow` time) is more than `age_s` old,
        the oldest first."""
        now = datetime.now(UTC)
        with self._lock:
            dated = [
                (when, c.row)
                for c in self._commits.values()
                if c.row.phase not in _FINISHED
                and (when := getattr(c.row, stamp)) is not None
                and (now - when).total_seconds() > age_s
            ]
            dated.sort(key=lambda pair: pair[0])
            return [(r.commit_id, r.phase, dict(r.attempts)) for _, r in dated[:limit]]

    def counts_by_phase(self) -> dict[str, int]:
        """`ledger_counts`."""
        with self._lock:
            return dict(Counter(c.row.phase for c in self._commits.values()))

    def backlog(self, window_s: float = DRAIN_WINDOW_S) -> CommitBacklog:
        """`ledger_backlog`: commits in flight, the oldest one's age and how many finished
        in `window_s`."""
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

    def llm_cost(self) -> LLMCost:
        """`ledger_llm_cost` and `ledger_llm_cost_by_phase`: what the registered commits
        cost, in total and per phase."""
        with self._lock:
            done = [
                (c.row.request, c.row.result)
                for c in self._commits.values()
                if c.row.phase == CommitPhase.REGISTERED.value and c.row.result is not None
            ]
        cost = LLMCost(commits=len(done))
        for request, result in done:
            stats = CommitStats.model_validate(_object((result or {}).get("stats")))
            messages = request.get("messages")
            cost.messages += len(messages) if isinstance(messages, list) else 0
            cost.llm_calls += stats.llm_calls
            cost.prompt_tokens += stats.llm_prompt_tokens
            cost.completion_tokens += stats.llm_completion_tokens
            for name, usage in stats.llm_by_phase.items():
                cost.by_phase.setdefault(name, LLMUsage()).add(usage)
        cost.by_phase = dict(sorted(cost.by_phase.items()))
        return cost

    def recent(self, limit: int = 20) -> list[RecentCommit]:
        """`ledger_recent`: the latest commits first."""
        with self._lock:
            rows = sorted(
                (c.row for c in self._commits.values()),
                key=lambda r: r.created_at or datetime.min.replace(tzinfo=UTC),
                reverse=True,
            )
            return [_recent(r) for r in rows[:limit]]


def _object(value: JsonValue) -> JsonObject:
    """`value` where it is a JSON object, else an empty one (a key the JSON lacks)."""
    return value if isinstance(value, dict) else {}


def _recent(row: LedgerRow) -> RecentCommit:
    assert row.created_at is not None and row.updated_at is not None
    return RecentCommit(
        commit_id=row.commit_id,
        account_id=row.account_id,
        user_id=row.user_id,
        session_id=row.session_id,
        phase=row.phase,
        status=row.status,
        error=row.error,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def _encode(done: Completion) -> tuple[Completion, str]:
    """`done` checked and copied as jsonb would have it, before anything is stored: its
    report and timings as JSON copies, and its payload's JSON text."""
    copied = done._replace(extractors=_json(done.extractors), timings=_json(done.timings))
    return copied, json.dumps(done.payload)


def _after(phase: str, other: str) -> bool:
    return PHASE_ORDER.index(phase) > PHASE_ORDER.index(other)
