"""Index freshness: time from a commit being accepted to its nodes being searchable in the
pgvector replica, on an idle stack of real workers (commit, extract, embed).

    .venv/bin/python bench/freshness.py [--commits 30] [--gap 0.5]

Starts its own PostgreSQL + Redis on free ports and real Celery workers (the embed worker is a
solo pool, as in production). Each commit is submitted (ledger row + workflow enqueued: the
"accepted" instant), then the replica is polled until every node the commit wrote has chunks
with embeddings at the written version. The drain kick sent after outbox registration is what
makes this fast; beat is not running, so nothing else drains. Prints p50/p95/max and the split
between the commit itself (accepted → registered) and indexing (registered → searchable).
Target: p95 ≤ 2 s.
"""

from __future__ import annotations

import argparse
import time

import psycopg
from _stack import local_stack, percentile, sample_session, start_worker

from ctxpipe.commit import steps
from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.session import SessionInput
from ctxpipe.storage.commit_ledger import CommitLedger
from ctxpipe.storage.db import Database

WORKERS = [("commit,maintenance", 2), ("extract", 2)]
POLL_S = 0.005


def written_nodes(ledger: CommitLedger, commit_id: str, timeout: float) -> tuple[dict, float]:
    """Wait for the commit to register; its touched URIs -> version, and when it registered."""
    deadline = time.monotonic() + timeout
    while True:
        row = ledger.get(commit_id)
        if row is not None and row.phase in ("registered", "failed"):
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"commit {commit_id} did not finish")
        time.sleep(POLL_S)
    registered = time.monotonic()
    if row.phase == "failed" or not row.result:
        raise RuntimeError(f"commit {commit_id} failed: {row.error}")
    wanted: dict[str, int] = {}
    for ev in row.result.get("outbox_events", []):
        if ev["event_type"] == "UPSERT_CONTEXT":
            wanted[ev["uri"]] = int(ev["payload"].get("version", 0))
    return wanted, registered


def searchable(conn: psycopg.Connection, wanted: dict[str, int]) -> bool:
    rows = conn.execute(
        "SELECT uri, max(node_version) FROM ctx.context_chunks "
        "WHERE uri = ANY(%s) AND embedding IS NOT NULL GROUP BY uri",
        (list(wanted),),
    ).fetchall()
    have = dict(rows)
    return all(have.get(u, -1) >= v for u, v in wanted.items())


def run(n: int, gap: float, warmup: int) -> None:
    with local_stack(WORKERS) as settings:
        from tasks.commit import workflow  # after local_stack exported the broker URL

        embed = start_worker(settings, "embed", 1, settings.var_dir, pool="solo")
        db = Database.from_settings(settings)
        ledger = CommitLedger(db)
        totals, commit_part, index_part = [], [], []
        try:
            with psycopg.connect(settings.database_url, autocommit=True) as conn:
                for i in range(warmup + n):
                    req = CommitRequest.from_session(SessionInput.model_validate(sample_session(i)))
                    accepted = time.monotonic()
                    steps.submit(ledger, req)
                    workflow(req.commit_id).apply_async()
                    wanted, registered = written_nodes(ledger, req.commit_id, 120)
                    deadline = time.monotonic() + 60
                    while not searchable(conn, wanted):
                        if time.monotonic() > deadline:
                            raise TimeoutError(f"{req.commit_id}: not searchable after 60 s")
                        time.sleep(POLL_S)
                    done = time.monotonic()
                    if i >= warmup:  # the first commits load the model and warm every pool
                        totals.append(done - accepted)
                        commit_part.append(registered - accepted)
                        index_part.append(done - registered)
                    time.sleep(gap)  # idle stack between commits
        finally:
            db.close()
            embed.stop()

    def ms(values: list[float], q: float) -> str:
        return f"{percentile(values, q) * 1000:7.0f} ms"

    print(f"commits measured: {len(totals)} (after {warmup} warm-up), idle gap {gap:.2f} s")
    print(f"{'':32}{'p50':>10}{'p95':>10}{'max':>10}")
    for label, vals in (
        ("accepted -> searchable (total)", totals),
        ("  accepted -> registered", commit_part),
        ("  registered -> searchable", index_part),
    ):
        print(f"{label:32}{ms(vals, 0.5):>10}{ms(vals, 0.95):>10}{max(vals) * 1000:8.0f} ms")
    p95 = percentile(totals, 0.95)
    print(f"freshness p95 = {p95:.2f} s  (target <= 2 s: {'met' if p95 <= 2.0 else 'MISSED'})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--commits", type=int, default=30)
    ap.add_argument("--gap", type=float, default=0.5, help="idle seconds between commits")
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args()
    run(args.commits, args.gap, args.warmup)


if __name__ == "__main__":
    main()
