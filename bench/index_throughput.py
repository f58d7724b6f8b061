"""Index throughput: chunks per second through the whole index path divided by the model's own
`encode` rate on the same chunks, in the same run.

    .venv/bin/python bench/index_throughput.py [--archives 40] [--memories 160] [--rounds 3]

A synthetic FS (session archives of 20-40 messages, memories with cited refs) is written to a
temporary directory and one UPSERT_CONTEXT event queued per node. Each round:

- pipeline: an empty replica, every event pending; `IndexWorker.drain()` claims → reads the FS →
  chunks → embeds → upserts (COPY) → marks done, batch after batch (outbox_batch_size events);
- baseline: `model.encode` of exactly the chunk texts the pipeline produced, in batches of
  `embedding_batch_size` (the same settings the pipeline uses), run right before and right
  after the pipeline; the round's ratio uses their mean, so load drifts cancel out.

Prints both rates, the ratio (target ≥ 0.85) and where the pipeline's time went. Uses
CTXPIPE_DATABASE_URL when given (in a throwaway schema `ctxbench`, dropped at the end),
otherwise starts its own PostgreSQL on a free port. Settings come from CTXPIPE_* and the
options.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402

from ctxpipe.core.config import Settings  # noqa: E402
from ctxpipe.core.enums import ContextType, OutboxEventType  # noqa: E402
from ctxpipe.core.models import ContextNode, OutboxEvent  # noqa: E402
from ctxpipe.index.wiring import make_outbox, make_worker  # noqa: E402
from ctxpipe.runtime import Runtime  # noqa: E402
from ctxpipe.storage.embedded_pg import start_postgres, stop_postgres  # noqa: E402
from ctxpipe.storage.migrations import migrate  # noqa: E402
from ctxpipe.storage.netutil import free_port  # noqa: E402

BENCH_SCHEMA = "ctxbench"
WORDS = (
    "deploy pipeline airflow scheduler worker database index vector query latency budget "
    "lisbon berlin project falcon nimbus release review tests coverage python golang rust "
    "kubernetes cluster memory cache redis postgres migration schema rollback incident "
    "customer invoice quarterly revenue roadmap design meeting weekly planning sprint "
    "bug regression profiler flamegraph allocation timeout retry backoff queue consumer"
).split()


def sentence(rng: random.Random, n: int) -> str:
    words = [rng.choice(WORDS) for _ in range(n)]
    return " ".join(words).capitalize() + "."


def write_corpus(rt: Runtime, archives: int, memories: int, seed: int = 7) -> list[ContextNode]:
    rng = random.Random(seed)
    nodes: list[ContextNode] = []
    for a in range(archives):
        ids = [f"m{i}" for i in range(1, rng.randint(20, 40) + 1)]
        lines = [
            f"[{mid}] {rng.choice(['user', 'assistant'])}: "
            + " ".join(sentence(rng, rng.randint(6, 18)) for _ in range(rng.randint(1, 3)))
            for mid in ids
        ]
        nodes.append(
            rt.fs.write_node(
                ContextNode(
                    uri=f"ctx://bench/sessions/s{a}/archives/1",
                    abstract=sentence(rng, 24),
                    overview="\n".join(f"- {sentence(rng, 8)}" for _ in range(5)),
                    content="\n".join(lines),
                    context_type=ContextType.SESSION,
                    category="archive",
                    source_refs=[f"s{a}:{m}" for m in ids],
                    metadata={"message_ids": ids},
                )
            )
        )
    for m in range(memories):
        refs = [f"s{m % max(archives, 1)}:m{rng.randint(1, 20)}" for _ in range(3)]
        nodes.append(
            rt.fs.write_node(
                ContextNode(
                    uri=f"ctx://bench/users/u{m % 30}/memories/entities/e{m}",
                    abstract=sentence(rng, 12),
                    overview="\n".join(f"- {sentence(rng, 10)} [{r.split(':')[1]}]" for r in refs),
                    content="\n".join(
                        f"- {sentence(rng, rng.randint(10, 30))} [{rng.choice(refs).split(':')[1]}]"
                        for _ in range(rng.randint(3, 10))
                    ),
                    category="entities",
                    source_refs=refs,
                )
            )
        )
    return nodes


def queue_events(rt: Runtime, nodes: list[ContextNode]) -> None:
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


def reset(url: str, schema: str) -> None:
    with psycopg.connect(url) as conn:
        conn.execute(
            f"TRUNCATE {schema}.chunk_units, {schema}.context_chunks, "  # noqa: S608
            f"{schema}.context_nodes, "
            f"{schema}.relation_edges"
        )
        conn.execute(
            f"UPDATE {schema}.outbox_events SET status = 'pending', retry_count = 0, "  # noqa: S608
            "next_attempt_at = now(), lease_until = NULL, worker_id = NULL, done_at = NULL"
        )
        conn.commit()


def chunk_texts(url: str, schema: str) -> list[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(f"SELECT text_content FROM {schema}.context_chunks").fetchall()  # noqa: S608
    return [r[0] for r in rows]


def run(settings: Settings, archives: int, memories: int, rounds: int) -> None:
    rt = Runtime(settings)
    try:
        nodes = write_corpus(rt, archives, memories)
        queue_events(rt, nodes)
        worker = make_worker(rt, worker_id="bench")
        model = rt.embedder.model  # load outside the timings
        bs = settings.embedding_batch_size
        model.encode(["warm up"] * bs, batch_size=bs, show_progress_bar=False)
        worker.indexer.chunker.count_tokens("warm up")
        ratios, pipe_rates, base_rates, timings = [], [], [], {}
        chunks = 0
        texts: list[str] = []

        def baseline(seed: int) -> float:
            shuffled = list(texts)
            random.Random(seed).shuffle(shuffled)
            started = time.perf_counter()
            model.encode(
                shuffled, batch_size=bs, normalize_embeddings=True, show_progress_bar=False
            )
            return len(shuffled) / (time.perf_counter() - started)

        for r in range(rounds + 1):  # round 0 only learns the chunk texts (and warms caches)
            reset(settings.database_url, settings.db_schema)
            before = baseline(2 * r) if texts else 0.0
            started = time.perf_counter()
            res = worker.drain(max_seconds=3600)
            elapsed = time.perf_counter() - started
            assert res.failed == 0 and res.dead == 0, res.errors
            assert res.succeeded == len(nodes), res
            chunks, timings = res.chunks, res.timings_ms
            if not texts:
                texts = chunk_texts(settings.database_url, settings.db_schema)
                continue
            after = baseline(2 * r + 1)
            pipe_rates.append(chunks / elapsed)
            base_rates.append((before + after) / 2)  # bracket the pipeline: drifts cancel
            ratios.append(pipe_rates[-1] / base_rates[-1])
            print(
                f"round {r}: model.encode {before:7.1f} chunks/s, pipeline "
                f"{pipe_rates[-1]:7.1f} chunks/s, model.encode {after:7.1f} chunks/s, "
                f"ratio {ratios[-1]:.3f}",
                flush=True,
            )
    finally:
        rt.close()

    def median(values: list[float]) -> float:
        return sorted(values)[len(values) // 2]

    pipe, base, ratio = median(pipe_rates), median(base_rates), median(ratios)
    total = sum(timings.values()) - timings.get("total", 0)
    print(
        f"\nnodes {len(nodes)}, chunks {chunks}, model {settings.embedding_model} on "
        f"{settings.embedding_device}, embedding batch {settings.embedding_batch_size}, "
        f"outbox batch {settings.outbox_batch_size}"
    )
    print(f"pipeline (claim -> read -> chunk -> embed -> upsert): {pipe:8.1f} chunks/s (median)")
    print(f"model.encode on the same chunks:                     {base:8.1f} chunks/s (median)")
    verdict = "met" if ratio >= 0.85 else "MISSED"
    print(f"ratio (median of the rounds' ratios): {ratio:.3f}  (target >= 0.85: {verdict})")
    if total:
        split = ", ".join(f"{k} {v / total:.0%}" for k, v in timings.items() if k != "total" and v)
        print(f"last round's time split: {split}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--archives", type=int, default=40)
    ap.add_argument("--memories", type=int, default=160)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--database-url", default=None, help="default: CTXPIPE_DATABASE_URL or own")
    ap.add_argument("--outbox-batch-size", type=int, default=None)
    ap.add_argument("--embedding-batch-size", type=int, default=None)
    args = ap.parse_args()

    import os

    tmp = Path(tempfile.mkdtemp(prefix="ctxpipe-bench-index-"))
    overrides: dict[str, object] = {
        "fs_root": tmp / "fs",
        "var_dir": tmp / "var",
        "db_schema": BENCH_SCHEMA,
    }
    if args.outbox_batch_size:
        overrides["outbox_batch_size"] = args.outbox_batch_size
    if args.embedding_batch_size:
        overrides["embedding_batch_size"] = args.embedding_batch_size
    url = args.database_url or os.environ.get("CTXPIPE_DATABASE_URL")
    own_pg = url is None
    try:
        if own_pg:
            url = start_postgres(tmp / "pg", free_port())
        overrides["database_url"] = url
        settings = Settings(**overrides)  # type: ignore[arg-type]
        migrate(url, schema=BENCH_SCHEMA, embedding_dim=settings.embedding_dim)
        run(settings, args.archives, args.memories, args.rounds)
    finally:
        if own_pg:
            stop_postgres(tmp / "pg")
        elif url:
            with psycopg.connect(url) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {BENCH_SCHEMA} CASCADE")
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
