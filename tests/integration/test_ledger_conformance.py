"""One contract, one suite: every rule of the commit ledger, run against the in-memory ledger
(the in-process path) and the PostgreSQL ledger (the workers' path).

`InMemoryLedger` is the twin of the named queries in `sql/queries/ledger.sql`; `CommitLedger`
runs them. Each test here takes the `ledger` fixture and runs once per implementation
(`-k memory` needs no server). The steps run on components without a database (the FS, the
rules LLM, an outbox in a dict), so the ledger is the only thing that differs between the two
runs. What only one implementation has stays with it: the SQL ledger's outbox rows in
test_commit_steps.py, the in-process coordinator in tests/unit/commit/test_steps_in_memory.py.
"""

from __future__ import annotations

import inspect
import re
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
import pytest
from old_outputs import OLD_EXTRACTORS, OLD_MESSAGE, OLD_OUTPUTS
from pydantic import BaseModel

from ctxpipe.commit import steps
from ctxpipe.commit.backlog import DEFAULT_RETRY_AFTER_S
from ctxpipe.commit.components import CommitComponents
from ctxpipe.commit.ledger import LedgerPort
from ctxpipe.commit.memory_ledger import InMemoryLedger
from ctxpipe.commit.outputs import EXTRACT_PREFIX, ExtractorProgress, PhaseOutputs
from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.commit.recovery import CommitReaper
from ctxpipe.core.config import LimitsConfig, Settings
from ctxpipe.core.enums import CommitPhase
from ctxpipe.core.errors import BacklogFullError, CommitError, LLMError
from ctxpipe.core.models import OutboxEvent
from ctxpipe.core.session import InputLimitError, RequestContext
from ctxpipe.extraction.extractors import EXTRACTOR_NAMES
from ctxpipe.providers.base import run_sync
from ctxpipe.providers.rules import RulesLLM
from ctxpipe.runtime import Runtime
from ctxpipe.storage.commit_ledger import CommitLedger, Completion
from ctxpipe.storage.migrations import default_sql_dir

Ledger = InMemoryLedger | CommitLedger
MakeComponents = Callable[..., CommitComponents]

# what each refuses an output of a commit it does not know with (no row: the foreign key)
UNKNOWN_COMMIT = (KeyError, psycopg.errors.ForeignKeyViolation)
CTX = {"account_id": "acme", "user_id": "rita", "agent_id": "a", "session_id": "s9"}
MESSAGES = [
    {"id": "m1", "role": "user", "content": "I'm a nurse in Porto and I love surfing."},
    {"id": "m2", "role": "assistant", "content": "Surfing in Porto sounds wonderful."},
    {"id": "m3", "role": "user", "content": "I always surf before my night shifts."},
]


@pytest.fixture(params=["memory", "postgresql"])
def ledger(request: pytest.FixtureRequest) -> Iterator[Ledger]:
    """Each implementation of the ledger, empty (the PostgreSQL one on the suite's migrated
    test database, its tables truncated)."""
    if request.param == "memory":
        yield InMemoryLedger()
    else:
        request.getfixturevalue("clean_db")
        yield CommitLedger(request.getfixturevalue("database"))


class DictOutbox:
    """Registered events by id; a repeated event id is ignored, as by the outbox table."""

    def __init__(self) -> None:
        self.events: dict[str, OutboxEvent] = {}

    def append_batch(self, events: list[OutboxEvent]) -> list[OutboxEvent]:
        new = [e for e in events if e.event_id not in self.events]
        self.events.update((e.event_id, e) for e in new)
        return new


class ScriptedLLM:
    """The rules LLM, except that the prompt `fail_on` raises `error`."""

    name = "scripted"

    def __init__(self, error: Exception, fail_on: str = "compression.archive_summary") -> None:
        self.error = error
        self.fail_on = fail_on
        self.inner = RulesLLM()

    async def complete_json(self, prompt_id, variables, schema, ctx=None, usage=None):  # type: ignore[no-untyped-def]
        if prompt_id == self.fail_on:
            raise self.error
        return await self.inner.complete_json(prompt_id, variables, schema, ctx, usage)

    def complete_json_sync(self, *a: Any, **k: Any) -> Any:
        return run_sync(self.complete_json(*a, **k))


@pytest.fixture
def make_components(make_settings: Callable[..., Settings]) -> MakeComponents:
    """Commit components on their own FS, without a database: `make(llm=None)`."""
    count = iter(range(100))

    def make(llm: Any = None) -> CommitComponents:
        settings = make_settings(db=False, redis=False)
        settings = settings.model_copy(update={"fs_root": settings.fs_root / str(next(count))})
        comp = Runtime(settings, llm=llm or RulesLLM(), use_database=False).components()
        comp.outbox = DictOutbox()  # type: ignore[assignment]
        return comp

    return make


def make_req(commit_id: str, session: str = "s9", **ctx: str) -> CommitRequest:
    rc = RequestContext(**{**CTX, "session_id": session, **ctx})
    return CommitRequest(commit_id=commit_id, ctx=rc, messages=MESSAGES)  # type: ignore[arg-type]


def row_of(ledger: Ledger, commit_id: str) -> Any:
    row = ledger.get(commit_id)
    assert row is not None, commit_id
    return row


def run_all(c: CommitComponents, ledger: Ledger, commit_id: str) -> list[BaseModel]:
    out = [steps.archive_step(c, ledger, commit_id)]
    out += [steps.extract_step(c, ledger, commit_id, n) for n in EXTRACTOR_NAMES]
    out += [
        steps.plan_step(c, ledger, commit_id),
        steps.write_step(c, ledger, commit_id),
        steps.register_step(c, ledger, commit_id),
    ]
    return out


def files_of(c: CommitComponents) -> dict[str, bytes]:
    root = c.settings.fs_root
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".locks" not in p.parts and p.name != ".lock"
    }


# -- the contract itself ------------------------------------------------------------------------


def public_methods(cls: type) -> dict[str, Any]:
    return {n: v for n, v in vars(cls).items() if inspect.isfunction(v) and n[0] != "_"}


def test_both_ledgers_have_the_ports_signatures() -> None:
    members = public_methods(LedgerPort)
    assert len(members) == 12
    for name in members:
        port = inspect.signature(getattr(LedgerPort, name))
        for impl in (CommitLedger, InMemoryLedger):
            assert inspect.signature(getattr(impl, name)) == port, f"{impl.__name__}.{name}"


def test_every_method_of_the_sql_ledger_has_its_in_memory_twin() -> None:
    """The sweeper, the reaper, status and the CLI read the ledger beyond the steps' port:
    the twin answers all of it, with the same signatures."""
    sql, twin = public_methods(CommitLedger), public_methods(InMemoryLedger)
    assert set(sql) == set(twin)
    for name in sql:
        assert inspect.signature(sql[name]) == inspect.signature(twin[name]), name


def test_every_named_ledger_query_has_its_in_memory_twin() -> None:
    text = (default_sql_dir() / "queries" / "ledger.sql").read_text(encoding="utf-8")
    queries = re.findall(r"^--\s*name:\s*(\w+)\s*$", text, re.M)
    assert len(queries) > 15
    docs = " ".join(inspect.getdoc(m) or "" for m in public_methods(InMemoryLedger).values())
    named = set(re.findall(r"`(\w+)`", docs))
    assert set(queries) <= named, sorted(set(queries) - named)


# -- the ledger's rules -------------------------------------------------------------------------


def test_a_commit_is_recorded_once_by_its_id(ledger: Ledger) -> None:
    assert ledger.create("c", CTX, {"x": 1}) and not ledger.create("c", CTX, {"x": 2})
    row = row_of(ledger, "c")
    assert (row.account_id, row.user_id, row.agent_id, row.session_id) == tuple(CTX.values())
    assert row.phase == "enqueued" and row.request == {"x": 1}  # the first request stands
    assert row.status is None and row.result is None and row.error is None
    assert row.extractors == row.timings == row.attempts == {}
    assert row.created_at is not None and row.updated_at is not None
    assert ledger.get("nope") is None and ledger.state("nope", []) is None


def test_the_phase_only_moves_forward(ledger: Ledger) -> None:
    ledger.create("c", CTX, {})
    ledger.advance("c", CommitPhase.ARCHIVED, timings={"archive_ms": 1}, status="running")
    ledger.advance("c", CommitPhase.PLANNED, timings={"plan_ms": 3}, extractors={"a": {"n": 1}})
    ledger.advance("c", CommitPhase.ARCHIVED, timings={"late": 1})  # a late, redelivered step
    row = row_of(ledger, "c")
    assert row.phase == "planned" and row.status == "running"  # status kept when not given
    assert row.timings == {"archive_ms": 1, "plan_ms": 3} and row.extractors == {"a": {"n": 1}}
    ledger.advance("c", CommitPhase.PLANNED, extractors={"b": {}}, result={"r": 1})  # the same
    row = row_of(ledger, "c")
    assert row.phase == "planned" and set(row.extractors) == {"a", "b"}
    assert row.result == {"r": 1}
    ledger.advance("nope", CommitPhase.WRITTEN)  # an unknown commit: nothing happens
    assert ledger.get("nope") is None


def test_failed_is_final_and_registered_is_never_failed(ledger: Ledger) -> None:
    ledger.create("c", CTX, {})
    ledger.advance("c", CommitPhase.PLANNED)
    ledger.fail("c", "write", "disk full " * 300)
    ledger.advance("c", CommitPhase.WRITTEN)  # never out of failed
    ledger.complete("c", "write", {"w": 1}, CommitPhase.WRITTEN)
    row = row_of(ledger, "c")
    assert (row.phase, row.status, row.error_phase) == ("failed", "failed", "write")
    assert row.error == ("disk full " * 300)[:2000]
    assert ledger.load_output("c", "write") == {"w": 1}  # stored, but no progress
    ledger.create("d", CTX, {})
    ledger.advance("d", CommitPhase.REGISTERED, status="success", result={"ok": True})
    ledger.fail("d", "register", "too late")  # a registered commit stays registered
    row = row_of(ledger, "d")
    assert (row.phase, row.status, row.result, row.error) == (
        "registered",
        "success",
        {"ok": True},
        None,
    )
    ledger.fail("nope", "write", "x")
    assert ledger.get("nope") is None


def test_the_first_stored_output_wins(ledger: Ledger) -> None:
    ledger.create("c", CTX, {})
    first = ledger.complete("c", "extract:a", {"v": 1}, CommitPhase.ARCHIVED)
    again = ledger.complete("c", "extract:a", {"v": 2}, CommitPhase.ARCHIVED)
    assert first == again == {"v": 1}
    assert ledger.save_output("c", "extract:b", {"v": 3}) == {"v": 3}
    assert ledger.save_output("c", "extract:b", {"v": 4}) == {"v": 3}
    ledger.save_output("c", "plan", {"p": [1, 2]})
    assert ledger.load_output("c", "extract:a") == {"v": 1}
    assert ledger.load_output("c", "write") is None and ledger.load_output("nope", "plan") is None
    assert ledger.load_outputs("c", "extract:") == {"extract:a": {"v": 1}, "extract:b": {"v": 3}}
    assert ledger.load_outputs("nope", "extract:") == {}


def test_what_is_stored_is_a_json_copy(ledger: Ledger) -> None:
    """A caller's object is never the stored one: changing it, or what a read returned,
    changes nothing stored; what is read back is JSON (a tuple comes back a list)."""
    request: dict[str, Any] = {"messages": [{"id": "m1"}]}
    ledger.create("c", CTX, request)
    request["messages"].append({"id": "m2"})
    payload: dict[str, Any] = {"items": (1, 2)}
    stored = ledger.complete("c", "plan", payload, CommitPhase.PLANNED, with_result=True)
    assert stored == {"items": [1, 2]}
    payload["items"] = ()
    stored["items"].append(3)
    ledger.load_output("c", "plan")["items"].append(4)  # type: ignore[index]
    state = ledger.state("c", ["plan"])
    assert state is not None and state.outputs == {"plan": {"items": [1, 2]}}
    assert state.request == {"messages": [{"id": "m1"}]}
    state.request["messages"].clear()
    row = row_of(ledger, "c")
    assert row.request == {"messages": [{"id": "m1"}]} and row.result == {"items": [1, 2]}


def test_an_output_of_an_unknown_commit_is_refused(ledger: Ledger) -> None:
    with pytest.raises(UNKNOWN_COMMIT):
        ledger.save_output("nope", "plan", {})
    with pytest.raises(UNKNOWN_COMMIT):
        ledger.complete("nope", "plan", {}, CommitPhase.PLANNED)
    with pytest.raises(UNKNOWN_COMMIT):
        ledger.complete_all("nope", [Completion("plan", {}, CommitPhase.PLANNED)])
    assert ledger.get("nope") is None and ledger.load_output("nope", "plan") is None


def test_state_reads_the_request_phase_and_the_listed_outputs(ledger: Ledger) -> None:
    ledger.create("c", CTX, {"x": 1})
    ledger.advance("c", CommitPhase.PLANNED)
    ledger.save_output("c", "extract:b", {"v": 3})
    ledger.save_output("c", "archive", {"a": 1})
    state = ledger.state("c", ["extract:b", "plan"])
    assert state is not None and state.deliveries == 0  # no delivery given: none counted
    assert state.request == {"x": 1} and state.phase == "planned"
    assert state.outputs == {"extract:b": {"v": 3}}
    assert state.created_at == row_of(ledger, "c").created_at
    assert row_of(ledger, "c").attempts == {}


def test_state_counts_each_delivery_per_task_and_retry(ledger: Ledger) -> None:
    ledger.create("c", CTX, {})
    before = row_of(ledger, "c").updated_at
    counts = [ledger.state("c", ["archive"], "archive#0") for _ in range(3)]
    assert [s.deliveries for s in counts if s is not None] == [1, 2, 3]
    retried = ledger.state("c", [], "archive#1")  # a retry is a new message: its own count
    assert retried is not None and retried.deliveries == 1
    assert ledger.state("nope", [], "archive#0") is None
    row = row_of(ledger, "c")
    assert row.attempts == {"archive#0": 3, "archive#1": 1}
    assert row.phase == "enqueued" and row.updated_at == before  # counting is no progress
    ledger.save_output("c", "archive", {"a": 1})
    finished = ledger.state("c", ["archive"], "archive#0", done="archive")
    assert finished is not None and finished.deliveries == 0  # a finished step's: not counted
    assert finished.outputs == {"archive": {"a": 1}}
    assert row_of(ledger, "c").attempts == {"archive#0": 3, "archive#1": 1}


def test_the_last_extractor_to_report_moves_the_commit_to_extracted(ledger: Ledger) -> None:
    ledger.create("c", CTX, {})
    ledger.advance("c", CommitPhase.ARCHIVED)
    for i, name in enumerate(("a", "b", "c")):
        ledger.complete(
            "c",
            f"extract:{name}",
            {},
            CommitPhase.ARCHIVED,
            extractors={name: {"status": "ok"}},
            extracted_when=3,
        )
        assert row_of(ledger, "c").phase == ("extracted" if i == 2 else "archived")
    ledger.advance("c", CommitPhase.PLANNED)
    ledger.complete(  # a late duplicate never moves the phase back
        "c", "extract:a", {}, CommitPhase.ARCHIVED, extractors={"a": {}}, extracted_when=3
    )
    assert row_of(ledger, "c").phase == "planned"


def test_extractors_finishing_at_once_move_the_commit_to_extracted(ledger: Ledger) -> None:
    """Each extractor's output and report go in one statement (one lock); the one that
    completes the set moves the commit on, whichever it is, never missed by a race."""
    for round_ in range(5):
        cid = f"race-{round_}"
        assert ledger.create(cid, CTX, {})
        ledger.advance(cid, CommitPhase.ARCHIVED)

        def report(name: str, cid: str = cid) -> dict[str, Any]:
            return ledger.complete(
                cid,
                f"extract:{name}",
                {"name": name},
                CommitPhase.ARCHIVED,
                extractors={name: {"status": "ok"}},
                extracted_when=len(EXTRACTOR_NAMES),
            )

        with ThreadPoolExecutor(len(EXTRACTOR_NAMES)) as pool:
            stored = list(pool.map(report, EXTRACTOR_NAMES))
        assert stored == [{"name": n} for n in EXTRACTOR_NAMES]
        row = row_of(ledger, cid)
        assert row.phase == "extracted" and set(row.extractors) == set(EXTRACTOR_NAMES)
    again = ledger.complete("race-0", "extract:profile", {"name": "x"}, CommitPhase.ARCHIVED)
    assert again == {"name": "profile"}  # the first stored output wins
    assert row_of(ledger, "race-0").phase == "extracted"  # and the phase never goes back


def test_a_completion_with_result_records_the_stored_output(ledger: Ledger) -> None:
    ledger.create("c", CTX, {})
    ledger.advance("c", CommitPhase.WRITTEN)
    done = ledger.complete(
        "c",
        "register",
        {"status": "success"},
        CommitPhase.REGISTERED,
        status="success",
        timings={"register_ms": 2},
        with_result=True,
    )
    again = ledger.complete(
        "c", "register", {"status": "other"}, CommitPhase.REGISTERED, with_result=True
    )
    row = row_of(ledger, "c")
    assert done == again == row.result == {"status": "success"}
    assert (row.phase, row.status) == ("registered", "success")
    assert row.timings == {"register_ms": 2}


def test_outputs_stored_together_are_stored_all_or_none(ledger: Ledger) -> None:
    """`complete_all` stores a step's outputs in one transaction: all of them, advancing the
    commit as each would; an output stored first stands; and when one cannot be stored (it
    is not JSON) none of them is."""
    assert ledger.complete_all("c", []) == []
    ledger.create("all", CTX, {})
    ledger.complete("all", "extract:profile", {"first": True}, CommitPhase.ARCHIVED)
    done = [Completion("archive", {"a": 1}, CommitPhase.ARCHIVED, timings={"archive_ms": 3})]
    done += [
        Completion(
            f"extract:{n}",
            {"name": n},
            CommitPhase.ARCHIVED,
            extractors={n: {"status": "ok"}},
            extracted_when=len(EXTRACTOR_NAMES),
        )
        for n in EXTRACTOR_NAMES
    ]
    stored = ledger.complete_all("all", done)
    assert stored[0] == {"a": 1}
    assert stored[1:] == [
        {"first": True} if n == "profile" else {"name": n} for n in EXTRACTOR_NAMES
    ]
    row = row_of(ledger, "all")
    assert row.phase == "extracted" and row.timings["archive_ms"] == 3
    assert set(row.extractors) == set(EXTRACTOR_NAMES)

    ledger.create("none", CTX, {})
    unstorable = Completion("extract:profile", {"tags": {"a", "b"}}, CommitPhase.ARCHIVED)
    with pytest.raises(TypeError):  # a set is not JSON
        ledger.complete_all(
            "none", [Completion("archive", {"a": 1}, CommitPhase.ARCHIVED), unstorable]
        )
    assert ledger.load_output("none", "archive") is None
    assert row_of(ledger, "none").phase == "enqueued"


def test_bumping_an_attempt_counts_per_key_and_is_no_progress(ledger: Ledger) -> None:
    ledger.create("c", CTX, {})
    before = row_of(ledger, "c").updated_at
    assert [ledger.bump_attempt("c", "write") for _ in range(2)] == [1, 2]
    assert ledger.bump_attempt("c", "reap") == 1
    assert ledger.bump_attempt("nope", "write") == 0
    row = row_of(ledger, "c")
    assert row.attempts == {"write": 2, "reap": 1} and row.updated_at == before
    ledger.fail("c", "write", "disk full")
    assert ledger.bump_attempt("c", "write") == 3  # counted on a failed commit too


def test_progress_resets_the_sweepers_count(ledger: Ledger) -> None:
    ledger.create("c", CTX, {})
    assert ledger.bump_attempt("c", "sweep") == 1
    ledger.advance("c", CommitPhase.ENQUEUED)  # no progress: count kept
    assert row_of(ledger, "c").attempts.get("sweep") == 1
    ledger.advance("c", CommitPhase.ARCHIVED)  # progress: count reset
    assert "sweep" not in row_of(ledger, "c").attempts
    ledger.bump_attempt("c", "sweep")
    ledger.bump_attempt("c", "reap")
    ledger.complete("c", "archive", {}, CommitPhase.ARCHIVED)  # no progress either
    assert row_of(ledger, "c").attempts == {"sweep": 1, "reap": 1}
    ledger.complete("c", "plan", {}, CommitPhase.PLANNED)  # progress, by a completion
    assert row_of(ledger, "c").attempts == {"reap": 1}


def test_touch_moves_the_time_of_the_last_progress_only(ledger: Ledger) -> None:
    ledger.create("c", CTX, {})
    before = row_of(ledger, "c")
    time.sleep(0.01)
    ledger.touch("c")
    ledger.touch("nope")
    after = row_of(ledger, "c")
    assert after.updated_at > before.updated_at
    assert after.model_dump(exclude={"updated_at"}) == before.model_dump(exclude={"updated_at"})


def test_stuck_commits_are_those_in_flight_without_progress_longest_first(
    ledger: Ledger,
) -> None:
    for cid in ("a", "b", "c", "done", "failed"):
        ledger.create(cid, CTX, {})
        time.sleep(0.01)
    ledger.advance("done", CommitPhase.REGISTERED)
    ledger.fail("failed", "archive", "boom")
    ledger.bump_attempt("b", "sweep")
    ledger.touch("a")  # progress: now the most recent
    assert ledger.stuck(3600) == []
    assert ledger.stuck(0) == [
        ("b", "enqueued", {"sweep": 1}),
        ("c", "enqueued", {}),
        ("a", "enqueued", {}),
    ]
    assert [c for c, _, _ in ledger.stuck(0, limit=1)] == ["b"]


def test_commits_accepted_before_an_age_are_those_in_flight_oldest_first(
    ledger: Ledger,
) -> None:
    for cid in ("a", "b", "done"):
        ledger.create(cid, CTX, {})
        time.sleep(0.01)
    ledger.advance("done", CommitPhase.REGISTERED)
    ledger.touch("a")  # progress does not change when it was accepted
    ledger.advance("b", CommitPhase.ARCHIVED)
    ledger.bump_attempt("b", "reap")
    assert ledger.accepted_before(3600) == []
    assert ledger.accepted_before(0) == [("a", "enqueued", {}), ("b", "archived", {"reap": 1})]
    assert ledger.accepted_before(0, limit=1) == [("a", "enqueued", {})]
    time.sleep(0.5)
    ledger.create("new", CTX, {})
    assert [c for c, _, _ in ledger.accepted_before(0.25)] == ["a", "b"]


def test_counts_by_phase_and_the_most_recent_commits(ledger: Ledger) -> None:
    assert ledger.counts_by_phase() == {} and ledger.recent() == []
    for cid in ("a", "b", "c"):
        ledger.create(cid, {**CTX, "session_id": cid}, {})
        time.sleep(0.01)
    ledger.advance("a", CommitPhase.REGISTERED, status="success")
    ledger.fail("b", "archive", "boom")
    assert ledger.counts_by_phase() == {"registered": 1, "failed": 1, "enqueued": 1}
    recent = ledger.recent(2)
    assert [r["commit_id"] for r in recent] == ["c", "b"]
    assert set(recent[0]) == {
        "commit_id",
        "account_id",
        "user_id",
        "session_id",
        "phase",
        "status",
        "error",
        "created_at",
        "updated_at",
    }
    assert (recent[1]["phase"], recent[1]["error"], recent[1]["session_id"]) == (
        "failed",
        "boom",
        "b",
    )
    assert recent[0]["created_at"] == row_of(ledger, "c").created_at
    assert [r["commit_id"] for r in ledger.recent()] == ["c", "b", "a"]


def test_the_backlog_counts_commits_in_flight_and_those_finished_recently(
    ledger: Ledger,
) -> None:
    empty = ledger.backlog()
    assert (empty.in_flight, empty.oldest_age_s, empty.finished_recently) == (0, None, 0)
    for i in range(4):
        ledger.create(f"c{i}", CTX, {})
    time.sleep(0.05)
    ledger.advance("c0", CommitPhase.REGISTERED)
    ledger.fail("c1", "archive", "boom")
    ledger.advance("c2", CommitPhase.PLANNED)
    b = ledger.backlog()
    assert b.in_flight == 2 and b.finished_recently == 2 and b.window_s == 60.0
    assert b.oldest_age_s is not None and 0.05 <= b.oldest_age_s < 60
    assert b.drain_per_s == pytest.approx(2 / 60)
    time.sleep(0.02)
    assert ledger.backlog(window_s=0.01).finished_recently == 0  # finished before the window


def test_a_new_commit_over_the_cap_is_not_recorded(ledger: Ledger) -> None:
    assert ledger.create("c1", CTX, {}, max_pending=2)
    assert ledger.create("c2", CTX, {}, max_pending=2)
    assert not ledger.create("c3", CTX, {}, max_pending=2)
    assert ledger.get("c3") is None
    assert not ledger.create("c1", CTX, {}, max_pending=2)  # known: not recorded again
    ledger.fail("c1", "archive", "boom")  # a finished commit frees its place
    assert ledger.create("c3", CTX, {}, max_pending=2)
    assert all(ledger.create(f"d{i}", CTX, {}, max_pending=0) for i in range(5))  # no cap


def test_what_the_registered_commits_cost(ledger: Ledger) -> None:
    def stats(calls: int, prompt: int, by_phase: dict[str, dict[str, int]]) -> dict[str, Any]:
        return {
            "stats": {
                "llm_calls": calls,
                "llm_prompt_tokens": prompt,
                "llm_completion_tokens": calls * 10,
                "llm_by_phase": by_phase,
            }
        }

    empty = ledger.llm_cost()
    assert (empty.commits, empty.messages, empty.llm_calls, empty.by_phase) == (0, 0, 0, {})
    ledger.create("a", CTX, {"messages": [{}, {}, {}]})
    ledger.create("b", CTX, {"messages": [{}]})
    ledger.create("running", CTX, {"messages": [{}]})
    ledger.create("no-result", CTX, {"messages": [{}]})
    archive = {"calls": 1, "prompt_tokens": 100, "completion_tokens": 10, "retries": 1}
    plan = {"calls": 2, "prompt_tokens": 50, "completion_tokens": 20, "retries": 0}
    ledger.advance(
        "a", CommitPhase.REGISTERED, result=stats(3, 150, {"archive": archive, "plan": plan})
    )
    ledger.advance("b", CommitPhase.REGISTERED, result=stats(1, 100, {"archive": archive}))
    ledger.advance("running", CommitPhase.WRITTEN, result=stats(9, 900, {"plan": plan}))
    ledger.advance("no-result", CommitPhase.REGISTERED)
    cost = ledger.llm_cost()
    assert (cost.commits, cost.messages, cost.llm_calls) == (2, 4, 4)
    assert (cost.prompt_tokens, cost.completion_tokens) == (250, 40)
    assert list(cost.by_phase) == ["archive", "plan"]
    # stats written before the structured-output counters read back with them at zero
    zero = {"repaired": 0, "retried": 0, "failed": 0}
    assert cost.by_phase["archive"].model_dump() == {
        "calls": 2,
        "prompt_tokens": 200,
        "completion_tokens": 20,
        "retries": 2,
        **zero,
    }
    assert cost.by_phase["plan"].model_dump() == {**plan, **zero}
    assert cost.calls_per_100_messages == 100.0


# -- the steps on the ledger --------------------------------------------------------------------


def test_steps_run_once_and_replay_their_stored_output(
    ledger: Ledger, make_components: MakeComponents
) -> None:
    c = make_components()
    req = make_req("steps-1")
    assert steps.submit(ledger, req) and not steps.submit(ledger, req)
    outputs = [steps.archive_step(c, ledger, req.commit_id)]
    outputs += [steps.extract_step(c, ledger, req.commit_id, n) for n in EXTRACTOR_NAMES]
    assert row_of(ledger, req.commit_id).phase == "extracted"
    outputs += [
        steps.plan_step(c, ledger, req.commit_id),
        steps.write_step(c, ledger, req.commit_id),
        steps.register_step(c, ledger, req.commit_id),
    ]
    row = row_of(ledger, req.commit_id)
    assert row.phase == "registered" and row.status == "success"
    assert set(row.extractors) == set(EXTRACTOR_NAMES)
    assert {"archive_ms", "plan_ms", "write_ms", "register_ms", "total_ms"} <= set(row.timings)
    assert row.result == outputs[-1].model_dump(mode="json")
    assert row.result["stats"]["nodes_created"] >= 1
    files = files_of(c)
    events = dict(c.outbox.events)  # type: ignore[union-attr]
    assert len(events) == row.result["stats"]["outbox_events_queued"] > 0

    c.step_cache.clear()  # a redelivery in another worker process
    assert run_all(c, ledger, req.commit_id) == outputs
    c.step_cache.clear()
    assert steps.write_step(c, ledger, req.commit_id) == outputs[-2]  # the stored one wins
    assert files_of(c) == files
    assert c.outbox.events == events  # type: ignore[union-attr]
    assert row_of(ledger, req.commit_id).phase == "registered"


def test_a_permanent_failure_marks_the_commit_failed(
    ledger: Ledger, make_components: MakeComponents
) -> None:
    c = make_components(llm=ScriptedLLM(LLMError("model refused", transient=False)))
    req = make_req("steps-fail")
    steps.submit(ledger, req)
    with pytest.raises(CommitError):
        steps.archive_step(c, ledger, req.commit_id)
    row = row_of(ledger, req.commit_id)
    assert row.phase == "failed" and row.error_phase == "archive"
    assert "model refused" in (row.error or "")
    with pytest.raises(steps.CommitAlreadyFailedError):  # its late tasks write nothing
        steps.archive_step(c, ledger, req.commit_id)


def test_a_transient_failure_is_retryable_and_leaves_the_phase(
    ledger: Ledger, make_components: MakeComponents
) -> None:
    c = make_components(llm=ScriptedLLM(LLMError("timed out", transient=True)))
    req = make_req("steps-transient")
    steps.submit(ledger, req)
    with pytest.raises(steps.TransientStepError):
        steps.archive_step(c, ledger, req.commit_id)
    row = row_of(ledger, req.commit_id)
    assert row.phase == "enqueued" and row.error is None  # left for the retry


def test_a_transient_extractor_failure_is_retried_not_recorded(
    ledger: Ledger, make_components: MakeComponents
) -> None:
    flaky = ScriptedLLM(LLMError("read timeout", transient=True), fail_on="extraction.profile")
    c = make_components(llm=flaky)
    req = make_req("steps-flaky")
    steps.submit(ledger, req)
    steps.archive_step(c, ledger, req.commit_id)
    with pytest.raises(steps.TransientStepError):
        steps.extract_step(c, ledger, req.commit_id, "profile")
    assert ledger.load_output(req.commit_id, "extract:profile") is None  # the retry runs it
    assert row_of(ledger, req.commit_id).phase == "archived"


def test_a_commit_marked_failed_never_writes_later(
    ledger: Ledger, make_components: MakeComponents
) -> None:
    """E.g. the sweeper gave up on it while one of its tasks was still queued."""
    c = make_components()
    req = make_req("steps-late")
    steps.submit(ledger, req)
    steps.archive_step(c, ledger, req.commit_id)
    for n in EXTRACTOR_NAMES:
        steps.extract_step(c, ledger, req.commit_id, n)
    steps.plan_step(c, ledger, req.commit_id)
    ledger.fail(req.commit_id, "plan", "stuck in phase planned after 3 re-drives")
    with pytest.raises(steps.CommitAlreadyFailedError):
        steps.write_step(c, ledger, req.commit_id)
    assert not any(c.settings.fs_root.rglob("content.md"))
    assert row_of(ledger, req.commit_id).phase == "failed"


def test_a_commit_id_reused_by_another_tenant_is_refused(ledger: Ledger) -> None:
    req = make_req("shared-key")
    assert steps.submit(ledger, req)
    assert not steps.submit(ledger, req)  # the same commit again: idempotent
    row = ledger.get("shared-key")
    # another account, or another user, agent or session: refused, the ledger row untouched
    for change in (
        {"account_id": "evil"},
        {"user_id": "mallory"},
        {"agent_id": "other"},
        {"session_id": "s-other"},
    ):
        theirs = req.model_copy(update={"ctx": req.ctx.model_copy(update=change)})
        with pytest.raises(steps.CommitIdConflictError):
            steps.submit(ledger, theirs)
    assert ledger.get("shared-key") == row


def test_submit_refuses_an_input_over_the_limits_before_recording_it(ledger: Ledger) -> None:
    req = make_req("too-big")
    with pytest.raises(InputLimitError, match="CTXPIPE_LIMITS__MAX_MESSAGES"):
        steps.submit(ledger, req, LimitsConfig(max_messages=1))
    with pytest.raises(InputLimitError, match="CTXPIPE_LIMITS__MAX_SESSION_CHARS"):
        steps.submit(ledger, req, LimitsConfig(max_session_chars=1))
    assert ledger.get("too-big") is None
    assert steps.submit(ledger, req, LimitsConfig())


def test_a_redelivered_step_is_counted_and_a_poison_task_stops(
    ledger: Ledger, make_components: MakeComponents
) -> None:
    """The delivery is counted by the read of the step's state: the delivery after
    MAX_DELIVERIES of a step that never finished fails the commit with a clear message
    instead of running again, and every later task of it stops."""
    c = make_components()
    req = make_req("steps-poison")
    steps.submit(ledger, req)
    lost = steps.Delivery("archive", 0)
    for _ in range(steps.MAX_DELIVERIES):  # each of these "lost its worker" before running
        assert ledger.state(req.commit_id, [], lost.key) is not None
    with pytest.raises(CommitError, match="archive was delivered 6 times without finishing"):
        steps.archive_step(c, ledger, req.commit_id, lost)
    row = row_of(ledger, req.commit_id)
    assert row.phase == "failed" and row.error_phase == "archive"
    assert "delivered 6 times" in (row.error or "")
    with pytest.raises(steps.CommitAlreadyFailedError):
        steps.write_step(c, ledger, req.commit_id, steps.Delivery("write", 0))


def test_a_finished_step_redelivered_just_replays(
    ledger: Ledger, make_components: MakeComponents
) -> None:
    c = make_components()
    req = make_req("steps-replay")
    steps.submit(ledger, req)
    delivery = steps.Delivery("archive", 0)
    first = steps.archive_step(c, ledger, req.commit_id, delivery)
    for _ in range(steps.MAX_DELIVERIES + 2):  # re-drives of a step that had finished
        assert steps.archive_step(c, ledger, req.commit_id, delivery) == first
    row = row_of(ledger, req.commit_id)
    # a finished step's deliveries write nothing: only the first one was counted
    assert row.phase == "archived" and row.attempts == {"archive#0": 1}


def test_prepare_runs_archive_extractors_and_plan_as_one_step(
    ledger: Ledger, make_components: MakeComponents
) -> None:
    """The canvas without a chord: the same outputs as the separate steps, and a redelivery
    after a crash half-way resumes after the last phase stored."""
    a, b = make_components(), make_components()
    separate = InMemoryLedger()  # the reference run
    req = make_req("steps-prepare")
    steps.submit(separate, req)
    steps.archive_step(a, separate, req.commit_id)
    for name in EXTRACTOR_NAMES:
        steps.extract_step(a, separate, req.commit_id, name)
    expected = steps.plan_step(a, separate, req.commit_id)
    steps.submit(ledger, req)
    steps.archive_step(b, ledger, req.commit_id)
    steps.extract_step(b, ledger, req.commit_id, EXTRACTOR_NAMES[0])  # then the worker died
    planned = steps.prepare_step(b, ledger, req.commit_id, steps.Delivery("prepare", 0))
    assert planned.items and planned.items == expected.items
    row = row_of(ledger, req.commit_id)
    assert row.phase == "planned" and set(row.extractors) == set(EXTRACTOR_NAMES)
    assert {"archive_ms", "plan_ms"} <= set(row.timings)
    assert ledger.load_output(req.commit_id, "plan") == planned.model_dump(mode="json")
    assert steps.prepare_step(b, ledger, req.commit_id) == planned  # redelivered: replayed


def test_prepare_then_finish_run_a_commit_in_two_steps(
    ledger: Ledger, make_components: MakeComponents
) -> None:
    c = make_components()
    req = make_req("steps-two")
    steps.submit(ledger, req)
    planned = steps.prepare_step(c, ledger, req.commit_id, steps.Delivery("prepare", 0))
    assert steps.prepare_step(c, ledger, req.commit_id, steps.Delivery("prepare", 0)) == planned
    result = steps.finish_step(c, ledger, req.commit_id, steps.Delivery("finish", 0))
    row = row_of(ledger, req.commit_id)
    assert row.phase == "registered" and result.status == "success"
    assert row.result == result.model_dump(mode="json")
    assert row.attempts == {"prepare#0": 1, "write#0": 1, "register#0": 1}
    assert steps.finish_step(c, ledger, req.commit_id, steps.Delivery("finish", 0)) == result
    assert row_of(ledger, req.commit_id).attempts == row.attempts  # a replay writes nothing


def test_finish_writes_then_registers_and_a_redelivery_only_registers(
    ledger: Ledger, make_components: MakeComponents
) -> None:
    c = make_components()
    req = make_req("steps-finish")
    steps.submit(ledger, req)
    steps.prepare_step(c, ledger, req.commit_id)
    steps.write_step(c, ledger, req.commit_id, steps.Delivery("write", 0))  # then it died
    files = files_of(c)
    result = steps.finish_step(c, ledger, req.commit_id, steps.Delivery("finish", 0))
    row = row_of(ledger, req.commit_id)
    assert row.phase == "registered" and row.result == result.model_dump(mode="json")
    after = {k: v for k, v in files_of(c).items() if "/.commits/" not in k}
    assert after == files  # the write was replayed, not re-run (register adds its journal)
    assert row.attempts == {"write#0": 1, "register#0": 1}  # each step counts its own
    assert steps.finish_step(c, ledger, req.commit_id, steps.Delivery("finish", 1)) == result
    assert row_of(ledger, req.commit_id).attempts == row.attempts


def test_run_is_a_whole_commit_and_a_redelivery_resumes_where_it_stopped(
    ledger: Ledger, make_components: MakeComponents
) -> None:
    """The one task of a commit without a chord: a redelivery after a crash past the plan
    writes and registers only, and one after the end changes nothing."""
    c = make_components()
    req = make_req("steps-run")
    steps.submit(ledger, req)
    steps.prepare_step(c, ledger, req.commit_id, steps.Delivery("prepare", 0))  # then it died
    result = steps.run_step(c, ledger, req.commit_id, steps.Delivery("run", 0))
    row = row_of(ledger, req.commit_id)
    assert row.phase == "registered" and row.result == result.model_dump(mode="json")
    assert result.stats.nodes_created >= 1
    assert row.attempts == {"prepare#0": 1, "write#0": 1, "register#0": 1}
    files = files_of(c)
    assert steps.run_step(c, ledger, req.commit_id, steps.Delivery("run", 0)) == result
    assert files_of(c) == files


def test_the_cost_of_each_commit_per_phase_and_in_aggregate(
    ledger: Ledger, make_components: MakeComponents
) -> None:
    c = make_components()
    for cid, session in (("cost-1", "s1"), ("cost-2", "s2")):
        steps.submit(ledger, make_req(cid, session))
        run_all(c, ledger, cid)
    steps.submit(ledger, make_req("cost-3", session="s3"))  # accepted, not run

    stats = row_of(ledger, "cost-1").result["stats"]
    by_phase = stats["llm_by_phase"]
    assert {"archive", *(f"extract_{n}" for n in EXTRACTOR_NAMES)} <= set(by_phase)
    assert sum(p["calls"] for p in by_phase.values()) == stats["llm_calls"] >= 5
    assert sum(p["prompt_tokens"] for p in by_phase.values()) == stats["llm_prompt_tokens"]

    cost = ledger.llm_cost()
    second = row_of(ledger, "cost-2").result["stats"]
    assert cost.commits == 2 and cost.messages == 2 * len(MESSAGES)
    assert cost.llm_calls == stats["llm_calls"] + second["llm_calls"]
    for phase, usage in cost.by_phase.items():  # per phase, summed over both commits
        mine = [s["llm_by_phase"].get(phase, {}) for s in (stats, second)]
        assert usage.calls == sum(m.get("calls", 0) for m in mine)
        assert usage.prompt_tokens == sum(m.get("prompt_tokens", 0) for m in mine)
    assert sum(u.calls for u in cost.by_phase.values()) == cost.llm_calls
    assert cost.calls_per_100_messages == pytest.approx(100 * cost.llm_calls / 6)
    backlog = ledger.backlog()
    assert backlog.in_flight == 1 and backlog.finished_recently == 2
    assert backlog.oldest_age_s is not None and backlog.oldest_age_s >= 0


# -- back-pressure at submit --------------------------------------------------------------------


def test_submit_over_the_cap_is_refused_and_records_nothing(ledger: Ledger) -> None:
    assert steps.submit(ledger, make_req("c1", "s1"), max_pending=2)
    assert steps.submit(ledger, make_req("c2", "s2"), max_pending=2)
    with pytest.raises(BacklogFullError) as err:
        steps.submit(ledger, make_req("c3", "s3"), max_pending=2)
    assert err.value.pending == 2 and err.value.cap == 2
    assert err.value.retry_after_s == DEFAULT_RETRY_AFTER_S  # nothing drained yet
    assert err.value.oldest_age_s is not None and err.value.oldest_age_s >= 0
    msg = str(err.value)
    assert "backlog full" in msg and "nothing was recorded" in msg and "submit again in" in msg
    assert ledger.get("c3") is None
    # a commit already accepted is never refused: resubmitting it is idempotent
    assert steps.submit(ledger, make_req("c1", "s1"), max_pending=2) is False


def test_finished_commits_free_their_place_and_set_the_drain_rate(ledger: Ledger) -> None:
    for i in range(3):
        steps.submit(ledger, make_req(f"c{i}", f"s{i}"), max_pending=3)
    ledger.advance("c0", CommitPhase.REGISTERED, status="success")
    ledger.fail("c1", "archive", "boom")
    b = ledger.backlog()
    assert b.in_flight == 1 and b.finished_recently == 2
    assert steps.submit(ledger, make_req("c3", "s3"), max_pending=3)
    assert steps.submit(ledger, make_req("c4", "s4"), max_pending=3)
    with pytest.raises(BacklogFullError) as err:
        steps.submit(ledger, make_req("c5", "s5"), max_pending=3)
    assert err.value.retry_after_s == 30.0  # 2 finished per minute, one over the cap


def test_cap_zero_never_refuses(ledger: Ledger) -> None:
    for i in range(50):
        assert steps.submit(ledger, make_req(f"c{i}", f"s{i}"), max_pending=0)
    assert ledger.backlog().in_flight == 50


# -- recovery: what the reaper asks of the ledger -----------------------------------------------


class NoDeadWorkers:
    """A worker registry in which nobody died (the reaper's other source is the broker)."""

    def dead(self) -> list[str]:
        return []


class RestartedAgo:
    """A broker that restarted `uptime` seconds ago and was not handled yet."""

    def __init__(self, uptime: float) -> None:
        self.uptime = uptime
        self.acknowledged = 0

    def restarted(self) -> float | None:
        return self.uptime

    def acknowledge(self) -> None:
        self.acknowledged += 1


def test_a_broker_restart_redrives_the_commits_accepted_before_it(ledger: Ledger) -> None:
    for cid in ("enqueued", "archived", "registered", "failed"):
        steps.submit(ledger, make_req(cid, cid))
    ledger.advance("archived", CommitPhase.ARCHIVED)
    ledger.advance("registered", CommitPhase.REGISTERED)
    ledger.fail("failed", "archive", "boom")
    time.sleep(0.5)
    steps.submit(ledger, make_req("after", "after"))  # accepted since: its messages are there
    sent: list[tuple[str, str]] = []
    watch = RestartedAgo(0.25)
    reaper = CommitReaper(
        ledger,
        NoDeadWorkers(),  # type: ignore[arg-type]
        watch,  # type: ignore[arg-type]
        lambda c, s: sent.append((c, s)),
    )
    report = reaper.reap()
    assert report.broker_restarted and watch.acknowledged == 1
    assert sorted(sent) == [("archived", "extract"), ("enqueued", "archive")]
    assert sorted(report.redriven) == ["archived", "enqueued"]
    assert row_of(ledger, "enqueued").attempts == {"reap": 1}
    assert row_of(ledger, "after").attempts == {}


def test_a_commit_redriven_too_often_is_failed_with_the_reason(ledger: Ledger) -> None:
    steps.submit(ledger, make_req("c-poison"))
    time.sleep(0.05)
    sent: list[tuple[str, str]] = []
    reaper = CommitReaper(
        ledger,
        NoDeadWorkers(),  # type: ignore[arg-type]
        RestartedAgo(0.0),  # type: ignore[arg-type]
        lambda c, s: sent.append((c, s)),
        max_redrives=2,
    )
    reports = [reaper.reap() for _ in range(3)]
    assert len(sent) == 2 and reports[2].failed == ["c-poison"]
    row = row_of(ledger, "c-poison")
    assert row.phase == "failed" and row.attempts == {"reap": 3}
    assert "re-driven 2 times after the broker restarted" in (row.error or "")
    assert reaper.reap().redriven == []  # failed: nothing more to do


# -- outputs stored before the steps' outputs were models ---------------------------------------
# (old_outputs.py: the JSON as a commit in flight across an upgrade has it in the ledger)


# fields added to the stored shape since the literals were captured, and their default
NEWER_FIELDS = {
    "repaired": 0,  # LLMUsage: structured output
    "retried": 0,
    "failed": 0,
    "original_chars": None,  # Message: a long message kept as an excerpt
}


def _same_or_newer(old: Any, new: Any) -> bool:
    """`new` is `old` read and written again: every value the same, and any key it adds is a
    field added since (at its default)."""
    if isinstance(old, dict) and isinstance(new, dict):
        extra = set(new) - set(old)
        return (
            set(old) <= set(new)
            and all(k in NEWER_FIELDS and new[k] == NEWER_FIELDS[k] for k in extra)
            and all(_same_or_newer(old[k], new[k]) for k in old)
        )
    if isinstance(old, list) and isinstance(new, list):
        return len(old) == len(new) and all(map(_same_or_newer, old, new))
    return bool(old == new)


def test_outputs_stored_as_dicts_read_back_as_models_unchanged(ledger: Ledger) -> None:
    ledger.create("old", CTX, {})
    for key, payload in OLD_OUTPUTS.items():
        ledger.save_output("old", key, payload)
    state = ledger.state("old", list(OLD_OUTPUTS))
    assert state is not None and state.outputs == OLD_OUTPUTS
    outs = PhaseOutputs.from_stored(state.outputs)
    assert outs.archive is not None and outs.plan is not None and outs.write is not None
    assert sorted(outs.extracted) == sorted(EXTRACTOR_NAMES)
    parsed: dict[str, BaseModel] = {"archive": outs.archive, "plan": outs.plan, "write": outs.write}
    parsed.update((EXTRACT_PREFIX + n, r) for n, r in outs.extracted.items())
    dumped = {k: m.model_dump(mode="json") for k, m in parsed.items()}
    assert _same_or_newer(OLD_OUTPUTS, dumped)
    entries = {n: ExtractorProgress.model_validate(e) for n, e in OLD_EXTRACTORS.items()}
    assert {n: e.model_dump(mode="json") for n, e in entries.items()} == OLD_EXTRACTORS


def test_a_commit_extracted_by_the_untyped_steps_finishes(
    ledger: Ledger, make_components: MakeComponents
) -> None:
    """Archived and extracted before an upgrade (the dicts above in the ledger), then planned,
    written and registered by these steps."""
    c = make_components()
    rc = RequestContext(**{**CTX, "session_id": "s-old"})
    req = CommitRequest(commit_id="old-1", ctx=rc, messages=[OLD_MESSAGE])  # type: ignore[list-item]
    steps.submit(ledger, req)
    ledger.complete(req.commit_id, "archive", OLD_OUTPUTS["archive"], CommitPhase.ARCHIVED)
    for name, entry in OLD_EXTRACTORS.items():  # as the extractor steps stored them
        key, progress = EXTRACT_PREFIX + name, {name: entry}
        ledger.complete(
            req.commit_id,
            key,
            OLD_OUTPUTS[key],
            CommitPhase.ARCHIVED,
            extractors=progress,
            extracted_when=len(EXTRACTOR_NAMES),
        )
    assert row_of(ledger, req.commit_id).phase == "extracted"
    planned = steps.plan_step(c, ledger, req.commit_id)
    old_plan = OLD_OUTPUTS["plan"]["items"]
    assert [i.plan.target_uri for i in planned.items] == [i["plan"]["target_uri"] for i in old_plan]
    result = steps.finish_step(c, ledger, req.commit_id)
    row = row_of(ledger, req.commit_id)
    assert row.phase == "registered" and result.status == "success"
    assert result.stats.nodes_created == len(old_plan)
    assert row.result == result.model_dump(mode="json")
    assert row.extractors == OLD_EXTRACTORS
