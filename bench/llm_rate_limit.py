"""Cluster-wide LLM rate limiting through real Celery workers against a flaky LLM server.

    .venv/bin/python bench/llm_rate_limit.py [--sessions 40] [--rpm 150] [--retry-after 1]

Two runs of the same N sessions on a throwaway local stack (PostgreSQL, Redis, a commit
worker and four extract worker processes, `llm_provider=openai`), each commit's LLM calls (by
default one, the archive step's `extraction.session`; with
`CTXPIPE_COMMIT__EXTRACTION_CALLS=extractor` the summary's and four extractors') going to an
OpenAI-compatible server served by this process:

- baseline: a well-behaved server (every answer valid), no limits;
- throttled: a flaky server (HTTP 429 + `Retry-After` to 30% of the requests, malformed JSON
  to 10%: half repairable, half a body cut short) with `CTXPIPE_LLM_REQUESTS_PER_MINUTE`.

Prints, for each: time to drain (first submit → every commit registered), the requests the
server saw, the most it saw in any 60 s window (vs the limit), failed LLM calls and failed
commits (both must be 0), and the limiter's counters (waits, 429s, Retry-After honoured, calls
handed back to the queue); then the drain time of the throttled run ÷ the baseline's.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from typing import Any

from _flaky_llm import FlakyLLMServer
from _stack import local_stack, sample_session

from ctxpipe.commit import steps
from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.session import SessionInput
from ctxpipe.providers.llm_limits.wiring import llm_throttling
from ctxpipe.storage.commit_ledger import CommitLedger
from ctxpipe.storage.db import Database

WORKERS = [("commit,maintenance", 1), ("extract", 4)]
LLM_PHASES = ("archive", "extract")


def drain(sessions: int, timeout_s: float, **overrides: Any) -> dict[str, Any]:
    with local_stack(WORKERS, llm_provider="openai", **overrides) as settings:
        from tasks.commit import workflow

        db = Database.from_settings(settings)
        ledger = CommitLedger(db, schema=settings.db_schema)
        reqs = [
            CommitRequest.from_session(SessionInput.model_validate(sample_session(i)))
            for i in range(sessions)
        ]
        started = time.perf_counter()
        for req in reqs:
            steps.submit(ledger, req)
            workflow(req.commit_id).apply_async()
        phases: dict[str, int] = {}
        while time.perf_counter() - started < timeout_s:
            phases = ledger.counts_by_phase()
            if phases.get("registered", 0) + phases.get("failed", 0) >= sessions:
                break
            time.sleep(0.5)
        elapsed = time.perf_counter() - started
        cost = ledger.llm_cost()
        throttling = llm_throttling(settings)
        db.close()
    llm = [u for p, u in cost.by_phase.items() if p.startswith(LLM_PHASES)]
    calls, failed = sum(u.calls for u in llm), sum(u.failed for u in llm)
    return {
        "drain_s": elapsed,
        "registered": phases.get("registered", 0),
        "failed_commits": phases.get("failed", 0),
        "unfinished": sessions - phases.get("registered", 0) - phases.get("failed", 0),
        "llm_calls": calls,
        "failed_calls": failed,
        "throttling": throttling,
    }


def report(name: str, result: dict[str, Any], server: FlakyLLMServer, limit: int | None) -> None:
    t = result["throttling"]
    tally = server.tally
    print(f"\n{name}")
    print(f"  time to drain            {result['drain_s']:.1f} s")
    print(
        f"  commits                  {result['registered']} registered, "
        f"{result['failed_commits']} failed, {result['unfinished']} unfinished"
    )
    print(f"  LLM calls                {result['llm_calls']} ({result['failed_calls']} failed)")
    print(
        f"  requests at the server   {len(tally.arrivals)} ({tally.rate_limited} answered 429, "
        f"{tally.malformed} malformed, {tally.ok} valid); peak in flight {tally.peak_in_flight}"
    )
    print(
        f"  peak in any 60 s window  {server.peak(60.0)}"
        + (f" (limit {limit})" if limit else " (no limit)")
    )
    if t is not None:
        print(
            f"  limiter                  {t.throttled} waits ({t.wait_seconds:.1f} s), "
            f"{t.http_429} × 429, {t.retry_after_honoured} Retry-After honoured, "
            f"{t.deferred} handed back to the queue"
        )


def one(args: argparse.Namespace) -> None:
    """One run, in a process of its own (the Celery app of a process talks to one stack)."""
    common = {"llm_max_wait_s": args.max_wait, "llm_timeout_s": 10.0}
    if args.one == "baseline":
        with FlakyLLMServer(rate_limited=0.0, malformed=0.0) as server:
            result = drain(args.sessions, args.timeout, llm_base_url=server.url, **common)
        report("baseline: well-behaved server, no limits", result, server, None)
    else:
        flaky = FlakyLLMServer(rate_limited=0.3, malformed=0.1, retry_after=args.retry_after)
        with flaky as server:
            result = drain(
                args.sessions,
                args.timeout,
                llm_base_url=server.url,
                llm_requests_per_minute=args.rpm,
                **common,
            )
        report(
            f"throttled: flaky server (30% 429 + Retry-After {args.retry_after}, "
            f"10% malformed), limit {args.rpm}/min",
            result,
            server,
            args.rpm,
        )
    summary = {"drain_s": result["drain_s"], "failed_calls": result["failed_calls"]}
    summary |= {"peak": server.peak(60.0), "failed_commits": result["failed_commits"]}
    print("RESULT " + json.dumps(summary), flush=True)


def run_child(args: argparse.Namespace, which: str) -> dict[str, Any]:
    argv = [sys.executable, __file__, "--one", which]
    for flag in ("sessions", "rpm", "retry_after", "max_wait", "timeout"):
        argv += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    lines = proc.stdout.splitlines()
    print("\n".join(line for line in lines if not line.startswith("RESULT ")), flush=True)
    found = [json.loads(line[7:]) for line in lines if line.startswith("RESULT ")]
    if proc.returncode != 0 or not found:
        sys.exit(f"the {which} run failed:\n{proc.stderr[-3000:]}")
    return dict(found[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sessions", type=int, default=40)
    ap.add_argument("--rpm", type=int, default=150, help="CTXPIPE_LLM_REQUESTS_PER_MINUTE")
    ap.add_argument("--retry-after", default="1", help="the flaky server's Retry-After")
    ap.add_argument("--max-wait", type=float, default=30.0, help="CTXPIPE_LLM_MAX_WAIT_S")
    ap.add_argument("--timeout", type=float, default=900.0, help="give up a run after (s)")
    ap.add_argument("--one", choices=["baseline", "throttled"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        one(args)
        return
    base = run_child(args, "baseline")
    flaky = run_child(args, "throttled")
    peak = flaky["peak"]
    print(
        f"\ndrain time throttled / baseline: {flaky['drain_s'] / base['drain_s']:.1f}x "
        f"({flaky['drain_s']:.1f} s / {base['drain_s']:.1f} s); failed calls "
        f"{flaky['failed_calls']}, failed commits {flaky['failed_commits']} (target 0); "
        f"peak {peak} in any 60 s ≤ limit {args.rpm}: {'yes' if peak <= args.rpm else 'NO'}"
    )


if __name__ == "__main__":
    main()
