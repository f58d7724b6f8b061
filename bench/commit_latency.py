"""Commit latency through Celery vs the same commit in process, and proof of parallel extractors.

    .venv/bin/python bench/commit_latency.py [--commits 40] [--llm-delay 1.0] [--task-events on,off]

Part 1 (rules LLM): p50/p95 of a commit through Celery (submit → register finished) on each
canvas (`chord`, the default: a task per phase; `fused`: one task), minus the same commits run
in process (the in-process executor on the default canvas), interleaved commit by commit.
Target: the chord's overhead ≤ 35 ms at p50. `--task-events on,off` runs this part once per
value of `CTXPIPE_WORKER_TASK_EVENTS` (a fresh stack each, in that order): the cost of the task
events Flower shows.
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


CANVASES = ("chord", "fused")


def celery_commit(ledger: CommitLedger, req: CommitRequest, kind: str | None = None) -> float:
    """Submit → the canvas's last task finished, in ms (`kind`: the settings' canvas)."""
    from tasks.commit import workflow

    started = time.perf_counter()
    steps.submit(ledger, req)
    workflow(req.commit_id, kind=kind).apply_async().get(timeout=120)
    return (time.perf_counter() - started) * 1000


def run_overhead(n: int, task_events: bool = True) -> dict[str, list[float]]:
    """Latencies (ms) in process and through Celery on each canvas, commit by commit in turn,
    so that each sees the same state of a shared machine."""
    times: dict[str, list[float]] = {"inproc": [], **{k: [] for k in CANVASES}}
    with local_stack(WORKERS, worker_task_events=task_events) as settings:
        rt = Runtime(settings)
        ledger = CommitLedger(rt.db)
        coord = CommitCoordinator(rt.components())
        for i in range(16):  # warm every pool process (model load, connections)
            for j, kind in enumerate(CANVASES):
                celery_commit(ledger, request(10_000 + 1000 * j + i), kind)
            coord.commit_sync(request(20_000 + i))
        for i in range(n):
            req = request(i)
            t = time.perf_counter()
            coord.commit_sync(req.model_copy(update={"commit_id": req.commit_id + "-inproc"}))
            times["inproc"].append((time.perf_counter() - t) * 1000)
            for j, kind in enumerate(CANVASES):
                times[kind].append(celery_commit(ledger, request((j + 1) * n + i), kind))
        rt.close()
    return times


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
    ap.add_argument(
        "--task-events",
        default="on",
        help="overhead part: on, off, or both in turn (on,off): workers' task events",
    )
    ap.add_argument("--part", choices=["overhead", "parallel"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    events = [v.strip() for v in args.task_events.split(",") if v.strip()]
    if not events or set(events) - {"on", "off"}:
        ap.error("--task-events takes on, off or a list of them (on,off)")
    if args.part is None:  # each part gets its own stack, in its own process
        runs = [("overhead", e) for e in events] + [("parallel", "on")]
        for part, event in runs:
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
                    "--task-events",
                    event,
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
    times = run_overhead(args.commits, task_events=events[0] == "on")
    pct = {k: (percentile(v, 0.5), percentile(v, 0.95)) for k, v in times.items()}
    print(f"workers' task events {events[0]}:")
    base50, base95 = pct["inproc"]
    print(f"{'in process':16s} p50 {base50:7.1f} ms   p95 {base95:7.1f} ms")
    for kind in CANVASES:
        p50, p95 = pct[kind]
        print(
            f"{'Celery, ' + kind:16s} p50 {p50:7.1f} ms   p95 {p95:7.1f} ms   overhead p50 "
            f"{p50 - base50:6.1f} ms, p95 {p95 - base95:6.1f} ms; ratio p50 {p50 / base50:.2f}"
        )
    overhead = pct["chord"][0] - base50
    print(
        f"chord overhead at p50: {overhead:.1f} ms (target <= 35 ms) "
        f"{'OK' if overhead <= 35 else 'MISSED'}; chord - fused at p50: "
        f"{pct['chord'][0] - pct['fused'][0]:.1f} ms"
    )


if __name__ == "__main__":
    main()
