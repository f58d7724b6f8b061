"""A worker node that plans commits imports the model's libraries before its pool forks (its
pool processes inherit them), so the first plan after a (re)start does not wait for them."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from tasks import warmup


def node(*queues: str) -> Any:
    return SimpleNamespace(app=SimpleNamespace(amqp=SimpleNamespace(queues=SimpleNamespace(
        consume_from={q: object() for q in queues}
    ))))  # fmt: skip


@pytest.mark.parametrize(
    ("queues", "imports"),
    [(("commit",), True), (("commit", "extract", "embed"), True), (("embed",), False)],
)
def test_only_a_node_that_plans_commits_imports_the_model_libraries_before_the_fork(
    monkeypatch: pytest.MonkeyPatch, queues: tuple[str, ...], imports: bool
) -> None:
    calls: list[int] = []
    monkeypatch.setattr(warmup, "import_libraries", lambda: calls.append(1) or 0.1)
    monkeypatch.setitem(warmup._warm, "model", False)
    warmup._note_queues(node(*queues))
    assert warmup._warm["model"] is imports
    assert calls == ([1] if imports else [])


def test_a_failed_import_before_the_fork_leaves_the_node_starting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken() -> float:
        raise ImportError("no torch here")

    warned: list[str] = []
    monkeypatch.setattr(warmup, "import_libraries", broken)
    monkeypatch.setattr(warmup.log, "warning", lambda msg, *a: warned.append(msg % a))
    warmup._note_queues(node("commit"))  # no exception: each pool process imports them
    assert warmup._warm["model"] is True
    assert any("no torch here" in w for w in warned)
