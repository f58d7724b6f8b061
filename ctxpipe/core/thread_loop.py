"""Coroutines run from blocking code: `run_sync` on a fresh loop, `run_on_thread_loop` on one
event loop per thread, kept for every coroutine that thread runs.

`asyncio.run` builds a loop for each call and tears it down after, with the default thread
pool that `asyncio.to_thread` started: for a worker that runs one short step after another
(a commit's archive, plan, write …) that is a thread started and joined per task — about 2 ms
on a small machine, on every hop of a commit. `run_on_thread_loop` runs each coroutine on the
loop of the calling thread instead, made on first use (again in a forked child: a loop does
not survive a fork), and cancels what the coroutine left running, as `asyncio.run` does.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_local = threading.local()


def _runner() -> asyncio.Runner:
    runner: asyncio.Runner | None = getattr(_local, "runner", None)
    if runner is None or getattr(_local, "pid", None) != os.getpid():
        runner = asyncio.Runner()  # a loop inherited through a fork is left alone
        _local.runner, _local.pid = runner, os.getpid()
    return runner


async def _settle(tasks: set[asyncio.Task[Any]]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def _outside_a_loop(coro: Coroutine[Any, Any, Any], name: str) -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    coro.close()
    raise RuntimeError(f"{name} called from inside a running event loop; await instead")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` to completion on a fresh loop (never inside a running loop)."""
    _outside_a_loop(coro, "run_sync")
    return asyncio.run(coro)


def run_on_thread_loop(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` to completion on this thread's loop (never inside a running loop)."""
    _outside_a_loop(coro, "run_on_thread_loop")
    runner = _runner()
    try:
        return runner.run(coro)
    finally:
        left = {t for t in asyncio.all_tasks(runner.get_loop()) if not t.done()}
        if left:  # what the coroutine started and did not await: cancelled, as asyncio.run does
            runner.run(_settle(left))
