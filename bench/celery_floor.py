"""What Celery itself costs a commit: the commit's canvas of tasks that do nothing.

    .venv/bin/python bench/celery_floor.py [--runs 60] [--task-events on,off]

ctxpipe's settings (`tasks.app.make_app`), a fresh Redis, workers as in
`bench/commit_latency.py` (`commit` ×2, `extract` ×4); three shapes, each submitted and
awaited one at a time: one task; a chain of five; the commit's chord canvas — a step, a chord of
four extractors into a step, then two steps. For each value of `--task-events` (the workers'
task events, `CTXPIPE_WORKER_TASK_EVENTS`) a fresh stack, in the order given; the p50 / p95
of each shape, after 20 warm-up runs. The chord overhead of `bench/commit_latency.py` cannot
be smaller than the canvas's figure here on the same machine.
"""

from __future__ import annotations

import argparse
import gc
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _stack import percentile

from ctxpipe.core.config import Settings
from ctxpipe.core.queues import COMMIT, EXTRACT
from ctxpipe.devstack.env import child_env
from ctxpipe.storage.netutil import free_port
from ctxpipe.storage.redis_server import start_redis, stop_redis

HERE = Path(__file__).resolve().parent
WORKERS = [(COMMIT, 2), (EXTRACT, 4)]


def _start_workers(settings: Settings, logdir: Path, procs: list[subprocess.Popen[bytes]]) -> None:
    """Start the workers into `procs` (stopped by the caller, even when one fails to start)."""
    env = child_env(settings)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    for queue, conc in WORKERS:
        log = logdir / f"{queue}.log"
        cmd = [sys.executable, "-m", "celery", "-A", "_noop_app", "worker", "-Q", queue]
        cmd += ["-c", str(conc), "-n", f"{queue}@localhost", "--without-gossip"]
        cmd += ["--without-mingle", "-l", "INFO"]
        with open(log, "wb") as fh:
            procs.append(
                subprocess.Popen(
                    cmd,
                    cwd=HERE,
                    env=env,
                    stdout=fh,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # stopped with its pool processes, as a group
                )
            )
    from _noop_app import app

    names = [f"{queue}@localhost" for queue, _ in WORKERS]
    deadline = time.monotonic() + 60
    while len(app.control.ping(destination=names, timeout=0.5)) < len(names):
        if any(p.poll() is not None for p in procs) or time.monotonic() > deadline:
            raise RuntimeError("a worker did not start: see the logs in " + str(logdir))


def _forget_results() -> None:
    """Let the awaited results unsubscribe from Redis now, while it runs, not at exit."""
    from _noop_app import app

    for mapping in getattr(app.backend, "_pending_results", ()):  # no public list
        for waiters in list(mapping.values()):
            for result in list(waiters.values()):
                app.backend.remove_pending_result(result)
    gc.collect()


def shapes() -> dict[str, Callable[[], object]]:
    from _noop_app import extract, step
    from celery import chain, chord, group

    def header() -> object:
        return group(extract.si().set(queue=EXTRACT) for _ in range(4))

    return {
        "one task": lambda: step.si(),
        "chain of 5": lambda: chain(*(step.si() for _ in range(5))),
        "commit canvas": lambda: chain(step.si(), chord(header(), step.s()), step.si(), step.si()),
    }


def run(events: bool, runs: int) -> dict[str, tuple[float, float]]:
    tmp = Path(tempfile.mkdtemp(prefix="ctxpipe-floor-"))
    redis_url = start_redis(tmp / "redis", free_port())
    settings = Settings(redis_url=redis_url, worker_task_events=events, var_dir=tmp / "var")
    os.environ["CTXPIPE_REDIS_URL"] = redis_url  # this process's app (_noop_app) sends there
    procs: list[subprocess.Popen[bytes]] = []
    out: dict[str, tuple[float, float]] = {}
    try:
        _start_workers(settings, tmp, procs)
        for name, make in shapes().items():
            times = []
            for i in range(20 + runs):
                t0 = time.perf_counter()
                make().apply_async().get(timeout=30)  # type: ignore[attr-defined]
                if i >= 20:
                    times.append((time.perf_counter() - t0) * 1000)
            out[name] = (percentile(times, 0.5), percentile(times, 0.95))
    finally:
        _forget_results()
        for p in procs:
            os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
        stop_redis(tmp / "redis")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--runs", type=int, default=60)
    ap.add_argument("--task-events", default="on,off", help="on, off, or several in turn")
    args = ap.parse_args()
    values = [v.strip() for v in args.task_events.split(",") if v.strip()]
    if not values or set(values) - {"on", "off"}:
        ap.error("--task-events takes on, off or a list of them (on,off)")
    for value in values:
        # each stack in a fresh interpreter: the app reads its settings once, at import
        if os.environ.get("_FLOOR_CHILD") != value:
            env = {**os.environ, "_FLOOR_CHILD": value}
            cmd = [sys.executable, __file__, "--runs", str(args.runs), "--task-events", value]
            subprocess.run(cmd, env=env, check=True)
            continue
        print(f"workers' task events {value}:")
        for name, (p50, p95) in run(value == "on", args.runs).items():
            print(f"  {name:14s} p50 {p50:6.1f} ms   p95 {p95:6.1f} ms")


if __name__ == "__main__":
    main()
