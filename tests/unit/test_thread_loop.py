"""The event loop a worker thread keeps for the steps it runs (`core.thread_loop`)."""

from __future__ import annotations

import asyncio
import contextvars
import multiprocessing
import signal
import threading

import pytest

from ctxpipe.core.thread_loop import run_on_thread_loop


async def _loop_id() -> int:
    return id(asyncio.get_running_loop())


async def _pool_thread() -> threading.Thread:
    return await asyncio.to_thread(threading.current_thread)


def test_a_thread_runs_every_coroutine_on_one_loop_and_keeps_its_thread_pool() -> None:
    assert run_on_thread_loop(_loop_id()) == run_on_thread_loop(_loop_id())
    # asyncio.run starts a default pool per call and joins its threads after: here they stay
    served = [run_on_thread_loop(_pool_thread()) for _ in range(5)]
    assert all(t.is_alive() and t is not threading.current_thread() for t in served)


def test_each_thread_has_its_own_loop() -> None:
    seen: list[int] = []
    worker = threading.Thread(target=lambda: seen.append(run_on_thread_loop(_loop_id())))
    worker.start()
    worker.join()
    assert seen and seen[0] != run_on_thread_loop(_loop_id())


def test_what_a_coroutine_leaves_running_is_cancelled_when_it_returns() -> None:
    cancelled = asyncio.Event()

    async def forever() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def leaves_a_task() -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(forever())
        await asyncio.sleep(0)
        return task

    task = run_on_thread_loop(leaves_a_task())
    assert task.cancelled() and cancelled.is_set()


def test_an_error_of_the_coroutine_is_raised_and_the_loop_still_serves() -> None:
    async def fails() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        run_on_thread_loop(fails())
    assert run_on_thread_loop(_loop_id()) == run_on_thread_loop(_loop_id())


_CURRENT: contextvars.ContextVar[str] = contextvars.ContextVar("current", default="")


async def _current() -> str:
    _CURRENT.set("set inside")  # a copy: the caller's value is not changed
    return "seen"


async def _read_current() -> str:
    return _CURRENT.get()


def test_each_coroutine_sees_its_callers_context_and_leaves_it_unchanged() -> None:
    # a span current in a worker's task must be the parent of the step's spans
    for value in ("first task", "second task"):
        token = _CURRENT.set(value)
        try:
            assert run_on_thread_loop(_read_current()) == value
            assert run_on_thread_loop(_current()) == "seen"
            assert _CURRENT.get() == value
        finally:
            _CURRENT.reset(token)


class _Costly:
    """A result whose text form must never be built to run the step that returns it."""

    formatted = 0

    def __repr__(self) -> str:
        _Costly.formatted += 1
        return "costly"


async def _costly() -> _Costly:
    return _Costly()


def test_the_main_threads_sigint_handler_is_left_alone_and_no_result_is_formatted() -> None:
    assert threading.current_thread() is threading.main_thread()
    before = signal.getsignal(signal.SIGINT)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a CLI
    try:
        assert isinstance(run_on_thread_loop(_costly()), _Costly)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)
    assert signal.getsignal(signal.SIGINT) is before
    assert _Costly.formatted == 0


def test_inside_a_running_loop_it_refuses() -> None:
    async def nested() -> None:
        run_on_thread_loop(_loop_id())

    with pytest.raises(RuntimeError, match="inside a running event loop"):
        asyncio.run(nested())


async def _loop() -> asyncio.AbstractEventLoop:
    return asyncio.get_running_loop()


_PARENT_LOOP: list[asyncio.AbstractEventLoop] = []  # held, so no new loop takes its address


def _child(out: multiprocessing.Queue[bool]) -> None:
    mine = run_on_thread_loop(_loop())
    out.put(mine is not _PARENT_LOOP[0] and run_on_thread_loop(_pool_thread()).is_alive())


def test_a_forked_child_makes_a_loop_of_its_own() -> None:
    _PARENT_LOOP[:] = [run_on_thread_loop(_loop())]
    ctx = multiprocessing.get_context("fork")
    out: multiprocessing.Queue[bool] = ctx.Queue()
    child = ctx.Process(target=_child, args=(out,))
    child.start()
    child.join(30)
    assert child.exitcode == 0 and out.get(timeout=5)
