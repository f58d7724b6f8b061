"""Sustained commit throughput through Celery with two worker processes (rules LLM).

    .venv/bin/python bench/throughput.py [--commits 300] [--users 60]

Submits every commit at once (like producers would), waits until the ledger shows all of them
registered, and prints commits/s plus commit-to-written latency (ledger `created_at` → the
moment the FS write phase finished). Baseline in the same run: the same number of commits run
back to back in one process, warmed like the pool (model loaded, a few commits run). Target:
≥ 20 commits/s. Also the CPU seconds per commit of the whole stack (workers, PostgreSQL,
Redis) each way: on a machine shared with other jobs the wall-clock rates follow the
neighbours, the CPU cost much less.
"""

from __future__ import annotations

import argparse
import time

from _stack import local_stack, percentile, sample_session, stack_cpu_s

from ctxpipe.commit import steps
from ctxpipe.commit.coordinator import CommitCoordinator
from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.session import SessionInput
from ctxpipe.runtime import Runtime
from ctxpipe.storage.commit_ledger import CommitLedger


def requests(n: int, users: int, offset: int = 0) -> list[CommitRequest]:
    out = []
    for i in range(n):
        data = sample_session(offset + i, user=f"user{(offset + i) % users}")
        data["session_id"] = f"s{offset + i}"
        out.append(CommitRequest.from_session(SessionInput.model_validate(data)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--commits", type=int, default=300)
    ap.add_argument("--users", type=int, default=60)
    ap.add_argument("--pool", type=int, default=2, help="worker processes (prefork children)")
    args = ap.parse_args()

    with local_stack([("commit,extract,maintenance", args.pool)]) as settings:
        from tasks.commit import workflow

        rt = Runtime(settings)
        ledger = CommitLedger(rt.db)
        # baseline: the same kind of commits, in process, one after the other
        coord = CommitCoordinator(rt.components())
        # warmed like the pool: the embedding model loaded (commit workers load it at start;
        # dedup needs it once users recur) and a few commits run
        _ = rt.embedder.model
        for req in requests(2 * args.pool, args.users, offset=300_000):
            coord.commit_sync(req)
        base = requests(min(60, args.commits), args.users, offset=100_000)
        t, cpu = time.perf_counter(), stack_cpu_s(settings)
        for req in base:
            coord.commit_sync(req)
        inproc_rate = len(base) / (time.perf_counter() - t)
        inproc_cpu = (stack_cpu_s(settings) - cpu) / len(base) * 1000

        for req in requests(2 * args.pool, args.users, offset=200_000):  # warm the pool
            steps.submit(ledger, req)
            workflow(req.commit_id).apply_async().get(timeout=120)

        batch = requests(args.commits, args.users)
        cpu = stack_cpu_s(settings)
        started = time.time()
        for req in batch:
            steps.submit(ledger, req)
            workflow(req.commit_id).apply_async()
        submitted = time.time() - started
        ids = [r.commit_id for r in batch]
        deadline = time.monotonic() + 60 + args.commits
        while True:
            done = ledger.counts_by_phase()
            finished = done.get("registered", 0) + done.get("failed", 0)
            if finished >= args.commits + 2 * args.pool or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        elapsed = time.time() - started
        celery_cpu = (stack_cpu_s(settings) - cpu) / args.commits * 1000
        lat, failed = [], 0
        for cid in ids:
            row = ledger.get(cid)
            assert row is not None
            if row.phase != "registered":
                failed += 1
                continue
            assert row.created_at is not None
            lat.append((row.timings["written_at"] - row.created_at.timestamp()) * 1000)
        rt.close()

    rate = (args.commits - failed) / elapsed
    print(f"{args.commits} commits for {args.users} users, {args.pool} worker processes")
    print(f"submitted in {submitted:.2f} s; all done after {elapsed:.2f} s; failed {failed}")
    print(f"throughput: {rate:.1f} commits/s (target >= 20) {'OK' if rate >= 20 else 'MISSED'}")
    print(f"in-process baseline: {inproc_rate:.1f} commits/s; ratio {rate / inproc_rate:.2f}")
    print(
        f"CPU per commit (workers, PostgreSQL, Redis): {celery_cpu:.0f} ms through Celery, "
        f"{inproc_cpu:.0f} ms in process; ratio {celery_cpu / inproc_cpu:.2f}"
    )
    print(
        f"commit-to-written latency: p50 {percentile(lat, 0.5):.0f} ms, "
        f"p95 {percentile(lat, 0.95):.0f} ms"
    )


if __name__ == "__main__":
    main()
