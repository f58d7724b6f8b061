"""The in-process executor of a commit's canvas (`commit.canvas`): the steps the workers run,
in the order Celery runs them, awaited in this process — a chord's header concurrently, as the
workers run it — like a stub broker's `join()` that runs each queued message in turn.

Nothing retries in process: a transient failure reaches the caller (`TransientStepError`, or
for a chord's header, which fails as a whole, `CommitError` of its phase with the cause
attached)."""

from __future__ import annotations

import asyncio

from pydantic import BaseModel

from ctxpipe.commit import steps
from ctxpipe.commit.canvas import Chord, Stage, Step
from ctxpipe.commit.components import CommitComponents
from ctxpipe.commit.ledger import LedgerPort
from ctxpipe.core.errors import CommitError
from ctxpipe.core.models import CommitResult


async def _step(step: Step, c: CommitComponents, ledger: LedgerPort, commit_id: str) -> BaseModel:
    """One step, delivered once (counted in the ledger as its task's first delivery)."""
    return await step.run(c, ledger, commit_id, steps.Delivery(step.task))


async def _chord(
    chord: Chord, c: CommitComponents, ledger: LedgerPort, commit_id: str
) -> BaseModel:
    try:
        await asyncio.gather(*(_step(s, c, ledger, commit_id) for s in chord.header))
    except steps.TransientStepError as exc:
        cause = exc.__cause__ or exc
        raise CommitError(str(cause), phase=exc.phase) from cause
    return await _step(chord.body, c, ledger, commit_id)


async def execute(
    stages: tuple[Stage, ...], c: CommitComponents, ledger: LedgerPort, commit_id: str
) -> CommitResult:
    """Run `stages` for the commit recorded in `ledger`; returns the commit's result (the
    output of the last step)."""
    out: BaseModel | None = None
    for stage in stages:
        if isinstance(stage, Chord):
            out = await _chord(stage, c, ledger, commit_id)
        else:
            out = await _step(stage, c, ledger, commit_id)
    if not isinstance(out, CommitResult):
        raise CommitError(
            f"the canvas of commit {commit_id} ended without a result", phase="register"
        )
    return out


__all__ = ["execute"]
