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
    assert len(members) == 11
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
    first, n = ledger.complete(
        "c", "extract:a", {"v": 1}, CommitPhase.PLANNED, count_prefix="extract:"
    )
    again, n2 = ledger.complete(
        "c", "extract:a", {"v": 2}, CommitPhase.PLANNED, count_prefix="extract:"
    )
    assert first == again == {"v": 1} and n == n2 == 1  # the first stored output wins
    ledger.save_output("c", "extract:b", {"v": 3})
    assert ledger.load_outputs("c", "extract:") == {"extract:a": {"v": 1}, "extract:b": {"v": 3}}
    request_, _, phase, outs = ledger.state("c", ["extract:b", "plan"]) or ({}, None, "", {})
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
