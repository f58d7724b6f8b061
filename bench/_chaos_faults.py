"""The faults of `bench/chaos.py`: worker nodes SIGKILLed at random, the broker restarted
(once with its data deleted), PostgreSQL stopped for a while."""

from __future__ import annotations

import random
import shutil
import signal
import threading
import time
from collections import Counter
from typing import Any

from ctxpipe.devstack import DevStack
from ctxpipe.devstack.procs import ProcRecord, family

WORKERS = ("worker-commit", "worker-extract", "worker-embed", "worker-maintenance")


class Faults(threading.Thread):
    """Kills a random worker node every `every` s; the one-off faults at progress marks."""

    def __init__(self, stack: DevStack, progress: Any, every: float, pg_down_s: float, seed: int):
        super().__init__(name="chaos-faults", daemon=True)
        self.stack, self.progress, self.every, self.pg_down_s = stack, progress, every, pg_down_s
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.counts: Counter[str] = Counter()
        self.log: list[str] = []
        self.marks = [(0.3, self.wipe_broker), (0.6, self.stop_pg)]

    def note(self, what: str) -> None:
        self.log.append(f"{time.strftime('%H:%M:%S')} {what}")
        print(f"  fault: {what}", flush=True)

    def run(self) -> None:
        while not self.stop.wait(self.every * self.rng.uniform(0.6, 1.4)):
            self.kill_node(self.rng.choice(WORKERS))
            while self.marks and self.progress() >= self.marks[0][0]:
                self.marks.pop(0)[1]()

    def kill_node(self, name: str) -> None:
        rec = ProcRecord.load(self.stack.run_dir, name)
        if rec is None or not rec.alive():
            return  # being restarted by the supervisor
        for pid in family(rec.pid):
            try:
                signal_kill(pid)
            except ProcessLookupError:
                pass
        self.counts[f"kill {name}"] += 1
        self.note(f"SIGKILL {name} (whole node)")

    def wipe_broker(self) -> None:
        self.stack.redis.stop()
        for f in self.stack.redis.state_dir.glob("appendonly*"):
            shutil.rmtree(f) if f.is_dir() else f.unlink()
        self.stack.redis.start()
        self.counts["broker restart, data deleted"] += 1
        self.note("Redis restarted with its data deleted (every queued message lost)")

    def restart_broker(self) -> None:
        self.stack.redis.stop()
        self.stack.redis.start()
        self.counts["broker restart (AOF)"] += 1
        self.note("Redis restarted (append-only file kept)")

    def stop_pg(self) -> None:
        self.stack.postgres.stop()
        self.note(f"PostgreSQL stopped for {self.pg_down_s:.0f}s")
        time.sleep(self.pg_down_s)
        self.stack.postgres.start()
        self.counts[f"PostgreSQL stopped {self.pg_down_s:.0f}s"] += 1


def signal_kill(pid: int) -> None:
    import os

    os.kill(pid, signal.SIGKILL)
