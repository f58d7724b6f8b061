"""The reaper's rules on real Redis and the PostgreSQL ledger: which commits a dead worker node
or a broker restart leaves behind, and that re-driving them is bounded."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
import redis

from ctxpipe.commit import steps
from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.commit.recovery import BrokerWatch, CommitReaper, WorkerRegistry, incarnation_id
from ctxpipe.core.errors import LockTimeoutError
from ctxpipe.core.session import RequestContext
from ctxpipe.fs.redis_lock import HELD_PREFIX, RedisOwnerLock, set_holder
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


@pytest.fixture
def holder() -> Iterator[None]:
    yield
    set_holder("")  # this test process is anonymous again


def test_a_dead_nodes_owner_locks_are_freed_before_its_commits_are_redriven(
    ledger: CommitLedger, client: redis.Redis, holder: None
) -> None:
    """A node SIGKILLed inside an owner lock would otherwise hold up that owner's next commits
    until the lock expires; the reaper frees it, and only what that node held."""
    sent: list[tuple[str, str]] = []
    reg, reap = reaper(ledger, client, sent)
    reap.reap()
    submit(ledger, "c-locked")
    dead, other = incarnation_id("commit@h", 11), incarnation_id("commit@h", 12)
    lock = RedisOwnerLock(client, ttl_s=60, default_timeout=0.2)
    set_holder(dead)
    dying = lock.hold("owner:acme/u")  # entered and never left: its holder dies inside
    dying.__enter__()
    set_holder(other)
    with lock.hold("owner:acme/v"):  # another node's lock, held through the reap
        reg.heartbeat(dead)
        reg.heartbeat(other)
        reg.track(dead, "t1", "c-locked", "plan")
        with pytest.raises(LockTimeoutError):  # the owner is blocked while its holder lives
            with lock.hold("owner:acme/u"):
                pass
        time.sleep(0.4)
        reg.heartbeat(other)
        report = reap.reap()
        assert report.dead_nodes == [dead] and report.locks_freed == 1
        assert sent == [("c-locked", "archive")]
        with lock.hold("owner:acme/u", timeout=0.2):  # free at once, not in 60 s
            pass
        with pytest.raises(LockTimeoutError):  # the living node's lock is left alone
            with lock.hold("owner:acme/v", timeout=0.2):
                pass
    assert not client.exists(HELD_PREFIX + dead)
    assert client.smembers(HELD_PREFIX + other) == set()  # released: no longer listed
    dying.__exit__(None, None, None)  # the late holder's release fails quietly


def test_a_lock_that_expired_and_was_taken_by_another_is_not_freed(
    client: redis.Redis, holder: None
) -> None:
    dead, alive = incarnation_id("commit@h", 21), incarnation_id("commit@h", 22)
    key = "ctxpipe:lock:owner:acme/w"
    client.set(key, f"{dead}#1", px=300)  # what the dead node left: its lock and its list
    client.sadd(HELD_PREFIX + dead, json.dumps([key, f"{dead}#1"]))
    set_holder(alive)
    lock = RedisOwnerLock(client, ttl_s=30, default_timeout=2)
    with lock.hold("owner:acme/w"):  # taken by `alive` once the dead node's lock expired
        assert WorkerRegistry(client).release_locks(dead) == 0
        assert client.get(key).decode().startswith(f"{alive}#")  # type: ignore[union-attr]
    assert not client.exists(HELD_PREFIX + dead)


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
        reg.track(inc, f"t{n}", "c-poison", "archive")  # received ...
        reg.track(inc, f"t{n}", "c-poison", "archive", running=True)  # ... and started
        time.sleep(0.4)
        reap.reap()
    row = ledger.get("c-poison")
    assert len(sent) == 2 and row.phase == "failed"
    assert row.error.startswith("3 worker nodes died while its task was running")
    assert "worker extract@h died" in row.error


def test_only_deaths_that_caught_its_task_running_count_against_a_commit(
    ledger: CommitLedger, client: redis.Redis
) -> None:
    """A task a node had received but not started (prefetched, queued behind another) and a
    broker restart cannot have been caused by the commit: they re-drive it, without end, and
    never fail it; the deaths that caught it running are bounded."""
    sent: list[tuple[str, str]] = []
    reg, reap = reaper(ledger, client, sent, max_redrives=2)
    reap.reap()
    submit(ledger, "c-innocent")
    for n in range(4):  # four nodes die holding its task, never started
        inc = incarnation_id("commit@h", 200 + n)
        reg.heartbeat(inc)
        reg.track(inc, f"q{n}", "c-innocent", "plan")
        time.sleep(0.4)
        assert reap.reap().redriven == ["c-innocent"]
    restarted = CommitReaper(  # and the broker restarts twice, after it was accepted
        ledger, reg, StartedAgo(client, 0.0), lambda c, s: sent.append((c, s)), max_redrives=2
    )
    for _ in range(2):
        assert restarted.reap().redriven == ["c-innocent"]
    row = ledger.get("c-innocent")
    assert row.phase == "enqueued" and len(sent) == 6
    assert row.attempts["reap"] == 6 and "died-running" not in row.attempts
    for n in range(3):  # now its task is running each time: the third death fails it
        inc = incarnation_id("commit@h", 300 + n)
        reg.heartbeat(inc)
        reg.track(inc, f"r{n}", "c-innocent", "plan", running=True)
        reg.track(inc, f"o{n}", "c-other", "plan")  # another commit's task, only received
        time.sleep(0.4)
        reap.reap()
    row = ledger.get("c-innocent")
    assert row.phase == "failed" and row.attempts["died-running"] == 3
    assert len(sent) == 8 and "killing its worker" in row.error


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


def test_a_hold_stays_listed_when_an_earlier_hold_of_its_key_leaves_after_it(
    client: redis.Redis, holder: None
) -> None:
    """Two processes of one node take the same lock in turn; the first one's bookkeeping, done
    after the second acquired, must not unlist the second (a dead node would keep it)."""
    node = incarnation_id("commit@h", 31)
    set_holder(node)
    lock = RedisOwnerLock(client, ttl_s=30, default_timeout=1)
    first = lock.hold("owner:acme/x")
    first.__enter__()
    client.delete("ctxpipe:lock:owner:acme/x")  # the first released; its unlisting comes later
    with lock.hold("owner:acme/x"):
        first.__exit__(None, None, None)
        (entry,) = client.smembers(HELD_PREFIX + node)
        assert json.loads(entry)[1] == client.get("ctxpipe:lock:owner:acme/x").decode()  # type: ignore[union-attr]
        assert WorkerRegistry(client).release_locks(node) == 1  # the node dies: freed
    assert not client.exists("ctxpipe:lock:owner:acme/x")


def test_a_quiet_commit_whose_next_task_nobody_holds_nor_any_queue_is_redriven(
    ledger: CommitLedger, client: redis.Redis
) -> None:
    """The broker hands a message over before the worker records it: a worker killed in
    between loses the commit's next task with no trace in the registry. Such a commit is
    re-driven once quiet — not while a live worker holds a task of it (a slow LLM call), nor
    while a message of it waits in the commit path's queues (behind a backlog); a backlog of
    other commits does not hold it up, and queues too long to read leave it to the
    sweeper."""
    sent: list[tuple[str, str]] = []
    waiting: list[set[str] | None] = [{"c-lost"}]
    reg = WorkerRegistry(client, ttl_s=5)
    reap = CommitReaper(
        ledger,
        reg,
        BrokerWatch(client),
        lambda c, s: sent.append((c, s)),
        waiting=lambda: waiting[0],
        lost_after_s=0.3,
    )
    reap.reap()  # the first look at this broker counts as a restart: nothing in flight yet
    submit(ledger, "c-lost")
    submit(ledger, "c-running")
    live = incarnation_id("commit@h", 41)
    reg.heartbeat(live)
    reg.track(live, "t1", "c-running", "archive", running=True)
    assert reap.reap().redriven == []  # not quiet yet
    time.sleep(0.5)
    assert reap.reap().redriven == []  # quiet, but its message waits in a queue
    waiting[0] = None
    assert reap.reap().redriven == []  # the queues too long to read
    waiting[0] = {"c-other", "c-more"}  # a backlog of other commits' messages
    report = reap.reap()
    assert report.lost == report.redriven == ["c-lost"] and sent == [("c-lost", "archive")]
    row = ledger.get("c-lost")
    assert row.attempts == {"reap": 1} and row.phase == "enqueued"
    assert reap.reap().redriven == []  # re-driven just now: quiet again only later
    reg.untrack(live, "t1")  # the held commit's task finished without progress: lost too
    time.sleep(0.5)
    assert sorted(reap.reap().lost) == ["c-lost", "c-running"]


def test_the_commits_waiting_in_the_queues_are_read_from_the_celery_messages(
    client: redis.Redis, clean_redis: str
) -> None:
    """The messages Celery puts on the broker, read back: each commit task's commit (the
    chord body's is its second argument), at any priority; other tasks and foreign messages
    are left out; too many messages to read is None."""
    from celery import Celery

    from tasks.queues import PLAN, START, SUBMIT, TASK_ROUTES
    from tasks.recovery import waiting_commits

    app = Celery("producer", broker=clean_redis, set_as_current=False)
    app.conf.task_routes = TASK_ROUTES
    client.delete("commit", "extract")
    try:
        app.send_task("ctxpipe.commit.archive", args=["c-a"])
        app.send_task("ctxpipe.commit.extract_profile", args=["c-b"])
        app.send_task(PLAN, args=[[{"x": 1}, None], "c-c"], priority=6)
        app.send_task(START, args=["c-d", "archive"])
        app.send_task(SUBMIT, args=[{"commit_id": "c-e"}])  # not recorded yet: not a commit's
        client.rpush("commit", b"not a celery message")
        assert client.llen("commit") >= 4 and client.llen("extract") == 1
        assert waiting_commits(client) == {"c-a", "c-b", "c-c", "c-d"}
        assert waiting_commits(client, limit=5) is None  # 6 messages
        assert waiting_commits(client, limit=6) == {"c-a", "c-b", "c-c", "c-d"}
    finally:
        app.close()
        client.delete("commit", "extract", "commit\x06\x166")
