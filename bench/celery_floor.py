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
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _stack import percentile, release_result_handles

from ctxpipe.core.config import Settings
from ctxpipe.core.queues import COMMIT, EXTRACT
from ctxpipe.devstack.workers import WorkerProcess, start_worker
from ctxpipe.storage.netutil import free_port
from ctxpipe.storage.redis_server import start_redis, stop_redis

WORKERS = [(COMMIT, 2), (EXTRACT, 4)]


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
    procs: list[WorkerProcess] = []
    out: dict[str, tuple[float, float]] = {}
    try:
        for queue, conc in WORKERS:  # the app module is found from the project root
            procs.append(start_worker(settings, queue, conc, tmp, app="bench._noop_app"))
        for name, make in shapes().items():
            times = []
            for i in range(20 + runs):
                t0 = time.perf_counter()
                make().apply_async().get(timeout=30)  # type: ignore[attr-defined]
                if i >= 20:
                    times.append((time.perf_counter() - t0) * 1000)
            out[name] = (percentile(times, 0.5), percentile(times, 0.95))
    finally:
        release_result_handles("_noop_app")
        gc.collect()
        for p in procs:
            p.stop()
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
