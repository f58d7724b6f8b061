"""Index throughput: chunks per second through the whole index path divided by the model's own
`encode` rate on the same chunk texts, on the same device, in the same run.

    .venv/bin/python bench/index_throughput.py [--corpus synthetic|locomo] [--rounds 3] [--drains N]
    .venv/bin/python bench/index_throughput.py --no-db --corpus locomo [--device cuda]

The corpus is written to a throwaway FS: `synthetic` (session archives of 20-40 messages and
memories with cited refs) or `locomo` (every LoCoMo session as its session archive). Each round
starts from an empty replica and cold text caches, the prep processes' too (with
`CTXPIPE_CHUNKING__PREP_PROCESSES`, started afresh before the round, outside its time):

- with PostgreSQL (the default): one UPSERT_CONTEXT event per node; `IndexWorker.drain()` claims
  → reads the FS → chunks → embeds → upserts (COPY) → marks done, batch after batch;
- `--no-db`: an in-memory replica (`MemoryReplica`) instead, the nodes given to
  `Indexer.sync_nodes` in batches of `outbox_batch_size` (what the worker does per claim), so it
  runs where no PostgreSQL does (a GPU machine);
- `--drains N` (with PostgreSQL; `CTXPIPE_OUTBOX_DRAINS`): the worker indexes N batches at
  once, each on a thread of its own sharing the one model, so one writes its batch while
  another reads and embeds (the time by stage then sums over the threads);
- `--reindex` (with PostgreSQL): a clean reindex of the FS instead of the outbox drain, the
  bulk load that writes the rows without the HNSW index of the vectors and builds it once at
  the end (the build is printed as its share of the round);
- baseline: `model.encode` of exactly the chunk texts the index path produced, at the project's
  settings (`embedding_batch_size`, fp32), right before and right after the index path; the
  round's ratio uses their mean, so load drifts cancel out.

Prints both rates, `index ÷ model.encode`, the non-model time per chunk (the index path's time
minus the model's forward passes) and the time by stage; with PostgreSQL also the write share.
Settings come from CTXPIPE_* and the options.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for extra in (ROOT, ROOT / "bench"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

import _index_corpus  # noqa: E402

from ctxpipe.core.config import (  # noqa: E402
    CLAIM_BATCH_AUTO,
    PASS_TOKENS_AUTO,
    Settings,
    on_device,
)
from ctxpipe.core.enums import OutboxEventType  # noqa: E402
from ctxpipe.core.models import ContextNode, OutboxEvent  # noqa: E402
from ctxpipe.core.text import clear_sentence_cache  # noqa: E402
from ctxpipe.fs import ContextFS, FSRelationStore  # noqa: E402
from ctxpipe.index.indexer import Indexer, SyncReport  # noqa: E402
from ctxpipe.index.memory_replica import MemoryReplica  # noqa: E402
from ctxpipe.index.prep_pool import close_pools, shared_pool  # noqa: E402
from ctxpipe.providers.embedder import device_type, load_model  # noqa: E402
from ctxpipe.providers.factory import make_embedder  # noqa: E402

BENCH_SCHEMA = "ctxbench"
Corpus = Callable[[ContextFS], list[ContextNode]]


def median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


class Baseline:
    """`model.encode` of the chunk texts at the project's settings (fp32, its batch size)."""

    def __init__(self, settings: Settings, precision: str = "float32", batch: int = 0) -> None:
        self.model = load_model(
            settings.embedding_model,
            settings.embedding_device,
            precision,  # type: ignore[arg-type]
        )
        self.bs = batch or settings.embedding_batch_size
        self.label = f"{precision}, batch {self.bs}"
        self.texts: list[str] = []

    def rate(self, seed: int) -> float:
        shuffled = list(self.texts)
        random.Random(seed).shuffle(shuffled)
        started = time.perf_counter()
        self.model.encode(
            shuffled, batch_size=self.bs, normalize_embeddings=True, show_progress_bar=False
        )
        _sync(self.model)
        return len(shuffled) / (time.perf_counter() - started)


def _sync(model: Any) -> None:
    import torch

    if str(getattr(model, "device", "cpu")).startswith("cuda"):
        torch.cuda.synchronize()


Row = tuple[float, float, float, int, dict[str, float]]


def round_row(
    r: int, before: float, after: float, elapsed: float, chunks: int, stages: dict[str, float]
) -> Row:
    """One round's (index chunks/s, baseline chunks/s, elapsed s, chunks, stage seconds),
    printed; the baseline is the mean of the encode runs before and after."""
    rate, base = chunks / elapsed, (before + after) / 2
    print(
        f"round {r}: model.encode {before:7.1f} chunks/s, index path {rate:7.1f} chunks/s, "
        f"model.encode {after:7.1f} chunks/s, ratio {rate / base:.3f}",
        flush=True,
    )
    return rate, base, elapsed, chunks, stages


def report_rounds(
    label: str,
    settings: Settings,
    resolved: str,
    rows: list[Row],
    nodes: int,
    baseline: str,
) -> None:
    """rows: (index chunks/s, baseline chunks/s, elapsed s, chunks, stage seconds) per round."""
    ratios = [p / b for p, b, *_ in rows]
    pipe, base, ratio = median([r[0] for r in rows]), median([r[1] for r in rows]), median(ratios)
    elapsed, chunks, stages = rows[-1][2], rows[-1][3], rows[-1][4]
    model_s = stages.get("model", 0.0)
    print(
        f"\nnodes {nodes}, chunks {chunks}, model {settings.embedding_model} on "
        f"{settings.embedding_device}, embedding batch {settings.embedding_batch_size}, "
        f"precision {settings.embedding_precision}, {resolved}"
    )
    print(f"index path ({label}): {pipe:8.1f} chunks/s (median of the rounds)")
    print(f"model.encode on the same chunk texts ({baseline}): {base:8.1f} chunks/s (median)")
    print(f"index ÷ model.encode: {ratio:.3f} (median of the rounds' ratios)")
    print(
        f"non-model time per chunk: {(elapsed - model_s) / max(chunks, 1) * 1000:.3f} ms "
        f"(last round: {elapsed:.2f} s, of which the model's forward passes {model_s:.2f} s)"
    )
    if stages:
        split = ", ".join(
            f"{k} {v / elapsed:.1%}" for k, v in sorted(stages.items(), key=lambda kv: -kv[1])
        )
        print(f"last round's time by stage: {split}")


def resolved(settings: Settings, indexer: Indexer, claim: int, drains: int = 0) -> str:
    """The index settings left at `auto` as the indexer's device resolves them."""
    device = device_type(indexer.embedder)
    tokens = on_device(settings.embedding_batch_tokens, device, PASS_TOKENS_AUTO)
    at_once = f", drains {drains}" if drains else ""
    return (
        f"outbox batch {claim}{at_once}, batch tokens {tokens}, prep processes "
        f"{indexer.prep_processes} (as resolved on {device})"
    )


def fresh_prep_pool(indexer: Indexer, settings: Settings) -> None:
    """Prep processes (`CTXPIPE_CHUNKING__PREP_PROCESSES`) started afresh before a round, outside
    its time: their caches are as cold as the embed worker's."""
    close_pools()
    pool = shared_pool(indexer.model_name, settings.chunking, indexer.prep_processes)
    if pool is not None:
        pool.ready()


# ------------------------------------------------------------------ without a database
def run_memory(settings: Settings, corpus: Corpus, rounds: int, baseline: Baseline) -> None:
    fs = ContextFS(settings.fs_root)
    relations = FSRelationStore(fs)
    nodes = corpus(fs)
    uris = [n.uri for n in nodes]
    embedder = make_embedder(settings)
    baseline.model.encode(["warm up"] * 32, batch_size=32, show_progress_bar=False)
    step = on_device(settings.outbox_batch_size, device_type(embedder), CLAIM_BATCH_AUTO)
    rows = []
    for r in range(rounds + 1):  # round 0 learns the chunk texts and warms the model up
        clear_sentence_cache()
        gc.collect()  # the last round's replica goes now, not inside this one
        replica = MemoryReplica(embedder.dimension)
        indexer = Indexer(fs, relations, replica, embedder, settings.chunking)  # cold caches
        fresh_prep_pool(indexer, settings)
        before = baseline.rate(2 * r) if baseline.texts else 0.0
        report = SyncReport()
        embedder.timings.clear()
        started = time.perf_counter()
        for i in range(0, len(uris), step):
            indexer.sync_nodes(uris[i : i + step], report=report)
        _sync(baseline.model)
        elapsed = time.perf_counter() - started
        assert not report.errors, report.errors
        assert len(report.indexed) == len(uris), report
        if not baseline.texts:
            baseline.texts = [c.text_content for w in replica.nodes.values() for c in w.chunks]
            continue
        after = baseline.rate(2 * r + 1)
        stages = {**report.timings, **embedder.timings}
        rows.append(round_row(r, before, after, elapsed, report.chunks, stages))
    report_rounds(
        "in-memory replica",
        settings,
        resolved(settings, indexer, step),
        rows,
        len(nodes),
        baseline.label,
    )
    print(f"units written {report.units}, unit texts through the model {report.units_embedded}")


# ------------------------------------------------------------------ with PostgreSQL
def run_db(
    settings: Settings, corpus: Corpus, rounds: int, baseline: Baseline, clean_reindex: bool
) -> None:
    import psycopg

    from ctxpipe.index.reindex import reindex
    from ctxpipe.index.wiring import make_outbox, make_worker
    from ctxpipe.runtime import Runtime

    def reset() -> None:
        schema = settings.db_schema
        with psycopg.connect(settings.database_url) as conn:
            conn.execute(
                f"TRUNCATE {schema}.chunk_units, {schema}.context_chunks, "  # noqa: S608
                f"{schema}.context_nodes, {schema}.relation_edges"
            )
            conn.execute(
                f"UPDATE {schema}.outbox_events SET status = 'pending', retry_count = 0, "  # noqa: S608
                "next_attempt_at = now(), lease_until = NULL, worker_id = NULL, done_at = NULL"
            )
            conn.commit()

    def chunk_texts() -> list[str]:
        with psycopg.connect(settings.database_url) as conn:
            rows = conn.execute(
                f"SELECT text_content FROM {settings.db_schema}.context_chunks"  # noqa: S608
            ).fetchall()
        return [r[0] for r in rows]

    rt = Runtime(settings)
    try:
        nodes = corpus(rt.fs)
        make_outbox(rt).append_batch(
            [
                OutboxEvent(
                    event_id=OutboxEvent.make_id(OutboxEventType.UPSERT_CONTEXT, n.uri, n.version),
                    event_type=OutboxEventType.UPSERT_CONTEXT,
                    uri=n.uri,
                    payload={"version": n.version},
                )
                for n in nodes
            ]
        )
        baseline.model.encode(["warm up"] * 32, batch_size=32, show_progress_bar=False)
        rows = []
        for r in range(rounds + 1):
            clear_sentence_cache()
            worker = make_worker(rt, worker_id="bench")  # cold chunker caches
            fresh_prep_pool(worker.indexer, settings)
            reset()
            before = baseline.rate(2 * r) if baseline.texts else 0.0
            rt.embedder.timings.clear()
            started = time.perf_counter()
            if clean_reindex:
                rep = reindex(worker.indexer, clean=True, batch_size=worker.batch_size)
                assert not rep.errors and rep.indexed == len(nodes), rep
                done, timings_ms = rep.chunks, rep.timings_ms
            else:
                res = worker.drain(max_seconds=3600)
                assert res.failed == 0 and res.dead == 0, res.errors
                assert res.succeeded == len(nodes), res
                done, timings_ms = res.chunks, res.timings_ms
            elapsed = time.perf_counter() - started
            if not baseline.texts:
                baseline.texts = chunk_texts()
                continue
            after = baseline.rate(2 * r + 1)
            stages = {k: v / 1000 for k, v in timings_ms.items() if k != "total"}
            stages.update(rt.embedder.timings)
            rows.append(round_row(r, before, after, elapsed, done, stages))
    finally:
        rt.close()
    report_rounds(
        "clean reindex: read → chunk → embed → COPY, then the HNSW build"
        if clean_reindex
        else "claim → read → chunk → embed → COPY → done",
        settings,
        resolved(
            settings, worker.indexer, worker.batch_size, 0 if clean_reindex else worker.drains
        ),
        rows,
        len(nodes),
        baseline.label,
    )
    last = rows[-1][4]
    print(f"COPY/upsert share of the last round: {last.get('write', 0.0) / rows[-1][2]:.1%}")
    if clean_reindex:
        build = last.get("vector_index", 0.0) / rows[-1][2]
        print(f"HNSW build share of the last round: {build:.1%}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", choices=["synthetic", "locomo"], default="synthetic")
    ap.add_argument("--data", type=Path, default=None, help="LoCoMo json (default: shared data)")
    ap.add_argument("--archives", type=int, default=40, help="synthetic: session archives")
    ap.add_argument("--memories", type=int, default=160, help="synthetic: memories")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-db", action="store_true", help="an in-memory replica, no PostgreSQL")
    ap.add_argument(
        "--drains",
        type=int,
        default=None,
        help="with PostgreSQL: batches the worker indexes at once (CTXPIPE_OUTBOX_DRAINS)",
    )
    ap.add_argument(
        "--reindex",
        action="store_true",
        help="with PostgreSQL: a clean reindex (bulk load, HNSW built after) instead of the drain",
    )
    ap.add_argument("--device", default=None, help="cpu | cuda | ... (CTXPIPE_EMBEDDING_DEVICE)")
    ap.add_argument("--precision", default=None, help="float32 | float16 | bfloat16")
    ap.add_argument("--baseline-precision", default="float32", help="model.encode's dtype")
    ap.add_argument("--baseline-batch", type=int, default=0, help="default: embedding batch")
    ap.add_argument("--database-url", default=None, help="default: CTXPIPE_DATABASE_URL or own")
    ap.add_argument("--outbox-batch-size", type=int, default=None)
    ap.add_argument("--embedding-batch-size", type=int, default=None)
    args = ap.parse_args()
    if args.drains is not None and args.drains < 1:
        ap.error("--drains must be at least 1")
    if args.reindex and args.no_db:
        ap.error("--reindex needs PostgreSQL (leave out --no-db)")

    tmp = Path(tempfile.mkdtemp(prefix="ctxpipe-bench-index-"))
    overrides: dict[str, object] = {
        "fs_root": tmp / "fs",
        "var_dir": tmp / "var",
        "db_schema": BENCH_SCHEMA,
    }
    for key, value in (
        ("outbox_batch_size", args.outbox_batch_size),
        ("outbox_drains", args.drains),
        ("embedding_batch_size", args.embedding_batch_size),
        ("embedding_device", args.device),
        ("embedding_precision", args.precision),
    ):
        if value:
            overrides[key] = value
    corpus: Corpus = (
        (lambda fs: _index_corpus.locomo(fs, args.data))
        if args.corpus == "locomo"
        else (lambda fs: _index_corpus.synthetic(fs, args.archives, args.memories))
    )
    try:
        if args.no_db:
            settings = Settings(**overrides)  # type: ignore[arg-type]
            base = Baseline(settings, args.baseline_precision, args.baseline_batch)
            run_memory(settings, corpus, args.rounds, base)
            return
        from ctxpipe.storage.embedded_pg import start_postgres, stop_postgres
        from ctxpipe.storage.migrations import migrate
        from ctxpipe.storage.netutil import free_port

        url = args.database_url or os.environ.get("CTXPIPE_DATABASE_URL")
        own_pg = url is None
        try:
            if own_pg:
                url = start_postgres(tmp / "pg", free_port())
            overrides["database_url"] = url
            settings = Settings(**overrides)  # type: ignore[arg-type]
            migrate(url, schema=BENCH_SCHEMA, embedding_dim=settings.embedding_dim)
            base = Baseline(settings, args.baseline_precision, args.baseline_batch)
            run_db(settings, corpus, args.rounds, base, args.reindex)
        finally:
            if own_pg:
                stop_postgres(tmp / "pg")
            elif url:
                import psycopg

                with psycopg.connect(url) as conn:
                    conn.execute(f"DROP SCHEMA IF EXISTS {BENCH_SCHEMA} CASCADE")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
