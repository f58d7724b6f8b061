"""find latency and recall at 100k chunks across 100 owners.

    .venv/bin/python bench/search_latency.py [--rows 100000] [--owners 100] [--queries 200]
        [--device cuda] [--text-arm first|after|thread]

Synthetic rows, loaded with COPY: every chunk's text is a short synthetic sentence about a
random topic, its vector a mix of two real MiniLM sentence embeddings plus Gaussian noise,
normalised (the structure of real embeddings, at a fraction of the encoding cost). The HNSW
index is built after the load. Queries are new sentences, embedded at query time.

Reported, for find owner-filtered (one owner, 1 % of the rows) and unfiltered (the account):
p50/p95 of the whole `find` call (query embedding on one torch thread, SQL, sentence ranking,
recall recording)
and recall@10 of its vector search against an exact scan of the same rows; and as the
baseline measured in the same run (alternating which runs first), p50/p95 of the bare query a
plain vector store runs: embed the question, exact top-10 by cosine over the same rows.
Targets: find p95 <= 1.5 x the bare query's, recall >= 0.95.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ctxpipe.providers.embedder import PACKAGED_MODEL, SentenceTransformerEmbedder  # noqa: E402
from ctxpipe.retrieval.config import FindConfig  # noqa: E402
from ctxpipe.retrieval.find.hybrid_finder import HybridFinder  # noqa: E402
from ctxpipe.retrieval.find.recall_stats import RecallStatsStore  # noqa: E402
from ctxpipe.retrieval.models import FindFilters  # noqa: E402
from ctxpipe.retrieval.tokens import counter_for_model  # noqa: E402
from ctxpipe.storage.db import Database  # noqa: E402
from ctxpipe.storage.embedded_pg import start_postgres, stop_postgres  # noqa: E402
from ctxpipe.storage.migrations import migrate  # noqa: E402
from ctxpipe.storage.netutil import free_port  # noqa: E402

SCHEMA = "latency_bench"
ACCOUNT = "bench"
SUBJECTS = (
    "the user",
    "my sister",
    "our team lead",
    "the new intern",
    "a neighbour",
    "the doctor",
    "my manager",
    "the landlord",
    "an old friend",
    "the coach",
    "my cousin",
    "the client",
)
VERBS = (
    "booked",
    "cancelled",
    "recommended",
    "complained about",
    "fixed",
    "planned",
    "visited",
    "reviewed",
    "bought",
    "sold",
    "painted",
    "cooked",
    "debugged",
    "migrated",
    "scheduled",
    "forgot",
    "learned",
    "taught",
    "photographed",
    "repaired",
)
OBJECTS = (
    "a flight to Lisbon",
    "the quarterly report",
    "a vegan ramen recipe",
    "the kitchen sink",
    "the PostgreSQL upgrade",
    "a hiking trip in Sintra",
    "the dentist appointment",
    "a birthday party",
    "the garden fence",
    "a jazz concert",
    "the payments service",
    "a marathon training plan",
    "the family car",
    "a pottery class",
    "the Kafka consumer",
    "a sunrise over the lake",
    "the insurance claim",
    "a chess tournament",
    "the wedding venue",
    "a guitar lesson",
    "the Airflow DAG",
    "a camping weekend",
    "the job interview",
    "a watercolour painting",
    "the team offsite",
    "a bakery in Porto",
    "the tax return",
)
WHEN = (
    "last week", "yesterday", "in March", "on Friday", "two years ago", "this morning",
    "next month", "at the weekend", "after lunch", "before the holidays",
)  # fmt: skip


def sentence(rng: np.random.Generator) -> str:
    return (
        f"{SUBJECTS[rng.integers(len(SUBJECTS))].capitalize()} "
        f"{VERBS[rng.integers(len(VERBS))]} {OBJECTS[rng.integers(len(OBJECTS))]} "
        f"{WHEN[rng.integers(len(WHEN))]}."
    )


def percentile(values: list[float], p: float) -> float:
    return float(np.percentile(np.asarray(values), p)) if values else float("nan")


def load(
    url: str, embedder: SentenceTransformerEmbedder, rows: int, owners: int, base_n: int
) -> float:
    """Synthetic chunks via COPY, then the HNSW index. Returns seconds spent."""
    started = time.perf_counter()
    rng = np.random.default_rng(42)
    base_texts = list(dict.fromkeys(sentence(rng) for _ in range(base_n * 2)))[:base_n]
    base = np.asarray(embedder.encode(base_texts), dtype=np.float32)
    print(f"  embedded {len(base_texts)} base sentences", flush=True)
    per_owner = rows // owners
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
    migrate(url, schema=SCHEMA, embedding_dim=int(base.shape[1]))
    with psycopg.connect(url) as conn:
        conn.execute(f"DROP INDEX {SCHEMA}.idx_chunks_embedding")
        with conn.cursor() as cur:
            with cur.copy(
                f"COPY {SCHEMA}.context_nodes (uri, account_id, parent_uri, category, "
                "owner_space, abstract_text, version) FROM STDIN"
            ) as cp:
                for o in range(owners):
                    for i in range(per_owner):
                        uri = f"ctx://{ACCOUNT}/users/o{o}/memories/events/n{i}"
                        cp.write_row((uri, ACCOUNT, uri.rsplit("/", 1)[0], "events",
                                      f"users/o{o}", "", 1))  # fmt: skip
            with cur.copy(
                f"COPY {SCHEMA}.context_chunks (chunk_id, uri, account_id, parent_uri, level, "
                "text_content, embedding, context_type, category, owner_space, source_refs, "
                "unit_count, refs, node_abstract) FROM STDIN"  # as the index worker writes
            ) as cp:
                for o in range(owners):
                    for i in range(per_owner):
                        a, b = rng.integers(len(base_texts), size=2)
                        w = rng.uniform(0.6, 1.0)
                        v = w * base[a] + (1 - w) * base[b]
                        v += rng.normal(scale=0.02, size=v.shape).astype(np.float32)
                        v /= np.linalg.norm(v)
                        uri = f"ctx://{ACCOUNT}/users/o{o}/memories/events/n{i}"
                        vec = "[" + ",".join(f"{x:.5f}" for x in v) + "]"
                        cp.write_row((f"c{o}-{i}", uri, ACCOUNT, uri.rsplit("/", 1)[0], 0,
                                      base_texts[a], vec, "memory", "events", f"users/o{o}",
                                      f'["s{o}:m{i}"]', 0, f"{{s{o}:m{i}}}", ""))  # fmt: skip
        conn.commit()
        print(f"  copied {owners * per_owner} chunks; building the HNSW index", flush=True)
        conn.execute("SET maintenance_work_mem = '1GB'")
        conn.execute("SET max_parallel_maintenance_workers = 2")
        conn.execute(
            f"CREATE INDEX idx_chunks_embedding ON {SCHEMA}.context_chunks "
            "USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
        )
        conn.execute(f"ANALYZE {SCHEMA}.context_chunks")
        conn.execute(f"ANALYZE {SCHEMA}.context_nodes")
        conn.commit()
    return time.perf_counter() - started


def _bare(
    finder: HybridFinder, q: str, filters: FindFilters, times: list[float]
) -> tuple[list[float], set[str]]:
    """The bare query of a plain vector store, timed: embed the question, exact top-10 by
    cosine over the same rows in pgvector (also the ground truth of find's recall)."""
    t0 = time.perf_counter()
    qvec = finder.embed(q)
    truth = {c for c, _ in finder.exact_neighbours(qvec, filters, 10)}
    times.append((time.perf_counter() - t0) * 1000)
    return qvec, truth


_STAGE_NOTE = {
    "first": " (sql_text: from sending the text arm to its rows, the embedding inside)",
    "thread": " (embed runs beside the text arm)",
    "after": "",
}


def _text_arm(cfg: FindConfig) -> str:
    """How find runs its text arm beside the embedding (`--text-arm`)."""
    if cfg.overlap_embedding:
        return "thread"
    return "first" if cfg.send_text_arm_first else "after"


def run(finder: HybridFinder, queries: list[str], filters_of: Any, label: str) -> dict[str, Any]:
    latencies: list[float] = []
    stages: dict[str, list[float]] = {}
    exact_ms: list[float] = []
    recalls: list[float] = []
    plans: set[str] = set()
    for i, q in enumerate(queries):
        filters: FindFilters = filters_of(i)
        if i % 2 == 0:  # alternate which of find and the bare query runs first
            qvec, truth = _bare(finder, q, filters, exact_ms)
        t0 = time.perf_counter()
        res = finder.find(q, filters, 10)
        latencies.append((time.perf_counter() - t0) * 1000)
        if i % 2 == 1:
            qvec, truth = _bare(finder, q, filters, exact_ms)
        for k, v in res.timings_ms.items():
            stages.setdefault(k, []).append(v)
        plans.add(res.plan)
        n_cand = max(finder.config.candidates, 20)  # what find asked the vector arm for
        cand = finder.store.candidates("", qvec, filters, n_cand, plan=res.plan)
        got = [r.chunk_id for r in sorted(cand.rows, key=lambda r: r.vr or 1 << 30)][:10]
        recalls.append(len(truth & set(got)) / max(1, len(truth)))
    out = {
        "p50_ms": percentile(latencies, 50),
        "p95_ms": percentile(latencies, 95),
        "recall@10": float(np.mean(recalls)),
        "bare_p50_ms": percentile(exact_ms, 50),
        "bare_p95_ms": percentile(exact_ms, 95),
        "plan": "/".join(sorted(plans)),
        "stages_p50_ms": {k: percentile(v, 50) for k, v in stages.items() if k != "total"},
        "stages_p95_ms": {k: percentile(v, 95) for k, v in stages.items() if k != "total"},
    }
    print(
        f"{label:14} find p50 {out['p50_ms']:6.1f} ms  p95 {out['p95_ms']:6.1f} ms  "
        f"recall@10 {out['recall@10']:.3f}  plan {out['plan']:6}  | bare query (embed + exact "
        f"top-10) p50 {out['bare_p50_ms']:6.1f} ms p95 {out['bare_p95_ms']:6.1f} ms  "
        f"(find / bare: p50 {out['p50_ms'] / out['bare_p50_ms']:.2f}, "
        f"p95 {out['p95_ms'] / out['bare_p95_ms']:.2f}; target p95 <= 1.5)"
    )
    print(
        f"{'':14} stages p50/p95: "
        + ", ".join(
            f"{k} {v:.1f}/{out['stages_p95_ms'][k]:.1f}" for k, v in out["stages_p50_ms"].items()
        )
        + " ms"
        + _STAGE_NOTE[_text_arm(finder.config)]
    )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--owners", type=int, default=100)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--base", type=int, default=3000, help="real embeddings the rows mix")
    ap.add_argument("--ef-search", type=int, default=None, help="override hnsw.ef_search")
    ap.add_argument("--database-url", default=None, help="use this server (else an embedded one)")
    ap.add_argument("--keep", action="store_true", help="reuse loaded rows (with --database-url)")
    ap.add_argument(
        "--torch-threads",
        type=int,
        default=1,
        help="intra-op threads for the query embedding (1: no oversubscription next to "
        "PostgreSQL on a small machine; 0 = torch's default)",
    )
    ap.add_argument(
        "--text-arm",
        choices=sorted(_STAGE_NOTE),
        default="first",
        help="first: the text arm is sent before the question is embedded (the default); "
        "after: embedded first, then the text arm; thread: embedded on a thread meanwhile",
    )
    ap.add_argument(
        "--device", default="cpu", help="where the question is embedded: cpu | cuda | ..."
    )
    args = ap.parse_args(argv)
    if args.torch_threads > 0:
        import torch

        torch.set_num_threads(args.torch_threads)
    tmp = Path(tempfile.mkdtemp(prefix="ctxpipe-latency-"))
    pg_dir = tmp / "pg"
    url = args.database_url
    try:
        if url is None:
            url = start_postgres(
                pg_dir,
                free_port(),
                options={"fsync": "off", "synchronous_commit": "off", "shared_buffers": "512MB"},
            )
        embedder = SentenceTransformerEmbedder(PACKAGED_MODEL, device=args.device)
        if not args.keep:
            secs = load(url, embedder, args.rows, args.owners, args.base)
            print(f"loaded in {secs:.0f}s", flush=True)
        db = Database(url, min_size=1, max_size=2)
        cfg = FindConfig(
            send_text_arm_first=args.text_arm == "first",
            overlap_embedding=args.text_arm == "thread",
        )
        if args.ef_search is not None:
            cfg = cfg.model_copy(update={"ef_search": args.ef_search})
        finder = HybridFinder(
            db,
            embedder,
            counter_for_model(PACKAGED_MODEL),
            schema=SCHEMA,
            config=cfg,
            recall_stats=RecallStatsStore(db, SCHEMA),
        )
        rng = np.random.default_rng(7)
        queries = [sentence(rng).rstrip(".") + "?" for _ in range(args.queries)]
        warm = [sentence(rng) for _ in range(20)]
        for q in warm:  # connections, model, caches
            finder.find(q, FindFilters(account_id=ACCOUNT), 10)
        owners = rng.integers(args.owners, size=args.queries)
        print(
            f"{args.rows} chunks, {args.owners} owners, {args.queries} queries, "
            f"ef_search {finder.config.ef_search}, exact scan up to "
            f"{finder.config.exact_scan_max_rows} rows"
        )
        run(
            finder,
            queries,
            lambda i: FindFilters(account_id=ACCOUNT, owner_spaces=[f"users/o{owners[i]}"]),
            "owner-filtered",
        )
        run(finder, queries, lambda i: FindFilters(account_id=ACCOUNT), "unfiltered")
        db.close()
    finally:
        if args.database_url is None and pg_dir.exists():
            stop_postgres(pg_dir)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
