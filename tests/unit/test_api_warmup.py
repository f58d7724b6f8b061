"""The API process warms its read path before the first request, then freezes what it holds."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from ctxpipe.cli.api_cmds import warm_now


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


class _Finder:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.warmed = 0

    def warm(self) -> None:
        self.warmed += 1
        if self.fail:
            raise RuntimeError("no model here")


def test_a_warmed_api_process_keeps_what_it_loaded_out_of_full_collections(
    unfrozen: None,
) -> None:
    finder = _Finder()
    warm_now(SimpleNamespace(read_path=SimpleNamespace(finder=finder)))
    assert finder.warmed == 1
    assert gc.get_freeze_count() > 0  # the objects alive after the warm-up: frozen


def test_a_failed_warm_up_freezes_nothing_and_does_not_raise(unfrozen: None) -> None:
    finder = _Finder(fail=True)
    warm_now(SimpleNamespace(read_path=SimpleNamespace(finder=finder)))
    assert finder.warmed == 1
    assert gc.get_freeze_count() == 0
