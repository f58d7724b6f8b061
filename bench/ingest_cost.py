"""What ingesting a conversation costs: LLM calls and tokens per 100 turns, embeddings per turn,
and turns/s from commit to searchable — against a bare baseline measured in the same run.

    .venv/bin/python bench/ingest_cost.py [--data PATH/locomo_dev.json] [--conversations 2]
                                          [--sessions N] [--no-celery]

Every session (or the first `--sessions N` of each) of the first N LoCoMo dev conversations
(read in place) is committed in order:

- **in process** (rules LLM, dedup against the replica, the index worker draining the outbox
  after each commit: the same code Celery runs); commit → searchable = commit + drain;
- **through Celery** (real worker processes, one producer thread per conversation that sends
  each session after the previous one registered; the clock stops when every commit is
  registered and the outbox is drained);
- **bare baseline**: what a peer without extraction does — embed each turn once (same model,
  same batch size) and insert it into a pgvector table of the same database.

LLM calls and prompt tokens come from the commits' own stats (the ledger for Celery), and per
prompt id from a counter around the provider; embeddings are counted at the embedder (every text
encoded: chunks, dedup probes). Each extractor's reports are tallied by status: a SKIPPED one was
gated (its input could not yield anything for it: no LLM call). `--without-gates` also ingests
in process on a fresh stack with the gates off (extractors' and merges'), the baseline of what
they save. Targets: ≤ 30 LLM calls per 100 turns (≤ 15 with the gates); in-process turns/s
≥ 0.5 × bare.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import _locomo
import psycopg
from _prompt_counter import PromptCounter
from _stack import local_stack, start_worker

from ctxpipe.commit.coordinator import CommitCoordinator
from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.commit.policies import base as policies_base
from ctxpipe.core.config import ChunkingConfig, Settings
from ctxpipe.core.session import SessionInput
from ctxpipe.extraction.base import CandidateExtractor
from ctxpipe.index.wiring import make_worker
from ctxpipe.providers.factory import make_llm
from ctxpipe.runtime import Runtime
from ctxpipe.storage.commit_ledger import CommitLedger
from ctxpipe.storage.db import Database

WORKERS = [("commit,maintenance", 2), ("extract", 2)]
MERGE_GATED = "merge adds nothing new (every line already in the node)"
T = TypeVar("T")


@contextmanager
def gates(enabled: bool) -> Iterator[None]:
    """The LLM-free gates on or off (off: every extractor calls the LLM, and so does every
    merge into an existing node)."""
    before = CandidateExtractor.gated, policies_base.adds_nothing
    CandidateExtractor.gated = enabled
    if not enabled:
        policies_base.adds_nothing = lambda *a, **k: False  # type: ignore[assignment]
    try:
        yield
    finally:
        CandidateExtractor.gated, policies_base.adds_nothing = before


def count_encodes(rt: Runtime) -> list[str]:
    """Wrap the runtime embedder's `encode_spans` (which `encode` reads through too) so every
    text it runs through the model is kept (a chunk whose lines are read together is one
    text; tokens are counted after the clock stops)."""
    emb = rt.embedder
    inner_spans = emb.encode_spans
    read: list[str] = []

    def encode_spans(texts: Any, spans: Any, *, fit: bool = False) -> list[Any]:
        items = list(texts)
        rows = inner_spans(items, spans, fit=fit)
        read.extend(t for t, row in zip(items, rows, strict=True) if row is not None)
        return list(rows)

    emb.encode_spans = encode_spans  # type: ignore[method-assign]
    return read


def in_process(settings: Settings, sessions: list[dict[str, Any]]) -> dict[str, Any]:
    counter = PromptCounter(make_llm(settings))
    rt = Runtime(settings, llm=counter)
    encoded = count_encodes(rt)
    coord = CommitCoordinator(rt.components())
    worker = make_worker(rt, "ingest-bench")
    rt.embedder.encode(["warm up"])  # load the model outside the clock
    encoded.clear()
    calls = prompt = completion = turns = 0
    commit_s = index_s = 0.0
    by_phase: dict[str, int] = {}
    reports: Counter[tuple[str, str]] = Counter()
    merges_gated = 0
    started = time.perf_counter()
    for i, s in enumerate(sessions):
        session = SessionInput.model_validate(s)
        t0 = time.perf_counter()
        result = coord.commit_sync(CommitRequest.from_session(session))
        t1 = time.perf_counter()
        worker.drain(max_seconds=600)
        commit_s += t1 - t0
        index_s += time.perf_counter() - t1
        calls += result.stats.llm_calls
        for phase, u in result.stats.llm_by_phase.items():
            by_phase[phase] = by_phase.get(phase, 0) + u.calls
        reports.update((r.extractor, r.status.value) for r in result.extractors)
        merges_gated += sum(1 for p in result.plans if p.reason.endswith(MERGE_GATED))
        prompt += result.stats.llm_prompt_tokens
        completion += result.stats.llm_completion_tokens
        turns += len(session.messages)
        print(f"\r  in process: {i + 1}/{len(sessions)} sessions, {turns} turns", end="")
    elapsed = time.perf_counter() - started
    print()
    tokens = sum(rt.embedder.count_tokens(t) for t in encoded)
    rt.close()
    return {
        "turns": turns,
        "seconds": elapsed,
        "turns_per_s": turns / elapsed,
        "llm_calls": calls,
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "sessions": len(sessions),
        "commit_s": commit_s,
        "index_s": index_s,
        "embeddings": len(encoded),
        "model_tokens": tokens,
        "calls_by_phase": by_phase,
        "calls_by_prompt": dict(counter.calls),
        "prompt_tokens_by_prompt": dict(counter.prompt_tokens),
        "reports": dict(reports),
        "merges_gated": merges_gated,
    }


def print_llm_cost(label: str, proc: dict[str, Any]) -> None:
    """LLM calls and prompt tokens per 100 turns, per phase, per prompt id; extractor reports."""
    per100 = 100.0 / proc["turns"]
    print(
        f"{label}: LLM calls per 100 turns {proc['llm_calls'] * per100:.1f}, prompt tokens per "
        f"100 turns {proc['prompt_tokens'] * per100:.0f}"
    )
    print(
        "  per phase: "
        + ", ".join(f"{k} {v * per100:.1f}" for k, v in sorted(proc["calls_by_phase"].items()))
    )
    tokens = proc["prompt_tokens_by_prompt"]
    print(
        "  per prompt id (calls, prompt tokens per 100 turns): "
        + ", ".join(
            f"{k} {v * per100:.1f} ({tokens.get(k, 0) * per100:.0f})"
            for k, v in sorted(proc["calls_by_prompt"].items())
        )
    )
    by_extractor: dict[str, list[str]] = {}
    for (name, status), n in sorted(proc["reports"].items()):
        by_extractor.setdefault(name, []).append(f"{status} {n}")
    print(
        f"  extractor reports of {proc['sessions']} sessions: "
        + "; ".join(f"{k}: {', '.join(v)}" for k, v in by_extractor.items())
        + f"; merges skipped before the call: {proc['merges_gated']}"
    )


def bare(settings: Settings, sessions: list[dict[str, Any]]) -> dict[str, float]:
    """Embed each turn once and insert it into pgvector: ingest without extraction."""
    rt = Runtime(settings)
    rt.embedder.encode(["warm up"])
    texts = [(m["id"], m["content"]) for s in sessions for m in s["messages"]]
    tokens = sum(rt.embedder.count_tokens(t) for _, t in texts)
    batch = settings.embedding_batch_size
    with psycopg.connect(settings.database_url, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS public.bare_turns")
        conn.execute(
            f"CREATE TABLE public.bare_turns (id text PRIMARY KEY, text text, "
            f"embedding vector({settings.embedding_dim}))"
        )
        started = time.perf_counter()
        for s in sessions:  # session by session, as a peer's add() would see them
            items = [(m["id"], m["content"]) for m in s["messages"]]
            for i in range(0, len(items), batch):
                part = items[i : i + batch]
                vectors = rt.embedder.encode([t for _, t in part])
                with conn.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO public.bare_turns VALUES (%s, %s, %s::vector) "
                        "ON CONFLICT (id) DO NOTHING",
                        [(k, t, str(v)) for (k, t), v in zip(part, vectors, strict=True)],
                    )
        elapsed = time.perf_counter() - started
        conn.execute("DROP TABLE public.bare_turns")
    rt.close()
    return {
        "turns": len(texts),
        "seconds": elapsed,
        "turns_per_s": len(texts) / elapsed,
        "model_tokens": tokens,
    }


def through_celery(convs: list[list[dict[str, Any]]]) -> dict[str, float]:
    with local_stack(WORKERS) as settings:
        from tasks.dispatcher import CeleryDispatcher

        embed = start_worker(settings, "embed", 1, settings.var_dir, pool="solo")
        db = Database.from_settings(settings)
        ledger = CommitLedger(db)
        dispatcher = CeleryDispatcher(settings, db)
        errors: list[str] = []

        def producer(sessions: list[dict[str, Any]]) -> None:
            for s in sessions:
                req = CommitRequest.from_session(SessionInput.model_validate(s))
                dispatcher.submit(req)
                deadline = time.monotonic() + 600
                while True:
                    row = ledger.get(req.commit_id)
                    if row is not None and row.phase in ("registered", "failed"):
                        if row.phase == "failed":
                            errors.append(f"{req.commit_id}: {row.error}")
                        break
                    if time.monotonic() > deadline:
                        errors.append(f"{req.commit_id}: not finished after 600 s")
                        return
                    time.sleep(0.02)

        # warm the workers (model load, pools) outside the clock
        warm = dict(convs[0][0], commit_id="warm-up", session_id="warm-up", account_id="warm")
        producer([warm])
        try:
            with psycopg.connect(settings.database_url, autocommit=True) as conn:
                _wait_drained(conn, 300)
                started = time.perf_counter()
                threads = [threading.Thread(target=producer, args=(c,)) for c in convs]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                _wait_drained(conn, 600)
                elapsed = time.perf_counter() - started
            cost = ledger.llm_cost()
        finally:
            db.close()
            embed.stop()
    turns = sum(len(s["messages"]) for c in convs for s in c)
    warm_turns = len(warm["messages"])
    if errors:
        print("  celery errors:", *errors[:5], sep="\n    ")
    return {
        "turns": turns,
        "seconds": elapsed,
        "turns_per_s": turns / elapsed,
        "llm_calls": cost.llm_calls,
        "prompt_tokens": cost.prompt_tokens,
        "turns_with_warmup": turns + warm_turns,
        "failed": len(errors),
    }


def _wait_drained(conn: psycopg.Connection, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        row = conn.execute(
            "SELECT count(*) FROM ctx.outbox_events WHERE status IN ('pending','claimed','failed')"
        ).fetchone()
        if row is not None and row[0] == 0:
            return
        if time.monotonic() > deadline:
            raise TimeoutError("outbox not drained")
        time.sleep(0.05)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=None, help="locomo_dev.json (read in place)")
    ap.add_argument("--conversations", type=int, default=2)
    ap.add_argument(
        "--sessions",
        type=int,
        default=None,
        help="only the first N sessions of each conversation (in order)",
    )
    ap.add_argument("--no-celery", action="store_true")
    ap.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="measure in process and bare this many times (fresh stacks); the ratio reported "
        "is the median (shared machines are noisy)",
    )
    ap.add_argument(
        "--unit-context",
        choices=["chunk", "line", "none"],
        default=None,
        help="also ingest in process on a fresh stack with CTXPIPE_CHUNKING__UNIT_CONTEXT set "
        "to this (`none`: every line and sentence read by the model on its own)",
    )
    ap.add_argument(
        "--without-unit-vectors",
        action="store_true",
        help="also ingest in process on a fresh stack with CTXPIPE_CHUNKING__UNIT_VECTORS=false "
        "(the cost of embedding the lines and sentences find ranks at index time)",
    )
    ap.add_argument(
        "--without-gates",
        action="store_true",
        help="also ingest in process on a fresh stack with the gates off (every extractor and "
        "every merge into an existing node calls the LLM): the baseline of the calls they save",
    )
    args = ap.parse_args()
    samples = _locomo.load(args.data)[: args.conversations]
    convs = [_locomo.session_inputs(s)[: args.sessions] for s in samples]
    sessions = [s for c in convs for s in c]
    print(
        f"LoCoMo dev: {len(samples)} conversations, {len(sessions)} sessions, "
        f"{sum(len(s['messages']) for s in sessions)} turns"
    )
    ratios = []
    for _ in range(args.repeat):  # fresh stack each time; in process and bare back to back
        with local_stack([]) as settings:
            proc = in_process(settings, sessions)
            base = bare(settings, sessions)
        ratios.append(proc["turns_per_s"] / base["turns_per_s"])
    other = None
    if args.unit_context:
        with local_stack([], chunking=ChunkingConfig(unit_context=args.unit_context)) as settings:
            other = in_process(settings, sessions)
    no_units = None
    if args.without_unit_vectors:
        with local_stack([], chunking=ChunkingConfig(unit_vectors=False)) as settings:
            no_units = in_process(settings, sessions)
    ungated = None
    if args.without_gates:
        with local_stack([]) as settings, gates(False):
            ungated = in_process(settings, sessions)
    cel = None if args.no_celery else through_celery(convs)

    per100 = 100.0 / proc["turns"]
    print()
    print(f"{'':34}{'turns/s':>10}{'÷ bare':>9}")
    print(f"{'bare (embed + insert each turn)':34}{base['turns_per_s']:10.1f}{1.0:9.2f}")
    ratio = statistics.median(ratios)
    label = "ctxpipe in process" + (f" (median of {len(ratios)})" if len(ratios) > 1 else "")
    print(
        f"{label:34}{proc['turns_per_s']:10.1f}{ratio:9.2f}"
        f"   (commit {proc['commit_s']:.1f} s + index {proc['index_s']:.1f} s)"
    )
    if other:
        print(
            f"{'  unit context ' + str(args.unit_context):34}{other['turns_per_s']:10.1f}"
            f"{other['turns_per_s'] / base['turns_per_s']:9.2f}"
            f"   (model reads {other['model_tokens'] / other['turns']:.0f} tokens per turn)"
        )
    if no_units:
        print(
            f"{'  without unit vectors':34}{no_units['turns_per_s']:10.1f}"
            f"{no_units['turns_per_s'] / base['turns_per_s']:9.2f}"
            f"   (embeddings per turn {no_units['embeddings'] / no_units['turns']:.2f})"
        )
    if cel:
        print(
            f"{'ctxpipe through Celery':34}{cel['turns_per_s']:10.1f}"
            f"{cel['turns_per_s'] / base['turns_per_s']:9.2f}"
            + (f"   ({cel['failed']} commits failed)" if cel["failed"] else "")
        )
    calls100 = proc["llm_calls"] * per100
    print()
    print(
        f"LLM calls per 100 turns: {calls100:.1f} (target <= 30: "
        f"{'met' if calls100 <= 30 else 'MISSED'}; <= 15: "
        f"{'met' if calls100 <= 15 else 'MISSED'}); prompt tokens per 100 turns: "
        f"{proc['prompt_tokens'] * per100:.0f}"
    )
    print_llm_cost("  gates on", proc)
    if ungated:
        print_llm_cost("  gates off (baseline)", ungated)
        print(
            f"  gates on ÷ off: LLM calls {proc['llm_calls'] / ungated['llm_calls']:.2f}, "
            f"prompt tokens {proc['prompt_tokens'] / ungated['prompt_tokens']:.2f}"
        )
    if cel:
        cel100 = 100.0 * cel["llm_calls"] / cel["turns_with_warmup"]
        print(f"  through Celery (ledger): {cel100:.1f} LLM calls per 100 turns")
    print(
        f"  completion tokens per 100 turns: {proc['completion_tokens'] * per100:.0f}; "
        f"LLM calls per session: {proc['llm_calls'] / proc['sessions']:.2f}"
    )
    print(
        f"texts read by the model per turn: {proc['embeddings'] / proc['turns']:.2f}, "
        f"tokens per turn: {proc['model_tokens'] / proc['turns']:.1f} "
        f"(bare baseline: 1.00 and {base['model_tokens'] / base['turns']:.1f})"
    )
    if len(ratios) > 1:
        print("ratios of the runs: " + ", ".join(f"{r:.2f}" for r in ratios))
    print(
        f"ingest turns/s in process ÷ bare = {ratio:.2f} (target >= 0.5: "
        f"{'met' if ratio >= 0.5 else 'MISSED'})"
    )


if __name__ == "__main__":
    main()
