"""Open sessions under concurrent writers: each appended message lands in exactly one commit.

    .venv/bin/python bench/open_sessions.py [--messages 10000] [--writers 20] [--sessions 5]
        [--batch 5] [--max-messages 50]

`--writers` threads append `--messages` messages in all, `--batch` per call, to `--sessions`
open sessions shared between them (so appends of one session contend for its lock), with
`CTXPIPE_SESSION_MAX_MESSAGES=--max-messages`; every third call is sent twice (a retried
request). Commits are cut by count while they write, then each session is closed. Cuts go
through the Celery dispatcher's submit path: the ledger row, then the start message on the
broker (no workers: the commits stay enqueued, the pipeline is not what is measured here).

Checks, from the ledger itself: every message id is in exactly one commit, and each writer's
messages keep their order. Figures: messages/s and the latency of one append (p50, p95);
baseline, in the same run: the same messages submitted whole by the same writers as commits
of `--max-messages` messages through the same dispatcher (what a producer does without open
sessions), messages/s.
"""

from __future__ import annotations

import argparse
import threading
import time
from collections import Counter
from collections.abc import Callable

import psycopg
from _stack import local_stack, percentile

from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.session import Message, RequestContext
from ctxpipe.runtime import Runtime
from ctxpipe.sessions.wiring import make_open_sessions


def messages_of(writer: int, n: int, tag: str) -> list[Message]:
    return [
        Message(
            id=f"{tag}{writer}-{i:05d}",
            role="user" if i % 2 == 0 else "assistant",
            content=f"writer {writer} turn {i}: I moved to Lisbon last spring and I prefer tea.",
        )
        for i in range(n)
    ]


def run_writers(writers: int, work: Callable[[int], list[float]]) -> tuple[float, list[float]]:
    """Wall time of `writers` threads each running `work(w)`, and all their call latencies."""
    latencies: list[float] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def go(w: int) -> None:
        try:
            mine = work(w)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
            return
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=go, args=(w,)) for w in range(writers)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - t0, latencies


def ledger_messages(url: str, schema: str, prefix: str) -> dict[str, list[str]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            f"SELECT commit_id, request FROM {schema}.commits WHERE commit_id LIKE %s",
            (prefix + "%",),
        ).fetchall()
    return {cid: [m["id"] for m in req["messages"]] for cid, req in rows}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=10_000)
    ap.add_argument("--writers", type=int, default=20)
    ap.add_argument("--sessions", type=int, default=5)
    ap.add_argument("--batch", type=int, default=5)
    ap.add_argument("--max-messages", type=int, default=50)
    args = ap.parse_args()
    per_writer = args.messages // args.writers
    total = per_writer * args.writers

    with local_stack(
        [],
        session_max_messages=args.max_messages,
        db_pool_max=args.writers + 4,
        commit={"max_pending": 0},
    ) as settings:
        from tasks.dispatcher import CeleryDispatcher  # after the stack exported its settings

        rt = Runtime(settings)
        dispatcher = CeleryDispatcher(settings, rt.db)
        sessions = make_open_sessions(settings, rt.db, rt.fs, dispatcher.submit)
        contexts = [
            RequestContext(account_id="bench", user_id="u1", session_id=f"open-{s}")
            for s in range(args.sessions)
        ]

        def append(w: int) -> list[float]:
            ctx = contexts[w % args.sessions]
            mine = messages_of(w, per_writer, "o")
            out = []
            for n, start in enumerate(range(0, per_writer, args.batch)):
                chunk = mine[start : start + args.batch]
                t0 = time.perf_counter()
                sessions.append(ctx, chunk)
                out.append(time.perf_counter() - t0)
                if n % 3 == 0:
                    assert sessions.append(ctx, chunk).appended == 0  # a retried request
            return out

        def whole(w: int) -> list[float]:
            mine = messages_of(w, per_writer, "b")
            out = []
            for n, start in enumerate(range(0, per_writer, args.max_messages)):
                ctx = RequestContext(account_id="bench", user_id="u1", session_id=f"base-{w}")
                req = CommitRequest(
                    commit_id=f"base-{w}-{n}",
                    ctx=ctx,
                    messages=mine[start : start + args.max_messages],
                )
                t0 = time.perf_counter()
                dispatcher.submit(req)
                out.append(time.perf_counter() - t0)
            return out

        sessions.append(contexts[0], messages_of(999, 2, "warm"))  # load the tokenizer
        sessions.close(contexts[0])
        base_s, base_lat = run_writers(args.writers, whole)
        open_s, open_lat = run_writers(args.writers, append)
        t0 = time.perf_counter()
        for ctx in contexts:
            sessions.close(ctx)
        close_s = time.perf_counter() - t0

        commits = ledger_messages(settings.database_url, settings.db_schema, "open-")
        seen = Counter(m for ids in commits.values() for m in ids if m.startswith("o"))
        once = len(seen) == total and set(seen.values()) == {1}
        where = {m: (cid, i) for cid, ids in commits.items() for i, m in enumerate(ids)}
        with psycopg.connect(settings.database_url) as conn:
            first_seq = dict(
                conn.execute(
                    f"SELECT commit_id, min(seq) FROM {settings.db_schema}.open_messages "
                    "GROUP BY commit_id"
                ).fetchall()
            )
        ordered = all(
            [(first_seq[where[m.id][0]], where[m.id][1]) for m in messages_of(w, per_writer, "o")]
            == sorted(
                (first_seq[where[m.id][0]], where[m.id][1]) for m in messages_of(w, per_writer, "o")
            )
            for w in range(args.writers)
        )
        rt.close()

    print(
        f"open sessions: {total:,} messages from {args.writers} writers into {args.sessions} "
        f"sessions, {args.batch} per append (every third sent twice), cut at "
        f"{args.max_messages} messages"
    )
    print(
        f"  each message in exactly one commit: {once} ({len(seen):,} distinct of {total:,}; "
        f"{len(commits) - 1} commits cut); each writer's order kept: {ordered}"
    )
    p50, p95 = percentile(open_lat, 0.5) * 1000, percentile(open_lat, 0.95) * 1000
    print(
        f"  appends: {total / open_s:,.0f} messages/s, one append p50 {p50:.1f} ms, "
        f"p95 {p95:.1f} ms; closing {args.sessions} sessions {close_s * 1000:.0f} ms"
    )
    print(
        f"  baseline (same messages as whole commits of {args.max_messages}, same dispatcher): "
        f"{total / base_s:,.0f} messages/s, one submit p50 "
        f"{percentile(base_lat, 0.5) * 1000:.1f} ms, p95 {percentile(base_lat, 0.95) * 1000:.1f} ms"
    )
    print(f"  open sessions / baseline throughput: {base_s / open_s:.2f}x")
    if not (once and ordered):
        raise SystemExit("FAILED: a message is missing, doubled or out of order")


if __name__ == "__main__":
    main()
