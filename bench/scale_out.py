"""Scale-out: commits/s as worker concurrency and worker nodes grow, with the LLM simulated at a
fixed latency per call (the regime of a remote model, where a commit waits, not computes).

    .venv/bin/python bench/scale_out.py [--latency 0.5] [--levels 1,2,4,8,16] [--per-slot 6]

One local stack (PostgreSQL, Redis, FS root); for each level c a worker node — a `commit`
worker and an `extract` worker, each a prefork pool of c processes — is started, c × per-slot
commits of distinct users are submitted at once, and the clock stops when the ledger shows them
all registered. Then two separate nodes of concurrency c₂ (own node names and var dirs, sharing
Redis, PostgreSQL and the FS root) against one node of c₂. Speed-up ÷ ideal = (rate(c) /
rate(1)) / c, and rate(2 nodes) / (2 × rate(1 node)). Target ≥ 0.8 while the LLM is the
bottleneck. A commit makes 5 LLM calls for a new user (archive, then the four extractors in
parallel), so the extract pool needs 4 slots per commit in flight for 1 in the commit pool.
"""

from __future__ import annotations

import argparse
import time
import uuid

from _stack import local_stack, sample_session, start_worker

from ctxpipe.commit import steps
from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.config import Settings
from ctxpipe.core.session import SessionInput
from ctxpipe.devstack.workers import WorkerProcess
from ctxpipe.storage.commit_ledger import CommitLedger
from ctxpipe.storage.db import Database


def start_node(settings: Settings, name: str, concurrency: int) -> list[WorkerProcess]:
    """A worker node: its own var dir (logs, state), commit + extract pools of `concurrency`."""
    var = settings.var_dir / name
    var.mkdir(parents=True, exist_ok=True)
    node = settings.model_copy(update={"var_dir": var})
    return [
        start_worker(node, "commit,maintenance", concurrency, var),
        start_worker(node, "extract", concurrency, var),
    ]


def run_batch(settings: Settings, ledger: CommitLedger, n: int, timeout: float) -> float:
    """Submit `n` commits of distinct users at once; commits/s until all are registered."""
    from tasks.commit import workflow

    reqs = []
    tag = uuid.uuid4().hex[:6]
    for i in range(n):
        data = sample_session(i, user=f"u-{tag}-{i}")
        data["commit_id"] = f"scale-{tag}-{i}"
        reqs.append(CommitRequest.from_session(SessionInput.model_validate(data)))
    started = time.perf_counter()
    for req in reqs:
        steps.submit(ledger, req)
        workflow(req.commit_id).apply_async()
    pending = {r.commit_id for r in reqs}
    deadline = time.monotonic() + timeout
    while pending:
        for cid in list(pending):
            row = ledger.get(cid)
            if row is not None and row.phase in ("registered", "failed"):
                if row.phase == "failed":
                    raise RuntimeError(f"{cid} failed: {row.error}")
                pending.discard(cid)
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(pending)} commits not finished after {timeout:.0f}s")
        time.sleep(0.05)
    return n / (time.perf_counter() - started)


def measure(settings: Settings, ledger: CommitLedger, nodes: list[int], per_slot: int) -> float:
    procs: list[WorkerProcess] = []
    try:
        for i, c in enumerate(nodes):
            procs += start_node(settings, f"node{i}-{uuid.uuid4().hex[:4]}", c)
        run_batch(settings, ledger, sum(nodes), 120)  # warm every pool process
        return run_batch(settings, ledger, per_slot * sum(nodes), 600)
    finally:
        for p in procs:
            p.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--latency", type=float, default=0.5, help="seconds per simulated LLM call")
    ap.add_argument("--levels", default="1,2,4,8,16", help="worker concurrency levels")
    ap.add_argument("--per-slot", type=int, default=6, help="commits per pool process")
    ap.add_argument("--nodes-concurrency", type=int, default=4, help="c of the two-node run")
    args = ap.parse_args()
    levels = [int(x) for x in args.levels.split(",")]

    with local_stack([], llm_simulated_latency_s=args.latency) as settings:
        db = Database.from_settings(settings)
        ledger = CommitLedger(db)
        rates: dict[int, float] = {}
        print(f"simulated LLM latency {args.latency:.2f} s per call")
        print(f"{'concurrency':>12}{'commits/s':>11}{'speed-up':>10}{'÷ ideal':>9}")
        for c in levels:
            rates[c] = measure(settings, ledger, [c], args.per_slot)
            base = rates[levels[0]]
            speed = rates[c] / base
            ideal = c / levels[0]
            print(f"{c:>12}{rates[c]:>11.2f}{speed:>10.2f}{speed / ideal:>9.2f}", flush=True)
        c2 = args.nodes_concurrency
        one = rates[c2] if c2 in rates else measure(settings, ledger, [c2], args.per_slot)
        two = measure(settings, ledger, [c2, c2], args.per_slot)
        print(
            f"two nodes of {c2}: {two:.2f} commits/s vs one node {one:.2f} → ×{two / one:.2f} "
            f"(÷ ideal {two / one / 2:.2f})"
        )
        db.close()


if __name__ == "__main__":
    main()
