"""The ledgered steps Celery runs, on the in-memory ledger the in-process path uses: the same
rules as on PostgreSQL (tests/integration/test_commit_steps.py), without a server."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest
from conftest import SESSION_1, request, snapshot

from ctxpipe.commit import steps
from ctxpipe.commit.components import CommitComponents
from ctxpipe.commit.coordinator import CommitCoordinator
from ctxpipe.commit.ledger import InMemoryLedger, LedgerPort
from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.enums import CommitPhase
from ctxpipe.core.errors import CommitError, LLMError
from ctxpipe.core.models import CommitResult
from ctxpipe.extraction.extractors import EXTRACTOR_NAMES
from ctxpipe.providers.base import run_sync
from ctxpipe.providers.rules import RulesLLM
from ctxpipe.storage.commit_ledger import CommitLedger

MakeComponents = Callable[..., CommitComponents]


class ArchiveFails:
    """The rules LLM, except that the archive summary raises `error`."""

    name = "archive-fails"

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.inner = RulesLLM()

    async def complete_json(self, prompt_id, variables, schema, ctx=None, usage=None):  # type: ignore[no-untyped-def]
        if prompt_id == "compression.archive_summary":
            raise self.error
        return await self.inner.complete_json(prompt_id, variables, schema, ctx, usage)

    def complete_json_sync(self, *a: Any, **k: Any) -> Any:
        return run_sync(self.complete_json(*a, **k))


def run_all(c: CommitComponents, ledger: LedgerPort, commit_id: str) -> list[dict[str, Any]]:
    out = [steps.archive_step(c, ledger, commit_id)]
    out += [steps.extract_step(c, ledger, commit_id, n) for n in EXTRACTOR_NAMES]
    out += [
        steps.plan_step(c, ledger, commit_id),
        steps.write_step(c, ledger, commit_id),
        steps.register_step(c, ledger, commit_id),
    ]
    return out


def test_both_ledgers_have_the_ports_signatures() -> None:
    members = [n for n, v in vars(LedgerPort).items() if inspect.isfunction(v) and n[0] != "_"]
    assert len(members) == 12
    for name in members:
        port = inspect.signature(getattr(LedgerPort, name))
        for impl in (CommitLedger, InMemoryLedger):
            assert inspect.signature(getattr(impl, name)) == port, f"{impl.__name__}.{name}"


def test_steps_run_once_and_replay_their_stored_output(
    make_components: MakeComponents,
) -> None:
    c = make_components()
    ledger = InMemoryLedger()
    req = request(SESSION_1, commit_id="mem-1")
    assert steps.submit(ledger, req) and not steps.submit(ledger, req)
    outputs = run_all(c, ledger, req.commit_id)
    row = ledger.get(req.commit_id)
    assert row is not None and row.phase == "registered" and row.status == "success"
    assert set(row.extractors) == set(EXTRACTOR_NAMES)
    assert {"archive_ms", "plan_ms", "write_ms", "register_ms", "total_ms"} <= set(row.timings)
    assert row.result == outputs[-1] and row.result["stats"]["nodes_created"] >= 1
    files = snapshot(c.settings.fs_root)
    events = dict(c.outbox.events)  # type: ignore[union-attr]
    assert len(events) == row.result["stats"]["outbox_events_queued"] > 0

    c.step_cache.clear()  # a redelivery in another worker process
    assert run_all(c, ledger, req.commit_id) == outputs
    assert snapshot(c.settings.fs_root) == files
    assert c.outbox.events == events  # type: ignore[union-attr]


def test_in_process_commit_runs_the_steps_and_returns_the_stored_result(
    make_components: MakeComponents,
) -> None:
    a, b = make_components(), make_components()
    b.settings = b.settings.model_copy(update={"fs_root": b.settings.fs_root.parent / "fs-b"})
    b.fs = type(a.fs)(b.settings.fs_root)
    b.relations = type(a.relations)(b.fs)
    req = request(SESSION_1, commit_id="mem-2")
    inline = CommitCoordinator(a).commit_sync(req)
    ledger = InMemoryLedger()
    steps.submit(ledger, req)
    stepped = CommitResult.model_validate(run_all(b, ledger, req.commit_id)[-1])
    ignore = {
        "stats": {"duration_ms"},
        "extractors": {"__all__": {"started_at", "finished_at", "duration_ms"}},
    }
    assert inline.model_dump(exclude=ignore) == stepped.model_dump(exclude=ignore)
    assert snapshot(a.settings.fs_root).keys() == snapshot(b.settings.fs_root).keys()


def test_permanent_failure_marks_the_ledger_failed(make_components: MakeComponents) -> None:
    c = make_components(llm=ArchiveFails(LLMError("model refused", transient=False)))
    ledger = InMemoryLedger()
    req = request(SESSION_1, commit_id="mem-fail")
    steps.submit(ledger, req)
    with pytest.raises(CommitError):
        steps.archive_step(c, ledger, req.commit_id)
    row = ledger.get(req.commit_id)
    assert row is not None and row.phase == "failed" and row.error_phase == "archive"
    assert "model refused" in (row.error or "")
    with pytest.raises(steps.CommitAlreadyFailedError):  # its late tasks write nothing
        steps.archive_step(c, ledger, req.commit_id)


def test_transient_failure_is_retryable_in_celery_and_raised_as_itself_in_process(
    make_components: MakeComponents,
) -> None:
    c = make_components(llm=ArchiveFails(LLMError("timed out", transient=True)))
    ledger = InMemoryLedger()
    req = request(SESSION_1, commit_id="mem-transient")
    steps.submit(ledger, req)
    with pytest.raises(steps.TransientStepError):
        steps.archive_step(c, ledger, req.commit_id)
    row = ledger.get(req.commit_id)
    assert row is not None and row.phase == "enqueued"  # left for the retry
    with pytest.raises(CommitError, match="timed out") as caught:
        CommitCoordinator(c).commit_sync(req)
    assert caught.value.phase == "archive"
    assert isinstance(caught.value.__cause__, LLMError)


def test_in_memory_ledger_phase_rules() -> None:
    ledger = InMemoryLedger()
    ctx = {"account_id": "acme", "user_id": "u", "agent_id": "a", "session_id": "s"}
    assert ledger.create("c", ctx, {"x": 1}) and not ledger.create("c", ctx, {"x": 2})
    assert ledger.state("nope", []) is None and ledger.get("nope") is None
    ledger.advance("c", CommitPhase.PLANNED, timings={"plan_ms": 3})
    ledger.advance("c", CommitPhase.ARCHIVED, timings={"late": 1})  # a late extractor
    row = ledger.get("c")
    assert row is not None and row.phase == "planned" and row.timings == {"plan_ms": 3}
    first = ledger.complete("c", "extract:a", {"v": 1}, CommitPhase.PLANNED)
    again = ledger.complete("c", "extract:a", {"v": 2}, CommitPhase.PLANNED)
    assert first == again == {"v": 1}  # the first stored output wins
    ledger.save_output("c", "extract:b", {"v": 3})
    assert ledger.load_outputs("c", "extract:") == {"extract:a": {"v": 1}, "extract:b": {"v": 3}}
    state = ledger.state("c", ["extract:b", "plan"])
    assert state is not None and state.deliveries == 0  # no delivery given: none counted
    request_, _, phase, outs = state[:4]
    assert request_ == {"x": 1} and phase == "planned" and outs == {"extract:b": {"v": 3}}
    ledger.fail("c", "write", "disk full")
    ledger.advance("c", CommitPhase.WRITTEN)  # never out of failed
    row = ledger.get("c")
    assert row is not None and (row.phase, row.error_phase, row.error) == (
        "failed",
        "write",
        "disk full",
    )
    assert ledger.create("d", ctx, {}) is True
    ledger.advance("d", CommitPhase.REGISTERED, status="success", result={"ok": True})
    ledger.fail("d", "register", "too late")  # a registered commit stays registered
    row = ledger.get("d")
    assert row is not None and row.phase == "registered" and row.result == {"ok": True}


def test_submit_refuses_a_commit_id_of_another_session() -> None:
    ledger = InMemoryLedger()
    req = request(SESSION_1, commit_id="shared")
    assert steps.submit(ledger, req)
    other: CommitRequest = req.model_copy(
        update={"ctx": req.ctx.model_copy(update={"user_id": "mallory"})}
    )
    with pytest.raises(steps.CommitIdConflictError):
        steps.submit(ledger, other)


def test_the_last_extractor_to_report_moves_the_commit_to_extracted() -> None:
    ledger = InMemoryLedger()
    ctx = {"account_id": "acme", "user_id": "u", "agent_id": "a", "session_id": "s"}
    ledger.create("c", ctx, {})
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
        row = ledger.get("c")
        assert row is not None and row.phase == ("extracted" if i == 2 else "archived")
    ledger.advance("c", CommitPhase.PLANNED)
    ledger.complete(  # a late duplicate never moves the phase back
        "c", "extract:a", {}, CommitPhase.ARCHIVED, extractors={"a": {}}, extracted_when=3
    )
    row = ledger.get("c")
    assert row is not None and row.phase == "planned"


def test_state_counts_each_delivery_per_task_and_retry() -> None:
    ledger = InMemoryLedger()
    ctx = {"account_id": "acme", "user_id": "u", "agent_id": "a", "session_id": "s"}
    ledger.create("c", ctx, {})
    counts = [ledger.state("c", [], "archive#0") for _ in range(3)]
    assert [s.deliveries for s in counts if s is not None] == [1, 2, 3]
    retried = ledger.state("c", [], "archive#1")  # a retry is a new message: its own count
    assert retried is not None and retried.deliveries == 1
    assert ledger.state("nope", [], "archive#0") is None
    row = ledger.get("c")
    assert row is not None and row.attempts == {"archive#0": 3, "archive#1": 1}


def test_a_task_redelivered_too_often_fails_the_commit(make_components: MakeComponents) -> None:
    """What a step that kills its worker every time looks like to the ledger: deliveries that
    never finish. The one after MAX_DELIVERIES fails the commit instead of running again."""
    c = make_components()
    ledger = InMemoryLedger()
    req = request(SESSION_1, commit_id="mem-poison")
    steps.submit(ledger, req)
    lost = steps.Delivery("archive", 0)
    for _ in range(steps.MAX_DELIVERIES):  # each of these "lost its worker" before running
        assert ledger.state(req.commit_id, [], lost.key) is not None
    with pytest.raises(CommitError, match="archive was delivered 6 times without finishing"):
        steps.archive_step(c, ledger, req.commit_id, lost)
    row = ledger.get(req.commit_id)
    assert row is not None and row.phase == "failed" and row.error_phase == "archive"
    with pytest.raises(steps.CommitAlreadyFailedError):  # and every later task stops at once
        steps.write_step(c, ledger, req.commit_id, steps.Delivery("write", 0))


def test_a_finished_step_delivered_again_and_again_just_replays(
    make_components: MakeComponents,
) -> None:
    c = make_components()
    ledger = InMemoryLedger()
    req = request(SESSION_1, commit_id="mem-replay")
    steps.submit(ledger, req)
    delivery = steps.Delivery("archive", 0)
    first = steps.archive_step(c, ledger, req.commit_id, delivery)
    for _ in range(steps.MAX_DELIVERIES + 2):  # re-drives of a step that had finished
        assert steps.archive_step(c, ledger, req.commit_id, delivery) == first
    row = ledger.get(req.commit_id)
    assert row is not None and row.phase == "archived"
    assert row.attempts["archive#0"] == 1  # a finished step's deliveries write nothing


def test_prepare_runs_archive_extractors_and_plan_as_one_step(
    make_components: MakeComponents,
) -> None:
    """The canvas without a chord: the same outputs as the separate steps, and a redelivery
    after a crash half-way resumes after the last phase stored."""
    a, b = make_components(), make_components()  # nothing is written: one FS will do
    req = request(SESSION_1, commit_id="mem-prepare")
    separate = InMemoryLedger()
    steps.submit(separate, req)
    steps.archive_step(a, separate, req.commit_id)
    for name in EXTRACTOR_NAMES:
        steps.extract_step(a, separate, req.commit_id, name)
    expected = steps.plan_step(a, separate, req.commit_id)
    one = InMemoryLedger()
    steps.submit(one, req)
    steps.archive_step(b, one, req.commit_id)
    steps.extract_step(b, one, req.commit_id, EXTRACTOR_NAMES[0])  # then the worker died
    planned = steps.prepare_step(b, one, req.commit_id, steps.Delivery("prepare", 0))
    assert planned["items"] and planned["items"] == expected["items"]
    row = one.get(req.commit_id)
    assert row is not None and row.phase == "planned"
    assert set(row.extractors) == set(EXTRACTOR_NAMES)
    assert steps.prepare_step(b, one, req.commit_id) == planned  # redelivered: replayed


def test_run_is_a_whole_commit_and_a_redelivery_resumes_where_it_stopped(
    make_components: MakeComponents,
) -> None:
    """The one task of a commit without a chord: the same result as prepare then finish; a
    redelivery after a crash past the plan writes and registers only, and one after the end
    changes nothing."""
    c = make_components()
    ledger = InMemoryLedger()
    req = request(SESSION_1, commit_id="mem-run")
    steps.submit(ledger, req)
    steps.prepare_step(c, ledger, req.commit_id, steps.Delivery("prepare", 0))  # then it died
    result = steps.run_step(c, ledger, req.commit_id, steps.Delivery("run", 0))
    row = ledger.get(req.commit_id)
    assert row is not None and row.phase == "registered" and row.result == result
    assert result["stats"]["nodes_created"] >= 1
    assert row.attempts == {"prepare#0": 1, "write#0": 1, "register#0": 1}
    files = snapshot(c.settings.fs_root)
    assert steps.run_step(c, ledger, req.commit_id, steps.Delivery("run", 0)) == result
    assert snapshot(c.settings.fs_root) == files


def test_finish_writes_then_registers_and_a_redelivery_only_registers(
    make_components: MakeComponents,
) -> None:
    c = make_components()
    ledger = InMemoryLedger()
    req = request(SESSION_1, commit_id="mem-finish")
    steps.submit(ledger, req)
    steps.prepare_step(c, ledger, req.commit_id)
    steps.write_step(c, ledger, req.commit_id, steps.Delivery("write", 0))  # then it died
    files = snapshot(c.settings.fs_root)
    result = steps.finish_step(c, ledger, req.commit_id, steps.Delivery("finish", 0))
    row = ledger.get(req.commit_id)
    assert row is not None and row.phase == "registered" and row.result == result
    after = {k: v for k, v in snapshot(c.settings.fs_root).items() if "/.commits/" not in k}
    assert after == files  # the write was replayed, not re-run (register adds its journal)
    assert row.attempts == {"write#0": 1, "register#0": 1}  # each step counts its own
    assert steps.finish_step(c, ledger, req.commit_id, steps.Delivery("finish", 1)) == result
    assert ledger.get(req.commit_id).attempts == row.attempts  # type: ignore[union-attr]
