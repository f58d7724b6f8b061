"""A big message committed: time per 100 kB of the message, against a 100 kB baseline.

    .venv/bin/python bench/big_message.py [--sizes 100000,1000000,4000000] [--repeat 3]

Each run commits, in process on a local PostgreSQL (dedup prefilter and outbox on), a session
of four short turns around one message of each size (log lines, as a pasted log would be);
the best of `--repeat` commits per size (a fresh session id each). Before, any message over
100,000 characters refused the whole session. Now the archive keeps a message whole up to
`CTXPIPE_LIMITS__MAX_MESSAGE_KEEP_CHARS` (2,000,000; above it a marked excerpt) and the
archive summary and the extractors read its first `CTXPIPE_LIMITS__MAX_MESSAGE_CHARS`
(100,000). Figures: commit ms, ms per 100 kB, and that figure ÷ the 100 kB baseline's
(at most 1: the cost stays linear in the size, or below it).
"""

from __future__ import annotations

import argparse
import time

from _stack import local_stack

from ctxpipe.core.session import Message, RequestContext
from ctxpipe.runtime import Runtime
from ctxpipe.service import ContextEngineService

LINE = "2026-11-26T10:00:00 worker-7 INFO processed batch 4411 in 32 ms, queue depth 12\n"


def session(size: int) -> list[Message]:
    big = (LINE * (size // len(LINE) + 1))[:size]
    return [
        Message(id="m1", role="user", content="I'm a data engineer in Lisbon. Here is the log:"),
        Message(id="m2", role="user", content=big),
        Message(id="m3", role="assistant", content="The batches all finish in about 32 ms."),
        Message(id="m4", role="user", content="Thanks, I prefer short answers like that."),
    ]


def commit_ms(svc: ContextEngineService, size: int, n: int) -> tuple[float, list[str]]:
    ctx = RequestContext(account_id="bench", user_id="u1", session_id=f"big-{size}-{n}")
    t0 = time.perf_counter()
    view = svc.wait_commit(svc.commit_session(ctx, session(size)), timeout=600)
    ms = (time.perf_counter() - t0) * 1000
    if view.result is None:
        raise SystemExit(f"commit of {size} characters failed: {view.error}")
    return ms, view.result.warnings


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100000,1000000,4000000")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with local_stack([]) as settings:
        svc = ContextEngineService(Runtime(settings))
        commit_ms(svc, 1_000, 0)  # warm: the model, the pools
        best: dict[int, float] = {}
        warned: dict[int, list[str]] = {}
        for n in range(args.repeat):  # sizes interleaved: each sees the same machine
            for size in sizes:
                ms, warned[size] = commit_ms(svc, size, n + 1)
                best[size] = min(best.get(size, ms), ms)
        svc.close()
    base = best[sizes[0]] / (sizes[0] / 100_000)
    print(f"a big message committed in process (best of {args.repeat}):")
    for size in sizes:
        per = best[size] / (size / 100_000)
        print(
            f"  {size:>10,} chars: {best[size]:8.0f} ms, {per:6.1f} ms per 100 kB "
            f"({per / base:.2f}x the {sizes[0]:,}-character baseline)"
        )
        for w in warned[size]:
            print(f"      warning: {w}")


if __name__ == "__main__":
    main()
