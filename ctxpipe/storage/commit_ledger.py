"""The commit ledger: one row per commit id with its phase, per-extractor status, timings and
attempts, plus the write-once output of every phase (`commit_outputs`)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, NamedTuple, TypedDict, cast

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from pydantic import BaseModel, Field, JsonValue, computed_field

from ctxpipe.core.enums import CommitPhase
from ctxpipe.core.errors import StorageError
from ctxpipe.core.models import LLMUsage
from ctxpipe.storage.db import Database
from ctxpipe.storage.queries import Queries

PHASE_ORDER = [
    CommitPhase.ENQUEUED.value,
    CommitPhase.ARCHIVED.value,
    CommitPhase.EXTRACTED.value,
    CommitPhase.PLANNED.value,
    CommitPhase.WRITTEN.value,
    CommitPhase.REGISTERED.value,
]

# A JSON object as a jsonb column holds it: what the ledger stores and reads back. The ledger
# knows no phase's model; the steps dump theirs to this (`model_dump(mode="json")`) and parse
# what is read back (`ctxpipe.commit.outputs`).
JsonObject = dict[str, JsonValue]
# `timings`: milliseconds by phase ("archive_ms") and epoch seconds ("written_at")
Timings = dict[str, int | float]


class LedgerRow(BaseModel):
    commit_id: str
    account_id: str = ""
    user_id: str = ""
    agent_id: str = ""
    session_id: str = ""
    phase: str
    status: str | None = None
    extractors: dict[str, JsonObject] = Field(default_factory=dict)
    timings: Timings = Field(default_factory=dict)
    attempts: dict[str, int] = Field(default_factory=dict)
    error: str | None = None
    error_phase: str | None = None
    request: JsonObject = Field(default_factory=dict)
    result: JsonObject | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None


class StepState(NamedTuple):
    """What a step reads before it runs (`state`): one round trip."""

    request: JsonObject
    created_at: datetime
    phase: str
    outputs: dict[str, JsonObject]
    # the reading task's deliveries so far, this one included (0: not counted)
    deliveries: int = 0


class Completion(NamedTuple):
    """One phase output to store and the progress it makes (`complete_all`); the fields are
    `complete`'s arguments."""

    key: str
    payload: JsonObject
    phase: CommitPhase
    extractors: dict[str, JsonObject] | None = None
    timings: Timings | None = None
    extracted_when: int | None = None
    durable: bool = True
    """False: the statement commits without waiting for the WAL flush (see `_one`)."""


class RecentCommit(TypedDict):
    """A row of `recent`: a commit and where it stands."""

    commit_id: str
    account_id: str
    user_id: str
    session_id: str
    phase: str
    status: str | None
    error: str | None
    created_at: datetime
    updated_at: datetime


def _complete_params(
    commit_id: str, done: Completion, *, status: str | None = None, with_result: bool = False
) -> dict[str, object]:
    """The parameters of `ledger_complete` for one output."""
    return {
        "commit_id": commit_id,
        "phase_key": done.key,
        "payload": Jsonb(done.payload),
        "phase": done.phase.value,
        "status": status,
        "extractors": Jsonb(done.extractors or {}),
        "timings": Jsonb(done.timings or {}),
        "with_result": with_result,
        "extracted_when": done.extracted_when,
        "order": PHASE_ORDER,
    }


DRAIN_WINDOW_S = 60.0
_NO_FLUSH_WAIT = "SET LOCAL synchronous_commit TO OFF"


class CommitBacklog(BaseModel):
    """Commits accepted but not finished yet (read from the ledger, the durable record)."""

    in_flight: int = 0
    oldest_age_s: float | None = None
    finished_recently: int = 0  # commits registered or failed in the last `window_s`
    window_s: float = DRAIN_WINDOW_S
    max_pending: int = 0  # the back-pressure cap (0: none)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def drain_per_s(self) -> float:
        """Commits finished per second over the window (the rate the backlog drains at)."""
        return self.finished_recently / self.window_s if self.window_s > 0 else 0.0


class LLMCost(BaseModel):
    """LLM calls and tokens of every finished commit, in total and per phase, and per 100
    messages committed."""

    commits: int = 0
    messages: int = 0
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    by_phase: dict[str, LLMUsage] = Field(default_factory=dict)

    @property
    def calls_per_100_messages(self) -> float | None:
        return 100.0 * self.llm_calls / self.messages if self.messages else None

    @property
    def prompt_tokens_per_100_messages(self) -> float | None:
        return 100.0 * self.prompt_tokens / self.messages if self.messages else None


class CommitLedger:
    def __init__(self, db: Database, schema: str = "ctx") -> None:
        self._db = db
        self._q = Queries(schema)

    def create(
        self,
        commit_id: str,
        ctx: dict[str, str],
        request: JsonObject,
        *,
        max_pending: int = 0,
    ) -> bool:
        """Record a submitted commit; False if the id was already known (idempotent) or, with
        `max_pending` > 0, when that many commits are already in flight (nothing recorded)."""
        with self._db.connection() as conn:
            row = conn.execute(
                self._q["ledger_create"],
                {
                    "max_pending": max_pending,
                    "commit_id": commit_id,
                    "account_id": ctx.get("account_id", ""),
                    "user_id": ctx.get("user_id", ""),
                    "agent_id": ctx.get("agent_id", ""),
                    "session_id": ctx.get("session_id", ""),
                    "request": Jsonb(request),
                },
            ).fetchone()
        return row is not None

    def get(self, commit_id: str) -> LedgerRow | None:
        with self._db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            row = cur.execute(self._q["ledger_get"], {"commit_id": commit_id}).fetchone()
        return LedgerRow.model_validate(row) if row else None

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
        """Move forward to `phase` (never backwards, never out of `failed`)."""
        with self._db.connection() as conn:
            conn.execute(
                self._q["ledger_advance"],
                {
                    "commit_id": commit_id,
                    "phase": phase.value,
                    "status": status,
                    "extractors": Jsonb(extractors or {}),
                    "timings": Jsonb(timings or {}),
                    "result": Jsonb(result) if result is not None else None,
                    "order": PHASE_ORDER,
                },
            )

    def fail(self, commit_id: str, phase: str, error: str) -> None:
        with self._db.connection() as conn:
            conn.execute(
                self._q["ledger_fail"],
                {"commit_id": commit_id, "error_phase": phase, "error": error[:2000]},
            )

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
        """One statement (one round trip, one transaction): store a phase output (the first
        writer wins) and advance the phase. `extracted_when`: with an extractor's report, move
        on to `extracted` once that many extractors have reported. `durable=False`: do not wait
        for the flush to disk (`_one`). Returns the stored output."""
        done = Completion(key, payload, phase, extractors, timings, extracted_when, durable)
        params = _complete_params(commit_id, done, status=status, with_result=with_result)
        rows = self._one(self._q["ledger_complete"], params, durable)
        row = rows[0] if rows else None
        if row is not None and row[0] is not None:
            return dict(row[0])
        # a concurrent run of this step stored its output after our statement began: read it
        # (and record it as the result, which our statement could not see)
        with self._db.connection() as conn:
            stored = self._save(conn, commit_id, key, payload)
            if with_result:
                conn.execute(
                    self._q["ledger_advance"],
                    {
                        **params,
                        "extractors": Jsonb({}),
                        "timings": Jsonb({}),
                        "result": Jsonb(stored),
                    },
                )
        return stored

    def complete_all(self, commit_id: str, completions: list[Completion]) -> list[JsonObject]:
        """Several `complete`s in one transaction, sent as one pipeline: one round trip and one
        flush to disk for all of them (a commit's archive and its four extractors' outputs).
        All are stored or none; durable unless every one says `durable=False`. Returns the
        stored outputs, in order."""
        if not completions:
            return []
        params = [_complete_params(commit_id, c) for c in completions]
        with self._db.connection() as conn:
            if not any(c.durable for c in completions):
                conn.execute(_NO_FLUSH_WAIT)
            with conn.pipeline():
                cursors = [conn.execute(self._q["ledger_complete"], p) for p in params]
            rows = [cur.fetchone() for cur in cursors]
            return [
                dict(row[0])
                if row is not None and row[0] is not None
                # a concurrent run of this step stored its output first: that one stands
                else self._save(conn, commit_id, c.key, c.payload)
                for c, row in zip(completions, rows, strict=True)
            ]

    def state(
        self,
        commit_id: str,
        keys: list[str],
        delivery: str | None = None,
        done: str | None = None,
    ) -> StepState | None:
        """One round trip: the commit's request, creation time, current phase and the listed
        phase outputs that exist. With `delivery` (a task and its retry number, "plan#0") the
        same statement counts this delivery in `attempts` and returns the count, unless the
        step already finished (its output `done` exists: then nothing is written and the
        count is 0). The count is a guard against redelivery loops, not a record: it does not
        wait for the flush to disk (`_one`). None when the commit id is unknown."""
        query = "ledger_state" if delivery is None else "ledger_state_deliver"
        params = {"commit_id": commit_id, "keys": keys, "delivery": delivery, "done": done or ""}
        rows = self._one(self._q[query], params, durable=delivery is None)
        if not rows:
            return None
        request, created_at, phase, deliveries = rows[0][:4]
        outputs = {k: dict(p) for *_, k, p in rows if k is not None}
        return StepState(dict(request), created_at, phase, outputs, int(deliveries or 0))

    def _one(self, query: str, params: Mapping[str, object], durable: bool) -> list[Any]:
        """One statement in its own transaction, in one round trip; its rows. Durable: the
        commit waits for its WAL record to reach the disk. Not durable: BEGIN, `synchronous_commit`
        off, the statement and COMMIT go out as one pipeline, and the commit does not wait for
        the flush: visible to every other session at once, but a crash of PostgreSQL itself
        (not a stop) may lose the last fraction of a second of such commits — never one
        followed by a durable commit, which flushes everything before it. The steps store this
        way only what a later step recomputes when it is missing (the archive's and the
        extractors' outputs, delivery counts) and durably what anything outside PostgreSQL
        follows (the plan, which the write applies to the FS; the write; the result)."""
        with self._db.autocommit() as conn:
            if durable:
                return conn.execute(query, params).fetchall()
            try:
                with conn.pipeline():
                    conn.execute("BEGIN")
                    conn.execute(_NO_FLUSH_WAIT)
                    cur = conn.execute(query, params)
                    conn.execute("COMMIT")
            except BaseException:
                if conn.info.transaction_status != TransactionStatus.IDLE and not conn.closed:
                    conn.execute("ROLLBACK")  # the pipeline stopped at the error, before COMMIT
                raise
            return cur.fetchall()

    def bump_attempt(self, commit_id: str, key: str) -> int:
        with self._db.connection() as conn:
            row = conn.execute(
                self._q["ledger_bump_attempt"], {"commit_id": commit_id, "key": key}
            ).fetchone()
        return int(row[0]) if row else 0

    def touch(self, commit_id: str) -> None:
        with self._db.connection() as conn:
            conn.execute(self._q["ledger_touch"], {"commit_id": commit_id})

    def save_output(self, commit_id: str, key: str, payload: JsonObject) -> JsonObject:
        """Store a phase output once; returns the stored one (the first writer wins)."""
        with self._db.connection() as conn:
            return self._save(conn, commit_id, key, payload)

    def _save(
        self, conn: psycopg.Connection[Any], commit_id: str, key: str, payload: JsonObject
    ) -> JsonObject:
        row = conn.execute(
            self._q["output_save_get"],
            {"commit_id": commit_id, "phase_key": key, "payload": Jsonb(payload)},
        ).fetchone()
        if row is None:  # a concurrent run inserted it after this statement's snapshot
            row = conn.execute(
                self._q["output_get"], {"commit_id": commit_id, "phase_key": key}
            ).fetchone()
        if row is None:
            raise StorageError(f"output {key!r} of commit {commit_id} vanished")
        return dict(row[0])

    def load_output(self, commit_id: str, key: str) -> JsonObject | None:
        with self._db.connection() as conn:
            row = conn.execute(
                self._q["output_get"], {"commit_id": commit_id, "phase_key": key}
            ).fetchone()
        return dict(row[0]) if row else None

    def load_outputs(self, commit_id: str, prefix: str) -> dict[str, JsonObject]:
        with self._db.connection() as conn:
            rows = conn.execute(
                self._q["output_prefix"], {"commit_id": commit_id, "prefix": prefix + "%"}
            ).fetchall()
        return {k: dict(v) for k, v in rows}

    def stuck(self, older_than_s: float, limit: int = 100) -> list[tuple[str, str, dict]]:
        with self._db.connection() as conn:
            rows = conn.execute(
                self._q["ledger_stuck"], {"older_than_s": older_than_s, "limit": limit}
            ).fetchall()
        return [(r[0], r[1], dict(r[2] or {})) for r in rows]

    def accepted_before(self, age_s: float, limit: int = 100) -> list[tuple[str, str, dict]]:
        """Commits in flight that were accepted more than `age_s` seconds ago."""
        with self._db.connection() as conn:
            rows = conn.execute(
                self._q["ledger_accepted_before"], {"age_s": age_s, "limit": limit}
            ).fetchall()
        return [(r[0], r[1], dict(r[2] or {})) for r in rows]

    def counts_by_phase(self) -> dict[str, int]:
        with self._db.connection() as conn:
            return {p: int(n) for p, n in conn.execute(self._q["ledger_counts"]).fetchall()}

    def backlog(self, window_s: float = DRAIN_WINDOW_S) -> CommitBacklog:
        """Commits in flight, the oldest one's age and how many finished in `window_s`."""
        with self._db.connection() as conn:
            row = conn.execute(self._q["ledger_backlog"], {"window_s": window_s}).fetchone()
        assert row is not None
        return CommitBacklog(
            in_flight=int(row[0]),
            oldest_age_s=row[1],
            finished_recently=int(row[2]),
            window_s=window_s,
        )

    def llm_cost(self) -> LLMCost:
        """What the registered commits cost, in total and per phase (one snapshot)."""
        with self._db.connection() as conn:  # one transaction: both sums see one snapshot
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            row = conn.execute(self._q["ledger_llm_cost"]).fetchone()
            phases = conn.execute(self._q["ledger_llm_cost_by_phase"]).fetchall()
        assert row is not None
        commits, messages, calls, prompt, completion = (int(v) for v in row)
        return LLMCost(
            commits=commits,
            messages=messages,
            llm_calls=calls,
            prompt_tokens=prompt,
            completion_tokens=completion,
            by_phase={
                str(k): LLMUsage(
                    calls=int(n), prompt_tokens=int(p), completion_tokens=int(c), retries=int(r)
                )
                for k, n, p, c, r in phases
            },
        )

    def recent(self, limit: int = 20) -> list[RecentCommit]:
        with self._db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(self._q["ledger_recent"], {"limit": limit}).fetchall()
        return [cast(RecentCommit, row) for row in rows]
