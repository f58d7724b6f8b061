"""The in-process path: `CommitCoordinator` runs the ledgered steps Celery runs, on the
in-memory ledger. The ledger's rules and the steps on it, the same on both ledgers, are
tests/integration/ledger/ (its in-memory half needs no server)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from conftest import SESSION_1, request, snapshot
from pydantic import BaseModel

from ctxpipe.commit import steps
from ctxpipe.commit.components import CommitComponents
from ctxpipe.commit.coordinator import CommitCoordinator
from ctxpipe.commit.memory_ledger import InMemoryLedger
from ctxpipe.core.errors import CommitError, LLMError
from ctxpipe.core.models import CommitResult
from ctxpipe.extraction.extractors import EXTRACTOR_NAMES
from ctxpipe.providers.base import run_sync
from ctxpipe.providers.rules import RulesLLM

MakeComponents = Callable[..., CommitComponents]


class ArchiveFails:
    """The rules LLM, except that the archive step's calls (the session's one extraction call,
    the summary alone) raise `error`."""

    name = "archive-fails"

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.inner = RulesLLM()

    async def complete_json(self, prompt_id, variables, schema, ctx=None, usage=None):  # type: ignore[no-untyped-def]
        if prompt_id in ("extraction.session", "compression.archive_summary"):
            raise self.error
        return await self.inner.complete_json(prompt_id, variables, schema, ctx, usage)

    def complete_json_sync(self, *a: Any, **k: Any) -> Any:
        return run_sync(self.complete_json(*a, **k))


def run_all(c: CommitComponents, ledger: InMemoryLedger, commit_id: str) -> list[BaseModel]:
    out = [steps.archive_step(c, ledger, commit_id)]
    out += [steps.extract_step(c, ledger, commit_id, n) for n in EXTRACTOR_NAMES]
    out += [
        steps.plan_step(c, ledger, commit_id),
        steps.write_step(c, ledger, commit_id),
        steps.register_step(c, ledger, commit_id),
    ]
    return out


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
    stepped = run_all(b, ledger, req.commit_id)[-1]
    assert isinstance(stepped, CommitResult)
    ignore = {
        "stats": {"duration_ms"},
        "extractors": {"__all__": {"started_at", "finished_at", "duration_ms"}},
    }
    assert inline.model_dump(exclude=ignore) == stepped.model_dump(exclude=ignore)
    assert snapshot(a.settings.fs_root).keys() == snapshot(b.settings.fs_root).keys()


def test_a_transient_failure_in_process_is_raised_as_itself(
    make_components: MakeComponents,
) -> None:
    """A Celery step leaves a transient failure to the retry (the conformance suite); in
    process nothing retries: the commit fails with the cause attached."""
    c = make_components(llm=ArchiveFails(LLMError("timed out", transient=True)))
    req = request(SESSION_1, commit_id="mem-transient")
    with pytest.raises(CommitError, match="timed out") as caught:
        CommitCoordinator(c).commit_sync(req)
    assert caught.value.phase == "archive"
    assert isinstance(caught.value.__cause__, LLMError)
