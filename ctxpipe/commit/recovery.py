"""Fast recovery of commits whose worker died: worker heartbeats and the CommitReaper.

With the Redis broker, a task message taken by a worker node that dies without acknowledging it
(the whole node SIGKILLed, the machine lost) comes back only after the visibility timeout —
hours, because it must exceed the longest task. Lowering it would re-deliver long LLM-bound
tasks that are still running. Instead every worker node *incarnation* (node name, pid, start
time) keeps a short-lived heartbeat key alive and records, per running task, the commit and
phase it works on; the reaper (a beat job every few seconds) re-drives at once the commits of an
incarnation whose heartbeat expired, after freeing the owner locks it held (they would
otherwise hold up the owner's commits until they expire). A broker restart is detected by the
Redis `run_id`: queued messages and chord counters may be gone (a broker without persistence,
or one restarted from an older file), so every commit in flight that was accepted before the
restart is re-driven too. A commit whose next task message was lost with no worker holding
it — the broker hands a message over before the worker records it, and a worker killed in
between loses it — is re-driven once it has been quiet for `lost_after_s` while no live worker
holds a task of it and no message of it waits in the commit path's queues (they are read: a
backlog does not hold up the others' recovery). The stuck-commit sweeper stays as the last
resort, and takes over when the queues hold too many messages to read every few seconds.

Every step is idempotent (write-once phase outputs, deterministic URIs and event ids), so a
re-drive that races with a late original delivery costs work, never correctness. A commit
whose task was *running* on `max_redrives` worker nodes that died is failed with the reason (its
task keeps killing its worker). Only those deaths count: a task a node had received but not
started (prefetched, queued behind another) and a broker restart cannot have been caused by the
commit, so they re-drive it without counting against it.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, cast

import redis

from ctxpipe.commit.steps import resume_point
from ctxpipe.fs.redis_lock import release_held_by

PREFIX = "ctxpipe:workers"
# the ledger's attempt counters of the reaper: every re-drive, and the worker deaths that caught
# the commit's task running (the ones bounded by `max_redrives`)
REDRIVES = "reap"
DIED_RUNNING = "died-running"
RUNNING_TTL_S = 7 * 24 * 3600


def incarnation_id(node: str | None = None, pid: int | None = None) -> str:
    """`node|pid|start time`: one per worker process start (a restarted node is a new one)."""
    return f"{node or socket.gethostname()}|{pid or os.getpid()}|{time.time():.3f}"


def node_of(incarnation: str) -> str:
    return incarnation.split("|", 1)[0]


class Orphan(NamedTuple):
    """A commit task a dead incarnation held: its commit, its phase, and whether it had
    started (a task received but not started cannot have killed its worker)."""

    commit_id: str
    phase: str
    running: bool


def _tasks(entries: list[bytes]) -> list[Orphan]:
    """The registry's entries of an incarnation's tasks (`WorkerRegistry.track`), read."""
    out: list[Orphan] = []
    for raw in entries:
        try:
            entry = json.loads(raw)
            out.append(
                Orphan(str(entry["commit"]), str(entry["phase"]), bool(entry.get("running")))
            )
        except (ValueError, KeyError, TypeError):
            continue
    return out


class WorkerRegistry:
    """Heartbeats of worker incarnations and the commit phases each one is running (Redis)."""

    def __init__(self, client: redis.Redis, *, ttl_s: float = 10.0, prefix: str = PREFIX) -> None:
        self.client = client
        self.ttl_s = ttl_s
        self._alive = f"{prefix}:alive"
        self._hb = f"{prefix}:hb:"
        self._running = f"{prefix}:running:"

    def heartbeat(self, incarnation: str) -> None:
        pipe = self.client.pipeline(transaction=False)
        pipe.sadd(self._alive, incarnation)
        pipe.set(self._hb + incarnation, "1", px=int(self.ttl_s * 1000))
        pipe.execute()

    def retire(self, incarnation: str) -> None:
        """A clean shutdown: nothing to re-drive (acks_late tasks went back to the queue)."""
        pipe = self.client.pipeline(transaction=False)
        pipe.delete(self._hb + incarnation, self._running + incarnation)
        pipe.srem(self._alive, incarnation)
        pipe.execute()

    def track(
        self, incarnation: str, task_id: str, commit_id: str, phase: str, *, running: bool = False
    ) -> None:
        """Record that the incarnation holds a task of `commit_id`: received (prefetched, or
        waiting for a pool process), or `running` once a process started it."""
        entry = {"commit": commit_id, "phase": phase, "at": time.time(), "running": running}
        pipe = self.client.pipeline(transaction=False)
        pipe.hset(self._running + incarnation, task_id, json.dumps(entry))
        pipe.expire(self._running + incarnation, RUNNING_TTL_S)
        pipe.execute()

    def untrack(self, incarnation: str, task_id: str) -> None:
        self.client.hdel(self._running + incarnation, task_id)

    def alive(self) -> list[str]:
        """Incarnations whose heartbeat is current."""
        members = self._members()
        return [i for i, ok in zip(members, self._beating(members), strict=True) if ok]

    def dead(self) -> list[str]:
        members = self._members()
        return [i for i, ok in zip(members, self._beating(members), strict=True) if not ok]

    def orphans(self, incarnation: str) -> list[Orphan]:
        """Every commit task the incarnation held, received or running."""
        return _tasks(cast(list[bytes], self.client.hvals(self._running + incarnation)))

    def release_locks(self, incarnation: str) -> int:
        """Free the owner locks a dead incarnation still holds (`RedisOwnerLock` names its
        holder); how many were freed."""
        return release_held_by(self.client, incarnation)

    def forget(self, incarnation: str) -> None:
        pipe = self.client.pipeline(transaction=False)
        pipe.delete(self._running + incarnation)
        pipe.srem(self._alive, incarnation)
        pipe.execute()

    def held(self) -> set[str]:
        """The commits of which a live incarnation holds a task (received or running)."""
        alive = self.alive()
        if not alive:
            return set()
        pipe = self.client.pipeline(transaction=False)
        for inc in alive:
            pipe.hvals(self._running + inc)
        return {t.commit_id for values in pipe.execute() for t in _tasks(values)}

    def _members(self) -> list[str]:
        return sorted(
            m.decode() if isinstance(m, bytes) else m
            for m in cast(set[bytes | str], self.client.smembers(self._alive))
        )

    def _beating(self, incarnations: list[str]) -> list[bool]:
        if not incarnations:
            return []
        pipe = self.client.pipeline(transaction=False)
        for i in incarnations:
            pipe.exists(self._hb + i)
        return [bool(x) for x in pipe.execute()]


class BrokerWatch:
    """Tells when the broker restarted (its `run_id` changed) since the last look."""

    def __init__(self, client: redis.Redis, key: str = f"{PREFIX}:broker-run-id") -> None:
        self.client = client
        self.key = key

    def restarted(self) -> float | None:
        """Seconds since the broker started if it restarted since the last `acknowledge`,
        else None. A broker that never saw us counts as restarted (it may have lost data: a
        fresh server, or one restarted without persistence)."""
        info = cast(dict[str, Any], self.client.info("server"))
        self._run_id = str(info.get("run_id", ""))
        seen = self.client.get(self.key)
        seen = seen.decode() if isinstance(seen, bytes) else seen
        return None if seen == self._run_id else float(info.get("uptime_in_seconds", 0))

    def acknowledge(self) -> None:
        """The restart seen by `restarted` has been handled (its commits re-driven)."""
        run_id = getattr(self, "_run_id", None)
        if run_id:
            self.client.set(self.key, run_id)


class ReaperLedger(Protocol):
    def get(self, commit_id: str) -> Any: ...
    def accepted_before(self, age_s: float, limit: int = 100) -> list[tuple[str, str, dict]]: ...
    def stuck(self, older_than_s: float, limit: int = 100) -> list[tuple[str, str, dict]]: ...
    def bump_attempt(self, commit_id: str, key: str) -> int: ...
    def touch(self, commit_id: str) -> None: ...
    def fail(self, commit_id: str, phase: str, error: str) -> None: ...


@dataclass
class ReapReport:
    dead_nodes: list[str] = field(default_factory=list)
    broker_restarted: bool = False
    redriven: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)  # re-driven: their next task was lost
    failed: list[str] = field(default_factory=list)
    locks_freed: int = 0


class CommitReaper:
    """Re-drives the commits of dead worker incarnations, and after a broker restart."""

    def __init__(
        self,
        ledger: ReaperLedger,
        registry: WorkerRegistry,
        watch: BrokerWatch,
        redrive: Callable[[str, str], None],
        *,
        max_redrives: int = 5,
        limit: int = 1000,
        waiting: Callable[[], set[str] | None] | None = None,
        lost_after_s: float = 0.0,
    ) -> None:
        """`max_redrives`: re-drives after a worker died while running the commit's task; the
        next such death fails the commit. `waiting`: the commits with a message waiting in the
        commit path's queues (None: unknown, too many to read); with it and `lost_after_s` >
        0, a commit quiet that long that no live worker holds a task of and no queued message
        names lost its next task: re-driven."""
        self.ledger = ledger
        self.registry = registry
        self.watch = watch
        self.redrive = redrive
        self.max_redrives = max_redrives
        self.limit = limit
        self.waiting = waiting
        self.lost_after_s = lost_after_s

    def reap(self) -> ReapReport:
        report = ReapReport()
        done: set[str] = set()
        for inc in self.registry.dead():
            report.dead_nodes.append(inc)
            # first: the re-driven commits (and any other of the same owners) need them
            report.locks_freed += self.registry.release_locks(inc)
            orphans = self.registry.orphans(inc)
            running = {o.commit_id for o in orphans if o.running}
            for orphan in orphans:
                if orphan.commit_id not in done:
                    done.add(orphan.commit_id)
                    self._redrive(
                        orphan.commit_id,
                        f"worker {node_of(inc)} died",
                        report,
                        died_running=orphan.commit_id in running,
                    )
            self.registry.forget(inc)
        since = self.watch.restarted()
        if since is not None:
            report.broker_restarted = True
            # commits accepted before the broker came up: any message of theirs may be gone
            # (a queued task, a chord's counter); those accepted since are on the new broker
            for commit_id, _phase, _attempts in self.ledger.accepted_before(since, self.limit):
                if commit_id not in done:
                    done.add(commit_id)
                    self._redrive(commit_id, "the broker restarted", report, died_running=False)
            # only now: a reap that failed half-way (PostgreSQL down) sees the restart again
            self.watch.acknowledge()
        if self.waiting is not None and self.lost_after_s > 0:
            self._lost(done, report)
        return report

    def _lost(self, done: set[str], report: ReapReport) -> None:
        """Re-drive the quiet commits whose next task no one holds and no queue holds. In
        this order — the ledger, the queues, the workers — a message taken from a queue after
        the queues were read is held by then."""
        stuck = self.ledger.stuck(self.lost_after_s, self.limit)
        quiet = [c for c, _p, _a in stuck if c not in done]
        if not quiet or self.waiting is None:
            return
        waiting = self.waiting()
        if waiting is None:
            return  # too many messages to read: the sweeper's
        held = self.registry.held()
        for commit_id in quiet:
            # held: running (an LLM call may be slow), prefetched or waiting for its ETA;
            # waiting: in a queue behind others
            if commit_id in held or commit_id in waiting:
                continue
            done.add(commit_id)
            if self._redrive(commit_id, "its next task was lost", report, died_running=False):
                report.lost.append(commit_id)

    def _redrive(self, commit_id: str, why: str, report: ReapReport, *, died_running: bool) -> bool:
        """Re-drive the commit from its ledger phase (True), or fail it past the bound."""
        row = self.ledger.get(commit_id)
        start = resume_point(row.phase) if row is not None else None
        if row is None or start is None:
            return False  # finished, failed or unknown: nothing to do
        self.ledger.bump_attempt(commit_id, REDRIVES)
        deaths = self.ledger.bump_attempt(commit_id, DIED_RUNNING) if died_running else 0
        if deaths > self.max_redrives:
            self.ledger.fail(
                commit_id,
                row.phase,
                f"{deaths} worker nodes died while its task was running (the last time: "
                f"{why}); it keeps killing its worker (see the worker logs)",
            )
            report.failed.append(commit_id)
            return False
        self.ledger.touch(commit_id)
        self.redrive(commit_id, start)
        report.redriven.append(commit_id)
        return True


__all__ = [
    "DIED_RUNNING",
    "REDRIVES",
    "BrokerWatch",
    "CommitReaper",
    "Orphan",
    "ReapReport",
    "WorkerRegistry",
    "incarnation_id",
    "node_of",
]
