"""Recovery: what the reaper asks of the ledger after a broker restart (the commits accepted
before it, re-driven without end; one whose task keeps dying with its worker, failed with the
reason)."""

from __future__ import annotations

import time

from ledger_world import Ledger, make_req, row_of

from ctxpipe.commit import steps
from ctxpipe.commit.recovery import CommitReaper, Orphan
from ctxpipe.core.enums import CommitPhase


class NoDeadWorkers:
    """A worker registry in which nobody died (the reaper's other source is the broker)."""

    def dead(self) -> list[str]:
        return []


class RestartedAgo:
    """A broker that restarted `uptime` seconds ago and was not handled yet."""

    def __init__(self, uptime: float) -> None:
        self.uptime = uptime
        self.acknowledged = 0

    def restarted(self) -> float | None:
        return self.uptime

    def acknowledge(self) -> None:
        self.acknowledged += 1


def test_a_broker_restart_redrives_the_commits_accepted_before_it(ledger: Ledger) -> None:
    for cid in ("enqueued", "archived", "registered", "failed"):
        steps.submit(ledger, make_req(cid, cid))
    ledger.advance("archived", CommitPhase.ARCHIVED)
    ledger.advance("registered", CommitPhase.REGISTERED)
    ledger.fail("failed", "archive", "boom")
    time.sleep(0.5)
    steps.submit(ledger, make_req("after", "after"))  # accepted since: its messages are there
    sent: list[tuple[str, str]] = []
    watch = RestartedAgo(0.25)
    reaper = CommitReaper(
        ledger,
        NoDeadWorkers(),  # type: ignore[arg-type]
        watch,  # type: ignore[arg-type]
        lambda c, s: sent.append((c, s)),
    )
    report = reaper.reap()
    assert report.broker_restarted and watch.acknowledged == 1
    assert sorted(sent) == [("archived", "extract"), ("enqueued", "archive")]
    assert sorted(report.redriven) == ["archived", "enqueued"]
    assert row_of(ledger, "enqueued").attempts == {"reap": 1}
    assert row_of(ledger, "after").attempts == {}


def test_broker_restarts_redrive_a_commit_without_end_and_never_fail_it(ledger: Ledger) -> None:
    steps.submit(ledger, make_req("c-caught"))
    time.sleep(0.05)
    sent: list[tuple[str, str]] = []
    reaper = CommitReaper(
        ledger,
        NoDeadWorkers(),  # type: ignore[arg-type]
        RestartedAgo(0.0),  # type: ignore[arg-type]
        lambda c, s: sent.append((c, s)),
        max_redrives=2,
    )
    reports = [reaper.reap() for _ in range(4)]
    assert len(sent) == 4 and not any(r.failed for r in reports)
    row = row_of(ledger, "c-caught")
    assert row.phase == "enqueued" and row.attempts == {"reap": 4}


class DyingWorkers:
    """Worker nodes that each die while running a task of `commit_id`, one per reap."""

    def __init__(self, commit_id: str) -> None:
        self.commit_id, self.n = commit_id, 0

    def dead(self) -> list[str]:
        self.n += 1
        return [f"extract@h|{self.n}|0"]

    def release_locks(self, incarnation: str) -> int:
        return 0

    def orphans(self, incarnation: str) -> list[Orphan]:
        return [Orphan(self.commit_id, "extract_profile", running=True)]

    def forget(self, incarnation: str) -> None:
        pass


class NoRestart(RestartedAgo):
    def restarted(self) -> float | None:
        return None


def test_a_commit_whose_task_keeps_killing_its_worker_is_failed_with_the_reason(
    ledger: Ledger,
) -> None:
    steps.submit(ledger, make_req("c-poison"))
    sent: list[tuple[str, str]] = []
    reaper = CommitReaper(
        ledger,
        DyingWorkers("c-poison"),  # type: ignore[arg-type]
        NoRestart(0.0),  # type: ignore[arg-type]
        lambda c, s: sent.append((c, s)),
        max_redrives=2,
    )
    reports = [reaper.reap() for _ in range(3)]
    assert len(sent) == 2 and reports[2].failed == ["c-poison"]
    row = row_of(ledger, "c-poison")
    assert row.phase == "failed" and row.attempts == {"reap": 3, "died-running": 3}
    assert (row.error or "").startswith("3 worker nodes died while its task was running")
    assert "worker extract@h died" in (row.error or "")
    assert reaper.reap().redriven == []  # failed: nothing more to do
