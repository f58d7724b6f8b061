"""OutboxStore claim side on real PostgreSQL: SKIP LOCKED claims, leases, backoff, dead,
requeue, re-arming, and the `ctxpipe outbox` commands. Leases and backoff run on a clock the
tests step forward, never on sleeps."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from typer.testing import CliRunner

from ctxpipe.core.enums import OutboxEventType, OutboxStatus
from ctxpipe.core.models import OutboxEvent
from ctxpipe.storage.db import Database
from ctxpipe.storage.outbox_store import OutboxStore


class SteppedClock:
    """A clock that starts at the real time and moves only when the test says so."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> SteppedClock:
    return SteppedClock()


@pytest.fixture
def store(clean_db: str, clock: SteppedClock) -> Iterator[OutboxStore]:
    db = Database(clean_db, min_size=1, max_size=8)
    yield OutboxStore(db, "ctx", lease_s=30.0, backoff_base_s=0.2, backoff_max_s=1.0, clock=clock)
    db.close()


def events(n: int, max_retries: int = 5, prefix: str = "p") -> list[OutboxEvent]:
    return [
        OutboxEvent(
            event_id=OutboxEvent.make_id(
                OutboxEventType.UPSERT_CONTEXT, f"ctx://acme/users/u/memories/{prefix}{i}", 1
            ),
            event_type=OutboxEventType.UPSERT_CONTEXT,
            uri=f"ctx://acme/users/u/memories/{prefix}{i}",
            payload={"version": 1},
            max_retries=max_retries,
        )
        for i in range(n)
    ]


def sql(url: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        cur = conn.execute(query, params)
        return cur.fetchall() if cur.description else []


def test_append_is_idempotent_and_claim_leases(store, clean_db):  # type: ignore[no-untyped-def]
    evs = events(5)
    assert len(store.append_batch(evs)) == 5
    assert store.append_batch(evs) == []  # deterministic ids: nothing new
    claimed = store.claim_batch("w1", limit=3)
    assert len(claimed) == 3
    assert all(e.status is OutboxStatus.CLAIMED and e.worker_id == "w1" for e in claimed)
    assert all(e.lease_until is not None for e in claimed)
    order = sorted(e.event_id for e in evs)  # one transaction: same created_at, then by id
    assert [e.event_id for e in claimed] == order[:3]
    rest = store.claim_batch("w2", limit=10)
    assert [e.event_id for e in rest] == order[3:]
    assert store.claim_batch("w3", limit=10) == []
    assert store.mark_done([e.event_id for e in claimed], worker_id="w1") == 3
    assert store.counts()["done"] == 3 and store.counts()["claimed"] == 2


def test_concurrent_claimers_never_share_an_event(store):  # type: ignore[no-untyped-def]
    store.append_batch(events(200))
    got: dict[str, list[str]] = {}

    def claim(name: str) -> None:
        mine: list[str] = []
        while batch := store.claim_batch(name, limit=7):
            mine.extend(e.event_id for e in batch)
        got[name] = mine

    threads = [threading.Thread(target=claim, args=(f"w{i}",)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    all_ids = [eid for ids in got.values() for eid in ids]
    assert len(all_ids) == 200 and len(set(all_ids)) == 200
    assert sum(1 for ids in got.values() if ids) > 1


def test_expired_lease_is_claimable_again_and_fences_the_lost_worker(store, clock):  # type: ignore[no-untyped-def]
    (ev,) = events(1)
    store.append_batch([ev])
    (first,) = store.claim_batch("lost-worker", limit=1, lease_s=0.3)
    assert store.claim_batch("w2", limit=1) == []  # lease still valid
    clock.advance(0.3)
    assert store.claim_batch("w2", limit=1) == []  # valid up to its last instant
    clock.advance(0.001)
    (again,) = store.claim_batch("w2", limit=1)
    assert again.event_id == ev.event_id and again.worker_id == "w2"
    assert again.retry_count == 1  # the lost attempt counts
    # the lost worker wakes up: it no longer holds the event
    assert store.mark_done(ev.event_id, worker_id="lost-worker") == 0
    assert store.mark_failed(ev.event_id, "late", worker_id="lost-worker") is None
    assert store.mark_done(ev.event_id, worker_id="w2") == 1


def test_reclaim_expired_leases(store, clock):  # type: ignore[no-untyped-def]
    evs = events(2, max_retries=1) + events(1, max_retries=5, prefix="q")
    store.append_batch(evs)
    store.claim_batch("gone", limit=3, lease_s=0.2)
    assert store.reclaim_expired() == {"reclaimed": 0, "dead": 0}
    clock.advance(0.4)
    assert store.reclaim_expired() == {"reclaimed": 1, "dead": 2}
    by_id = {e.event_id: e for e in store.list_events()}
    assert by_id[evs[2].event_id].status is OutboxStatus.PENDING
    assert by_id[evs[0].event_id].status is OutboxStatus.DEAD
    assert "lease expired" in (by_id[evs[0].event_id].error_message or "")
    assert [e.event_id for e in store.claim_batch("w", 5)] == [evs[2].event_id]


def test_failures_back_off_exponentially_then_die(store, clean_db, clock):  # type: ignore[no-untyped-def]
    (ev,) = events(1, max_retries=3)
    store.append_batch([ev])
    waits = []
    for attempt in range(3):
        claimed = store.claim_batch("w", 1)
        assert claimed, "event never became due again"
        assert claimed[0].retry_count == attempt
        status = store.mark_failed(ev.event_id, f"boom {attempt}", worker_id="w")
        row = sql(
            clean_db,
            "SELECT EXTRACT(EPOCH FROM next_attempt_at - updated_at) "
            "FROM ctx.outbox_events WHERE event_id = %s",
            ev.event_id,
        )
        waits.append(float(row[0][0]))
        assert status is (OutboxStatus.DEAD if attempt == 2 else OutboxStatus.FAILED)
        if attempt < 2:
            assert store.claim_batch("w", 1) == []  # not due during the backoff
            clock.advance(waits[-1] - 0.01)
            assert store.claim_batch("w", 1) == []  # … up to its end
            clock.advance(0.01)
    assert waits[0] == pytest.approx(0.2, abs=1e-6)
    assert waits[1] == pytest.approx(0.4, abs=1e-6)  # base·2^n
    dead = store.get(ev.event_id)
    assert dead is not None and dead.retry_count == 3 and dead.error_message == "boom 2"
    clock.advance(1.1)
    assert store.claim_batch("w", 1) == []  # dead events are never claimed


def test_permanent_failure_is_dead_at_once_and_requeue_revives(store):  # type: ignore[no-untyped-def]
    evs = events(3)
    store.append_batch(evs)
    claimed = store.claim_batch("w", 3)
    for e in claimed:
        assert store.mark_failed(e.event_id, "bad payload", retryable=False) is OutboxStatus.DEAD
    assert store.counts()["dead"] == 3
    assert store.requeue([evs[0].event_id, "nope"]) == [evs[0].event_id]
    assert store.requeue(all_dead=True) == sorted(e.event_id for e in evs[1:])
    fresh = store.claim_batch("w", 5)
    assert len(fresh) == 3 and all(e.retry_count == 0 for e in fresh)


def test_rearm_requeues_done_events_but_not_dead_ones(store):  # type: ignore[no-untyped-def]
    done_ev, dead_ev = events(2)
    store.append_batch([done_ev, dead_ev])
    a, b = store.claim_batch("w", 2)
    store.mark_done(a.event_id)
    store.mark_failed(b.event_id, "x", retryable=False)
    assert store.append_batch([done_ev, dead_ev]) == []
    again = store.append_batch([done_ev, dead_ev], rearm=True)
    assert [e.event_id for e in again] == [done_ev.event_id]
    assert store.get(done_ev.event_id).status is OutboxStatus.PENDING  # type: ignore[union-attr]
    assert store.get(dead_ev.event_id).status is OutboxStatus.DEAD  # type: ignore[union-attr]


def test_oldest_pending_age(store, clean_db):  # type: ignore[no-untyped-def]
    assert store.oldest_pending_age_s() is None
    store.append_batch(events(2))
    sql(clean_db, "UPDATE ctx.outbox_events SET created_at = now() - interval '90 seconds'")
    assert store.oldest_pending_age_s() == pytest.approx(90, abs=5)


def test_outbox_cli_list_and_requeue(store, make_settings, tmp_path):  # type: ignore[no-untyped-def]
    from ctxpipe.cli import app

    evs = events(3)
    store.append_batch(evs)
    poisoned = store.claim_batch("w", 2)
    for e in poisoned:
        store.mark_failed(e.event_id, "poison", retryable=False)
    s = make_settings(redis=False)
    env = {"CTXPIPE_DATABASE_URL": s.database_url, "CTXPIPE_FS_ROOT": str(tmp_path / "fs")}
    runner = CliRunner()
    out = runner.invoke(app, ["outbox", "list", "--dead", "--json"], env=env)
    assert out.exit_code == 0, out.output
    listed = json.loads(out.stdout)
    assert {e["event_id"] for e in listed} == {e.event_id for e in poisoned}
    assert all(e["status"] == "dead" and e["error_message"] == "poison" for e in listed)

    table = runner.invoke(app, ["outbox", "list"], env=env)
    assert table.exit_code == 0 and "poison" in table.stdout

    first = poisoned[0].event_id
    out = runner.invoke(app, ["outbox", "requeue", first, "--json"], env=env)
    assert out.exit_code == 0 and json.loads(out.stdout)["requeued"] == [first]
    out = runner.invoke(app, ["outbox", "requeue", "--all-dead"], env=env)
    assert out.exit_code == 0 and "requeued 1 event(s)" in out.stdout
    assert store.counts()["dead"] == 0 and store.counts()["pending"] == 3
    bad = runner.invoke(app, ["outbox", "requeue"], env=env)
    assert bad.exit_code == 2


def test_an_unparseable_event_is_dead_at_claim(store, clean_db, clock):  # type: ignore[no-untyped-def]
    store.append_batch(events(1))
    sql(
        clean_db,
        "INSERT INTO ctx.outbox_events (event_id, event_type, uri) "
        "VALUES ('junk', 'REINDEX_EVERYTHING', 'ctx://acme/users/u/x')",
    )
    clock.advance(1)  # the row the database stamped itself is due by the store's clock
    claimed = store.claim_batch("w", 10)
    assert len(claimed) == 1
    junk = sql(
        clean_db, "SELECT status, error_message FROM ctx.outbox_events WHERE event_id = 'junk'"
    )[0]
    assert junk[0] == "dead" and "invalid outbox event" in junk[1]


def test_work_finished_after_the_lease_ran_out_is_still_done(store, clock):  # type: ignore[no-untyped-def]
    """A slow batch: beat reclaimed the lease meanwhile, but nobody else holds the event —
    the finished work counts, so a slow worker cannot drive an event to `dead`."""
    (ev,) = events(1)
    store.append_batch([ev])
    store.claim_batch("slow-worker", limit=1, lease_s=0.2)
    clock.advance(0.4)
    assert store.reclaim_expired() == {"reclaimed": 1, "dead": 0}
    assert store.mark_done(ev.event_id, worker_id="slow-worker") == 1
    (row,) = store.list_events()
    assert row.status is OutboxStatus.DONE
    assert store.claim_batch("w2", limit=1) == []
