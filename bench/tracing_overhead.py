"""What tracing costs an in-process commit (the offline rules LLM, no database).

    .venv/bin/python bench/tracing_overhead.py [--commits 30] [--rounds 6]

Each round runs `--commits` commits in a fresh interpreter with tracing off (no
`OTEL_TRACES_EXPORTER`: the OpenTelemetry API's no-op tracer), then as many with the SDK on
(`OTEL_TRACES_EXPORTER=console`, its one-line JSON spans written to /dev/null: every span
built, attributed and serialised), rounds alternating so both see the same machine load.
Prints p50/p95 of each and the ratio on ÷ off (the baseline is the same run's tracing off).
The workers' overhead is of the same kind: the same spans, plus one per Celery task.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _stack import percentile, sample_session

ROOT = Path(__file__).resolve().parents[1]


def child(commits: int) -> None:
    """Run `commits` commits in this process; print their wall times (ms) as JSON."""
    from ctxpipe.commit.coordinator import CommitCoordinator
    from ctxpipe.commit.payloads import CommitRequest
    from ctxpipe.core.config import Settings
    from ctxpipe.core.session import SessionInput
    from ctxpipe.observability.tracing import configure_tracing
    from ctxpipe.runtime import Runtime

    configure_tracing("ctxpipe-bench")  # off unless the environment says so
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(fs_root=Path(tmp) / "fs", var_dir=Path(tmp) / "var")
        coordinator = CommitCoordinator(Runtime(settings, use_database=False).components())
        times = []
        for i in range(commits + 2):  # the first two warm up
            req = CommitRequest.from_session(SessionInput.model_validate(sample_session(i)))
            started = time.perf_counter()
            coordinator.commit_sync(req)
            if i >= 2:
                times.append((time.perf_counter() - started) * 1000)
    sys.stderr.write(json.dumps(times) + "\n")


def run(mode: str, commits: int) -> list[float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    if mode == "on":
        env["OTEL_TRACES_EXPORTER"] = "console"
    proc = subprocess.run(
        [sys.executable, __file__, "--child", str(commits)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,  # the spans
        stderr=subprocess.PIPE,
        text=True,
        check=True,
    )
    return json.loads(proc.stderr.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--commits", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        child(args.child)
        return
    times: dict[str, list[float]] = {"off": [], "on": []}
    for _ in range(args.rounds):
        for mode in ("off", "on"):
            times[mode] += run(mode, args.commits)
    load = os.getloadavg()[0]
    print(f"in-process commit, {len(times['off'])} commits each, load average {load:.1f}")
    for mode, label in (("off", "tracing off (baseline)"), ("on", "tracing on (console)")):
        t = sorted(times[mode])
        print(f"  {label:24s} p50 {percentile(t, 0.5):6.1f} ms   p95 {percentile(t, 0.95):6.1f} ms")
    p50 = percentile(times["on"], 0.5) / percentile(times["off"], 0.5)
    p95 = percentile(times["on"], 0.95) / percentile(times["off"], 0.95)
    print(f"  on ÷ off                 p50 {p50:6.2f}      p95 {p95:6.2f}")


if __name__ == "__main__":
    main()
