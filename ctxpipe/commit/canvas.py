"""A commit's canvas as data: its steps and their order, from any phase it starts or resumes at.

Two executors run it: Celery (`tasks.commit.workflow` maps each `Step` to the task
`ctxpipe.commit.<task>` and a `Chord` to a Celery chord of a group) and, in one process,
`commit.executor.execute` (each step awaited in turn, a chord's header concurrently). Both
run the very same ledgered steps (`commit.steps`) in the same order.

The default canvas, `chord`, gives each phase a task of its own: archive, then the four
extractors as a chord whose body is the plan, then write, then register. `fused`
(`CTXPIPE_COMMIT__CANVAS=fused`) runs a whole commit as one task, `run` (archive, the
extractors concurrently, plan, write, register): fewer hops, no per-phase task to watch.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Final, Literal

from pydantic import BaseModel

from ctxpipe.commit import steps
from ctxpipe.commit.components import CommitComponents
from ctxpipe.commit.ledger import LedgerPort
from ctxpipe.core.models import ExtractionResult
from ctxpipe.extraction.extractors import EXTRACTOR_NAMES

CanvasKind = Literal["chord", "fused"]
StepRun = Callable[
    [CommitComponents, LedgerPort, str, steps.Delivery | None], Coroutine[Any, Any, BaseModel]
]

# where a commit starts or is re-driven from (`steps.resume_point`)
STARTS: Final = ("archive", "extract", "write", "register")


@dataclass(frozen=True)
class Step:
    """One ledgered step and the task that runs it on the workers (`ctxpipe.commit.<task>`)."""

    task: str
    run: StepRun
    last: bool = False  # it ends the commit: the indexing of its nodes is kicked after it


@dataclass(frozen=True)
class Chord:
    """Steps that run in parallel (`header`), then `body`, once all of them have."""

    header: tuple[Step, ...]
    body: Step


Stage = Step | Chord


def _extractor(name: str) -> StepRun:
    async def run(
        c: CommitComponents, ledger: LedgerPort, commit_id: str, delivery: steps.Delivery | None
    ) -> ExtractionResult:
        return await steps.extract(c, ledger, commit_id, name, delivery)

    return run


ARCHIVE = Step("archive", steps.archive)
EXTRACT = tuple(Step(f"extract_{name}", _extractor(name)) for name in EXTRACTOR_NAMES)
PLAN = Step("plan", steps.plan)
WRITE = Step("write", steps.write)
REGISTER = Step("register", steps.register, last=True)
# the fused canvas: a whole commit, or its write and register, in one task each
RUN = Step("run", steps.run, last=True)
FINISH = Step("finish", steps.finish, last=True)
# archive + extractors + plan in one task: no canvas sends it any more; its task stays
# registered for messages sent before
PREPARE = Step("prepare", steps.prepare)

CHORD: Final[tuple[Stage, ...]] = (ARCHIVE, Chord(EXTRACT, PLAN), WRITE, REGISTER)
FUSED: Final[dict[str, tuple[Stage, ...]]] = {
    "archive": (RUN,),
    "extract": (RUN,),
    "write": (FINISH,),
    "register": (REGISTER,),
}
STEPS: Final[dict[str, Step]] = {
    s.task: s for s in (ARCHIVE, *EXTRACT, PLAN, WRITE, REGISTER, RUN, FINISH, PREPARE)
}


def canvas(start: str = "archive", kind: CanvasKind = "chord") -> tuple[Stage, ...]:
    """The stages a commit runs from phase `start` (one of `STARTS`), in order."""
    if start not in STARTS:
        raise ValueError(f"unknown start phase {start!r}")
    if kind == "fused":
        return FUSED[start]
    return CHORD[STARTS.index(start) :]


def step_names(stages: tuple[Stage, ...]) -> list[str]:
    """The tasks of `stages` in the order they start (a chord's header before its body)."""
    names: list[str] = []
    for stage in stages:
        if isinstance(stage, Chord):
            names += [s.task for s in stage.header]
            stage = stage.body
        names.append(stage.task)
    return names


__all__ = [
    "CHORD",
    "STARTS",
    "STEPS",
    "CanvasKind",
    "Chord",
    "Stage",
    "Step",
    "StepRun",
    "canvas",
    "step_names",
]
