"""Commit latency through Celery vs the same commit in process, and proof of parallel extractors.

    .venv/bin/python bench/commit_latency.py [--commits 40] [--llm-delay 1.0]

Part 1 (rules LLM): p50/p95 of a commit through Celery (submit → register finished) minus the
same commits run in process. Target: overhead ≤ 35 ms at p50.
Part 2 (an LLM that sleeps a fixed time per call): commit latency ÷ (archive + slowest extractor
+ plan), from the ledger's phase timings. Target ≤ 1.15 (the four extractors overlap).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

from _stack import local_stack, percentile, sample_session

from ctxpipe.commit import steps
from ctxpipe.commit.coordinator import CommitCoordinator
from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.session import SessionInput
from ctxpipe.runtime import Runtime
from ctxpipe.storage.commit_ledger import CommitLedger

WORKERS = [("commit,maintenance", 2), ("extract", 4)]


def request(i: int) -> CommitRequest:
    return CommitRequest.from_session(SessionInput.model_validate(sample_session(i)))


def celery_commit(ledger: CommitLedger, req: CommitRequest) -> float:
    from tasks.commit import workflow

    started = time.perf_counter()
    steps.submit(ledger, req)
    workflow(req.commit_id).apply_async().get(timeout=120)
    return (time.perf_counter() - started) * 1000


def run_overhead(n: int) -> dict[str, float]:
    with local_stack(WORKERS) as settings:
        rt = Runtime(settings)
        ledger = CommitLedger(rt.db)
        coord = CommitCoordinator(rt.components())
        for i in range(16):  # warm every pool process (model load, connections)
            celery_commit(ledger, request(10_000 + i))
            coord.commit_sync(request(20_000 + i))
        inproc, celery = [], []
        for i in range(n):
            req = request(i)
            t = time.perf_counter()
            coord.commit_sync(req.model_copy(update={"commit_id": req.commit_id + "-inproc"}))
            inproc.append((time.perf_counter() - t) * 1000)
            celery.append(celery_commit(ledger, request(n + i)))
        rt.close()
    return {
        "inproc_p50": percentile(inproc, 0.5),
        "inproc_p95": percentile(inproc, 0.95),
        "celery_p50": percentile(celery, 0.5),
        "celery_p95": percentile(celery, 0.95),
    }


def run_parallelism(n: int, delay: float) -> dict[str, float]:
    ratios, totals = [], []
    with local_stack(WORKERS, llm_simulated_latency_s=delay) as settings:
        rt = Runtime(settings)
        ledger = CommitLedger(rt.db)
        for i in range(4):
            celery_commit(ledger, request(30_000 + i))
        for i in range(n):
            req = request(40_000 + i)
            total = celery_commit(ledger, req)
            row = ledger.get(req.commit_id)
            assert row is not None and row.phase == "registered", row
            t = row.timings
            slowest = max(v for k, v in t.items() if k.startswith("extract_"))
            critical = t["archive_ms"] + slowest + t["plan_ms"]
            ratios.append(total / critical)
            totals.append(total)
        rt.close()
    return {
        "ratio_p50": percentile(ratios, 0.5),
        "ratio_p95": percentile(ratios, 0.95),
        "latency_p50": percentile(totals, 0.5),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--commits", type=int, default=40)
    ap.add_argument("--llm-delay", type=float, default=1.0)
    ap.add_argument("--part", choices=["overhead", "parallel"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.part is None:  # each part gets its own stack, in its own process
        for part in ("overhead", "parallel"):
            subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--part",
                    part,
                    "--commits",
                    str(args.commits),
                    "--llm-delay",
                    str(args.llm_delay),
                ],
                check=True,
            )
        return
    if args.part == "parallel":
        p = run_parallelism(max(10, args.commits // 2), args.llm_delay)
        print(f"LLM sleeping {args.llm_delay:.2f}s per call: commit p50 {p['latency_p50']:.0f} ms")
        print(
            f"commit latency / (archive + slowest extractor + plan): p50 "
            f"{p['ratio_p50']:.3f}, p95 {p['ratio_p95']:.3f} (target <= 1.15) "
            f"{'OK' if p['ratio_p50'] <= 1.15 else 'MISSED'}"
        )
        return
    o = run_overhead(args.commits)
    overhead = o["celery_p50"] - o["inproc_p50"]
    print(f"in process     p50 {o['inproc_p50']:7.1f} ms   p95 {o['inproc_p95']:7.1f} ms")
    print(f"through Celery p50 {o['celery_p50']:7.1f} ms   p95 {o['celery_p95']:7.1f} ms")
    print(
        f"Celery overhead at p50: {overhead:.1f} ms (target <= 35 ms) "
        f"{'OK' if overhead <= 35 else 'MISSED'}; at p95: "
        f"{o['celery_p95'] - o['inproc_p95']:.1f} ms"
    )


if __name__ == "__main__":
    main()
