"""A commit's canvas is data: its steps and their order from every start phase, and the
in-process executor runs exactly those steps in exactly that order (the Celery side of the same
canvas: tests/unit/test_task_recovery_glue.py and tests/integration/test_commit_canvas.py)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from conftest import SESSION_1, request, snapshot
from pydantic import BaseModel

from ctxpipe.commit import canvas, steps
from ctxpipe.commit.canvas import Chord, Stage, Step
from ctxpipe.commit.components import CommitComponents
from ctxpipe.commit.coordinator import CommitCoordinator
from ctxpipe.commit.executor import execute
from ctxpipe.commit.ledger import LedgerPort
from ctxpipe.commit.memory_ledger import InMemoryLedger
from ctxpipe.core.config import CommitConfig
from ctxpipe.core.models import CommitResult
from ctxpipe.providers.base import run_sync

MakeComponents = Callable[..., CommitComponents]
EXTRACT = ["extract_profile", "extract_preferences", "extract_entity_event", "extract_procedure"]


def test_the_default_canvas_gives_every_phase_a_task() -> None:
    assert canvas.step_names(canvas.canvas()) == ["archive", *EXTRACT, "plan", "write", "register"]
    (archive, chord, write, register) = canvas.canvas()
    assert isinstance(chord, Chord) and chord.body.task == "plan"
    assert [s.task for s in chord.header] == EXTRACT
    assert (archive.task, write.task, register.task) == ("archive", "write", "register")  # type: ignore[union-attr]
    assert canvas.step_names(canvas.canvas("extract")) == [*EXTRACT, "plan", "write", "register"]
    assert canvas.step_names(canvas.canvas("write")) == ["write", "register"]
    assert canvas.step_names(canvas.canvas("register")) == ["register"]
    with pytest.raises(ValueError, match="unknown start phase"):
        canvas.canvas("nope")


def test_the_fused_canvas_is_one_task() -> None:
    fused = {s: canvas.step_names(canvas.canvas(s, "fused")) for s in canvas.STARTS}
    assert fused == {
        "archive": ["run"],
        "extract": ["run"],
        "write": ["finish"],
        "register": ["register"],
    }
    # every step a canvas names has its task; the last of each canvas kicks the indexing
    for kind in ("chord", "fused"):
        for start in canvas.STARTS:
            stages = canvas.canvas(start, kind)  # type: ignore[arg-type]
            assert all(n in canvas.STEPS for n in canvas.step_names(stages))
            last = stages[-1]
            assert isinstance(last, Step) and last.last


def _recording(stages: tuple[Stage, ...], log: list[str]) -> tuple[Stage, ...]:
    def wrap(step: Step) -> Step:
        async def run(
            c: CommitComponents, ledger: LedgerPort, cid: str, d: steps.Delivery | None
        ) -> BaseModel:
            log.append(step.task)
            return await step.run(c, ledger, cid, d)

        return Step(step.task, run, step.last)

    return tuple(
        Chord(tuple(wrap(s) for s in st.header), wrap(st.body))
        if isinstance(st, Chord)
        else wrap(st)
        for st in stages
    )


@pytest.mark.parametrize("kind", ["chord", "fused"])
def test_the_executor_runs_the_canvas_steps_in_order(
    make_components: MakeComponents, kind: str
) -> None:
    c = make_components()
    req = request(SESSION_1, commit_id=f"canvas-{kind}")
    ledger = InMemoryLedger()
    steps.submit(ledger, req)
    stages = canvas.canvas(kind=kind)  # type: ignore[arg-type]
    log: list[str] = []
    result = run_sync(execute(_recording(stages, log), c, ledger, req.commit_id))
    assert isinstance(result, CommitResult)
    header = set(EXTRACT)
    if kind == "chord":  # the header's four start together, in any order, after the archive
        assert log[0] == "archive" and set(log[1:5]) == header
        assert log[5:] == ["plan", "write", "register"]
    else:
        assert log == ["run"]
    row = ledger.get(req.commit_id)
    assert row is not None and row.phase == "registered"
    # each step counted as its task's first delivery, as a worker counts it
    delivered = {k.split("#")[0] for k in row.attempts}
    # `run` counts the deliveries of the steps it runs
    fused = {"prepare", "write", "register"}
    assert delivered == (set(canvas.step_names(stages)) if kind == "chord" else fused)


def test_the_coordinator_runs_the_canvas_of_its_settings(make_components: MakeComponents) -> None:
    """`CommitCoordinator` (the inline dispatcher, the benches) is the executor on the canvas
    the settings name; both canvases end in the same FS."""
    a, b = make_components(), make_components()
    b.settings = b.settings.model_copy(
        update={
            "fs_root": b.settings.fs_root.parent / "fs-b",
            "commit": CommitConfig(canvas="fused"),
        }
    )
    b.fs = type(a.fs)(b.settings.fs_root)
    b.relations = type(a.relations)(b.fs)
    chorded = CommitCoordinator(a).commit_sync(request(SESSION_1, commit_id="both"))
    fused = CommitCoordinator(b).commit_sync(request(SESSION_1, commit_id="both"))
    ignore = {
        "stats": {"duration_ms"},
        "extractors": {"__all__": {"started_at", "finished_at", "duration_ms"}},
    }
    assert chorded.model_dump(exclude=ignore) == fused.model_dump(exclude=ignore)
    assert snapshot(a.settings.fs_root).keys() == snapshot(b.settings.fs_root).keys()
