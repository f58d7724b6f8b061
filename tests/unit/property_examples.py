"""How many examples a property test of the unit tier runs.

Under the default profile (`make test`, which CI runs) each test runs the count it names.
`make unit`, the edit-test loop, loads the `edit-loop` profile (registered in conftest.py,
fewer examples) and each count shrinks in proportion, never below `FLOOR`."""

from __future__ import annotations

from hypothesis import settings

FLOOR = 10


def _scale() -> float:
    loaded = settings()  # the loaded profile's values
    return loaded.max_examples / settings.get_profile("default").max_examples


def examples(full: int) -> int:
    """`full` under the default profile; scaled by the loaded profile's `max_examples`."""
    return max(min(FLOOR, full), round(full * _scale()))


def few(cases: tuple[str, ...], least: int = 2) -> tuple[str, ...]:
    """All `cases` (e.g. one fresh interpreter each) under the default profile; under one with
    fewer examples, as many as the scale leaves, at least `least`."""
    return cases[: max(least, round(len(cases) * _scale()))]
