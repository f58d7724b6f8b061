"""Coroutines run from blocking code: `run_sync` on a fresh loop, `run_on_thread_loop` on one
event loop per thread, kept for every coroutine that thread runs.

`asyncio.run` builds a loop for each call and tears it down after, with the default thread
pool that `asyncio.to_thread` started: for a worker that runs one short step after another
(a commit's archive, plan, write …) that is a thread started and joined per task — about 2 ms
on a small machine, on every hop of a commit. `run_on_thread_loop` runs each coroutine on the
loop of the calling thread instead, made on first use (again in a forked child: a loop does
not survive a fork), and cancels what the coroutine left running, as `asyncio.run` does.

It drives the loop itself rather than through `asyncio.Runner.run`, which does two things a
step does not want: every coroutine runs in the one context the runner copied on its first
call (a span or other context variable current in the caller is not seen by the coroutine),
and on a main thread it swaps the SIGINT handler around each call and, reading it back,
formats the finished task — with its result, a whole step's output — into a string it then
discards (work that grows with the output, for the in-process commit and the CLI). Here each
coroutine runs in a copy of its caller's context, as `asyncio.run` does, and Ctrl-C
interrupts it as it would any blocking call (what it left running is cancelled on the way
out).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_local = threading.local()


def _loop() -> asyncio.AbstractEventLoop:
    loop: asyncio.AbstractEventLoop | None = getattr(_local, "loop", None)
    if loop is None or loop.is_closed() or getattr(_local, "pid", None) != os.getpid():
        loop = asyncio.new_event_loop()  # a loop inherited through a fork is left alone
        _local.loop, _local.pid = loop, os.getpid()
    return loop


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
    loop = _loop()
    try:
        return loop.run_until_complete(coro)  # its task runs in a copy of this context
    finally:
        left = {t for t in asyncio.all_tasks(loop) if not t.done()}
        if left:  # what the coroutine started and did not await: cancelled, as asyncio.run does
            loop.run_until_complete(_settle(left))
