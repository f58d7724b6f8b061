"""The reaper's rules on real Redis and the PostgreSQL ledger: which commits a dead worker node
or a broker restart leaves behind, and that re-driving them is bounded."""

from __future__ import annotations

import time

import pytest
import redis

from ctxpipe.commit import steps
from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.commit.recovery import BrokerWatch, CommitReaper, WorkerRegistry, incarnation_id
from ctxpipe.core.session import RequestContext
from ctxpipe.storage.commit_ledger import CommitLedger

pytestmark = pytest.mark.integration

MESSAGES = [{"id": "m1", "role": "user", "content": "I live in Lisbon."}]


def submit(ledger: CommitLedger, commit_id: str) -> None:
    ctx = RequestContext(account_id="acme", user_id="u", agent_id="a", session_id=commit_id)
    req = CommitRequest(commit_id=commit_id, ctx=ctx, messages=MESSAGES)  # type: ignore[arg-type]
    assert steps.submit(ledger, req)


@pytest.fixture
def client(clean_redis: str) -> redis.Redis:
    return redis.Redis.from_url(clean_redis)


@pytest.fixture
def ledger(clean_db: str, database) -> CommitLedger:  # type: ignore[no-untyped-def]
    return CommitLedger(database)


def reaper(  # type: ignore[no-untyped-def]
    ledger: CommitLedger, client: redis.Redis, sent: list[tuple[str, str]], **kw
):
    reg = WorkerRegistry(client, ttl_s=0.3)
    redrive = lambda c, s: sent.append((c, s))  # noqa: E731
    return reg, CommitReaper(ledger, reg, BrokerWatch(client), redrive, **kw)


def test_a_dead_incarnation_has_its_commits_redriven_once_and_is_forgotten(
    ledger: CommitLedger, client: redis.Redis
) -> None:
    sent: list[tuple[str, str]] = []
    reg, reap = reaper(ledger, client, sent)
    reap.reap()  # the first look at this broker counts as a restart: nothing in flight yet
    submit(ledger, "c-dead")
    submit(ledger, "c-alive")
    dead, alive = incarnation_id("extract@h", 1), incarnation_id("extract@h", 2)
    reg.heartbeat(dead)
    reg.heartbeat(alive)
    reg.track(dead, "t1", "c-dead", "extract_profile")
    reg.track(dead, "t2", "c-dead", "extract_preferences")  # two tasks, one re-drive
    reg.track(alive, "t3", "c-alive", "archive")
    time.sleep(0.4)
    reg.heartbeat(alive)  # only `alive` keeps beating
    report = reap.reap()
    assert report.dead_nodes == [dead] and not report.broker_restarted
    assert sent == [("c-dead", "archive")]  # from the phase the ledger is in: enqueued
    assert ledger.get("c-dead").attempts["reap"] == 1
    assert dead not in reg.alive() and reg.orphans(dead) == []
    sent.clear()
    assert reap.reap().redriven == [] and sent == []  # forgotten: not re-driven again


def test_finished_commits_are_not_redriven(ledger: CommitLedger, client: redis.Redis) -> None:
    sent: list[tuple[str, str]] = []
    reg, reap = reaper(ledger, client, sent)
    reap.reap()
    submit(ledger, "c-done")
    ledger.fail("c-done", "write", "disk full")
    inc = incarnation_id("commit@h", 7)
    reg.heartbeat(inc)
    reg.track(inc, "t1", "c-done", "write")
    time.sleep(0.4)
    assert reap.reap().redriven == [] and sent == []


def test_a_commit_that_keeps_killing_its_worker_is_failed_with_the_reason(
    ledger: CommitLedger, client: redis.Redis
) -> None:
    sent: list[tuple[str, str]] = []
    reg, reap = reaper(ledger, client, sent, max_redrives=2)
    reap.reap()
    submit(ledger, "c-poison")
    for n in range(3):
        inc = incarnation_id("extract@h", 100 + n)
        reg.heartbeat(inc)
        reg.track(inc, f"t{n}", "c-poison", "archive")
        time.sleep(0.4)
        reap.reap()
    row = ledger.get("c-poison")
    assert len(sent) == 2 and row.phase == "failed"
    assert "re-driven 2 times after worker extract@h died" in row.error


def test_broker_watch_sees_a_new_run_of_the_broker(client: redis.Redis) -> None:
    watch = BrokerWatch(client)
    first = watch.restarted()  # a broker never seen before may have lost data: a restart
    assert first is not None and first >= 0
    assert watch.restarted() is not None  # not handled yet: still reported
    watch.acknowledge()
    assert watch.restarted() is None  # same run: nothing happened
    client.set(watch.key, "an-earlier-run")  # what a restarted broker would show
    assert watch.restarted() is not None
    watch.acknowledge()
    assert watch.restarted() is None


def test_a_restart_stays_reported_until_its_commits_were_redriven(
    ledger: CommitLedger, client: redis.Redis
) -> None:
    sent: list[tuple[str, str]] = []
    _, reap = reaper(ledger, client, sent)
    reap.reap()
    client.set(BrokerWatch(client).key, "an-earlier-run")

    def down(*_a: object, **_k: object) -> None:
        raise ConnectionError("PostgreSQL is down")

    real = ledger.accepted_before
    ledger.accepted_before = down  # type: ignore[method-assign]
    with pytest.raises(ConnectionError):
        reap.reap()
    ledger.accepted_before = real  # type: ignore[method-assign]
    assert reap.reap().broker_restarted  # seen again once the ledger answers


class StartedAgo(BrokerWatch):
    """A broker that restarted `uptime` seconds ago (the restart itself is shown above)."""

    def __init__(self, client: redis.Redis, uptime: float) -> None:
        super().__init__(client)
        self.uptime = uptime

    def restarted(self) -> float | None:
        return self.uptime


def test_a_broker_restart_redrives_the_commits_accepted_before_it(
    ledger: CommitLedger, client: redis.Redis
) -> None:
    sent: list[tuple[str, str]] = []
    reg = WorkerRegistry(client, ttl_s=0.3)
    submit(ledger, "c-before")
    ledger.advance("c-before", steps.CommitPhase.ARCHIVED)
    time.sleep(1.5)
    submit(ledger, "c-after")  # accepted by the new broker run: its messages are there
    reap = CommitReaper(ledger, reg, StartedAgo(client, 0.75), lambda c, s: sent.append((c, s)))
    report = reap.reap()
    assert report.broker_restarted
    assert sent == [("c-before", "extract")]
