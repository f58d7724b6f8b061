"""A Celery app with ctxpipe's settings (`tasks.app.make_app`) and two tasks that do nothing:
what Celery itself costs, for `bench/celery_floor.py` (its workers run `celery -A
bench._noop_app worker` from the project root)."""

from __future__ import annotations

from typing import Any

from ctxpipe.core.config import Settings
from tasks.app import make_app

app = make_app(Settings())


@app.task(name="bench.noop.step")
def step(*_args: Any) -> None:
    """A commit step that does nothing (the `commit` queue)."""


@app.task(name="bench.noop.extract")
def extract(*_args: Any) -> None:
    """An extractor that does nothing (sent to the `extract` queue)."""
