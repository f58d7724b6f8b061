"""LoCoMo retrieval quality: ctxpipe find / search / build_context against raw-turn baselines,
with honest credit.

    .venv/bin/python bench/locomo_recall.py [PATH/TO/locomo_dev.json] [--limit-conversations N]
                                            [--tuned 3] [--no-search] [--json OUT]
                                            [--query-threads 1]

Every session of every conversation is committed through the pipeline in process (rules LLM,
dedup against the replica, the same code as Celery runs), the outbox is drained by the index
worker after each commit, then for every question of categories 1-4 (5, adversarial, has no
answer) each system returns a ranked list of texts:

- ctxpipe `find` (hybrid pgvector + full text; 10 hits, more to fill the larger budgets) and
  `search` (intent + hierarchical), and `build_context` at `--budget` tokens (one text);
- baselines over the raw turns of the same conversation, each turn prefixed with its session
  date and speaker: BM25 (rank-bm25), dense MiniLM (cosine), their reciprocal-rank-fusion hybrid
  (the text arm fuses only turns with a non-zero BM25 score) and a best-sentence variant of the
  hybrid (each turn cut to its sentence that best matches the question, at find's 40-token
  sentence cap), so that tokens compare like for like.

Scoring (bench/_grounding.py, bench/_recall_scoring.py, tested in tests/unit/bench/):
grounded recall any@5/any@10/all@10 — an item earns an evidence turn only if it cites it and its
text carries that turn's content; answer_in_context@200/500/1000 — the gold answer is in the
texts concatenated in rank order up to B tokens; the old id-only credit as `loose@10`; tokens
and distinct turns cited per query; the kind of unit find's hits came from. Figures are printed
for all conversations and separately for the held-out ones (after the first `--tuned`).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import _locomo
import numpy as np
from _baselines import Baselines, Turn
from _grounding import TurnContent
from _locomo import evidence_ids
from _recall_latency import (
    CONTEXT_MS,
    VARIANT_MS,
    latency_meta,
    print_latency,
    timed_find,
    torch_threads,
)
from _recall_report import BASELINES, BEST_SENTENCE, CATEGORIES, report
from _recall_scoring import BUDGETS, Built, Item, Tally, score_context, score_items
from _recall_variants import (
    context_variant,
    find_variant,
    parse_context_variant,
    parse_variant,
    search_variant,
)

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ctxpipe.commit.coordinator import CommitCoordinator  # noqa: E402
from ctxpipe.commit.payloads import CommitRequest  # noqa: E402
from ctxpipe.core.config import Settings  # noqa: E402
from ctxpipe.core.session import RequestContext, SessionInput  # noqa: E402
from ctxpipe.index.wiring import make_worker  # noqa: E402
from ctxpipe.index.worker import IndexWorker  # noqa: E402
from ctxpipe.retrieval.access import owner_spaces  # noqa: E402
from ctxpipe.retrieval.config import HierarchicalConfig  # noqa: E402
from ctxpipe.retrieval.context.context_builder import ContextBuilder, ContextRequest  # noqa: E402
from ctxpipe.retrieval.find.hybrid_finder import HybridFinder  # noqa: E402
from ctxpipe.retrieval.models import FindFilters, FindHit, FindResult  # noqa: E402
from ctxpipe.retrieval.read_path import ReadPath  # noqa: E402
from ctxpipe.runtime import Runtime  # noqa: E402
from ctxpipe.storage.embedded_pg import start_postgres, stop_postgres  # noqa: E402
from ctxpipe.storage.migrations import migrate  # noqa: E402
from ctxpipe.storage.netutil import free_port  # noqa: E402

SYSTEMS = ("ctxpipe find", "ctxpipe search", "build_context", *BASELINES)
FIND_K_FOR_BUDGET = 40  # hits asked of find to fill the largest answer-in-context budget
SCHEMA = "locomo_bench"
VARIANTS: dict[str, dict[str, Any]] = {}  # "find K=V" systems: FindConfig changes (--variant)
SEARCH_VARIANTS: dict[str, dict[str, Any]] = {}  # "search K=V": HierarchicalConfig changes
CONTEXT_VARIANTS: dict[str, dict[str, Any]] = {}  # "build_context K=V": ContextConfig changes


# ------------------------------------------------------------------ data
def unit_kind(h: FindHit) -> str:
    """The kind of unit a find/search hit came from."""
    if "/sessions/" in h.uri:
        return "archive turn" if h.level == 2 else "archive summary"
    return "memory L0" if h.level == 0 else "memory line"


def hit_items(hits: Sequence[FindHit]) -> list[Item]:
    return [Item(h.returned_text(), frozenset(h.message_ids), h.tokens, unit_kind(h)) for h in hits]


# ------------------------------------------------------------------ ingest
def commit_conversation(
    coord: CommitCoordinator | None, worker: IndexWorker | None, sample: dict[str, Any]
) -> tuple[RequestContext, list[str], list[Turn]]:
    """Commit every session of `sample` (unless `coord` is None: a kept state is read as it
    is) and return the reader's context, the session ids and the dated turns."""
    conv = sample["conversation"]
    turns = [
        Turn(t["dia_id"], t["speaker"], date, _locomo.turn_text(t))
        for _, date, items in _locomo.sessions_of(conv)
        for t in items
    ]
    session_ids: list[str] = []
    for raw in _locomo.session_inputs(sample):
        session = SessionInput.model_validate(raw)
        session_ids.append(session.session_id)
        if coord is not None and worker is not None:
            coord.commit_sync(CommitRequest.from_session(session, commit_id=raw["commit_id"]))
            worker.drain(max_seconds=600)
    first = _locomo.session_inputs(sample)[0]
    ctx = RequestContext(
        account_id=first["account_id"],
        user_id=first["user_id"],
        agent_id=first["agent_id"],
        session_id="bench",
    )
    return ctx, session_ids, turns


# ------------------------------------------------------------------ main
def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("data", type=Path, nargs="?", default=None, help="locomo_dev.json")
    ap.add_argument("--limit-conversations", type=int, default=None, metavar="N")
    ap.add_argument("--tuned", type=int, default=3, metavar="N",
                    help="the first N conversations are the tuning set; the rest are reported "
                         "separately as held out (default 3)")  # fmt: skip
    ap.add_argument("--database-url", default=None, help="use this server (else an embedded one)")
    ap.add_argument("--state", type=Path, default=None, metavar="DIR",
                    help="keep the database and FS in DIR; a later run with the same DIR "
                         "(same conversations or fewer) skips ingest: read side only")  # fmt: skip
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    ap.add_argument("--query-threads", type=int, default=1, metavar="N",
                    help="torch threads while questions are asked (default 1, as an API "
                         "process runs: OMP_NUM_THREADS=1 there; 0: torch's own, all cores); "
                         "the ingest keeps torch's own")  # fmt: skip
    ap.add_argument("--no-search", action="store_true", help="skip ctxpipe search (faster)")
    ap.add_argument("--query-time-units", action="store_true",
                    help="also time every find with the unit vectors encoded at query time "
                         "(FindConfig.stored_units off: the path before index-time unit "
                         "vectors), alternating which runs first")  # fmt: skip
    ap.add_argument("--variant", action="append", default=[], metavar="K=V[,K=V]",
                    help="also score find with these FindConfig values (e.g. snippet_tokens=96),"
                         " as a system of its own on the same index; repeatable")  # fmt: skip
    ap.add_argument("--search-variant", action="append", default=[], metavar="K=V[,K=V]",
                    help="also score search with these HierarchicalConfig values (e.g. "
                         "alpha=0.8), as a system of its own; repeatable")  # fmt: skip
    ap.add_argument("--context-variant", action="append", default=[], metavar="K=V[,K=V]",
                    help="also score build_context with these ContextConfig values (e.g. "
                         "lead_view=sentence), and FindConfig values of the finder it "
                         "retrieves with under find. keys (find.dense_rows=32), as a system of "
                         "its own; repeatable")  # fmt: skip
    args = ap.parse_args(argv)

    data = _locomo.load(args.data)
    if args.limit_conversations:
        data = data[: args.limit_conversations]
    held_out = set(range(args.tuned, len(data)))
    for spec in args.variant:
        VARIANTS[f"find {spec}"] = parse_variant(spec)
    for spec in args.search_variant:
        SEARCH_VARIANTS[f"search {spec}"] = parse_variant(spec, HierarchicalConfig)
    for spec in args.context_variant:
        CONTEXT_VARIANTS[f"build_context {spec}"] = parse_context_variant(spec)
    tmp = args.state or Path(tempfile.mkdtemp(prefix="ctxpipe-locomo-"))
    tmp.mkdir(parents=True, exist_ok=True)
    marker = tmp / "ingested.json"
    wanted = [s["sample_id"] for s in data]
    reuse = args.state is not None and marker.exists()
    reuse = reuse and set(wanted) <= set(json.loads(marker.read_text()))
    pg_dir = tmp / "pg"
    url = args.database_url
    started = time.perf_counter()
    try:
        if url is None:
            url = start_postgres(
                pg_dir, free_port(), options={"fsync": "off", "synchronous_commit": "off"}
            )
        settings = Settings(
            fs_root=tmp / "fs", var_dir=tmp / "var", database_url=url, db_schema=SCHEMA
        )
        if not reuse:
            marker.unlink(missing_ok=True)
            shutil.rmtree(tmp / "fs", ignore_errors=True)
            _reset_schema(url)
        migrate(url, schema=SCHEMA, embedding_dim=settings.embedding_dim)
        rt = Runtime(settings)
        coord = CommitCoordinator(rt.components())
        worker = make_worker(rt, "locomo-bench")
        read = ReadPath.from_runtime(rt)
        tally = Tally()
        t_ingest = t_query = 0.0
        for index, sample in enumerate(data):
            t0 = time.perf_counter()
            ctx, sessions, turns = commit_conversation(
                None if reuse else coord, None if reuse else worker, sample
            )
            t_ingest += time.perf_counter() - t0
            t1 = time.perf_counter()
            with torch_threads(args.query_threads):
                evaluate(sample, index, ctx, sessions, turns, read, rt.embedder.encode, tally, args)
            t_query += time.perf_counter() - t1
            print(
                f"{sample['sample_id']}: {len(sessions)} sessions, {len(turns)} turns "
                f"(ingest {t_ingest:.0f}s, queries {t_query:.0f}s so far)",
                flush=True,
            )
        if args.state is not None and not reuse:
            marker.write_text(json.dumps(wanted), encoding="utf-8")
        meta = {
            "conversations": len(data),
            "held_out": sorted(i + 1 for i in held_out),
            "ingest_reused": reuse,
            "ingest_s": round(t_ingest, 1),
            "query_s": round(t_query, 1),
            **latency_meta(),
            "total_s": round(time.perf_counter() - started, 1),
        }
        systems = (*SYSTEMS, *VARIANTS, *SEARCH_VARIANTS, *CONTEXT_VARIANTS)
        out = report(tally, meta, held_out, systems)
        print_latency(meta)
        print(f"ingest {t_ingest:.0f}s, queries {t_query:.0f}s, total {meta['total_s']:.0f}s")
        if args.json:
            args.json.write_text(json.dumps(out, indent=2), encoding="utf-8")
        rt.close()
    finally:
        if args.database_url is None and pg_dir.exists():
            stop_postgres(pg_dir)
        if args.state is None:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


def _reset_schema(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")


def evaluate(
    sample: dict[str, Any],
    index: int,
    ctx: RequestContext,
    sessions: list[str],
    turns: list[Turn],
    read: ReadPath,
    embed: Callable[[list[str]], Any],
    tally: Tally,
    args: argparse.Namespace,
) -> None:
    count = read.counter.count
    base = Baselines(turns, embed, count)
    contents = {t.id: TurnContent.of(t.text) for t in turns}
    filters = FindFilters(account_id=ctx.account_id, owner_spaces=owner_spaces(ctx, sessions))
    limit = max(BUDGETS)
    for qa in sample["qa"]:
        cat = int(qa.get("category", 0))
        if cat not in CATEGORIES:
            continue
        evidence = evidence_ids(qa.get("evidence", [])) & contents.keys()
        if not evidence:
            continue
        question, answer = str(qa["question"]), qa.get("answer", "")

        answers: dict[str, list[Item]] = {}
        qvec = np.asarray(embed([question])[0], dtype=np.float32)
        rankings = base.rankings(question, qvec)
        for system, ranking in rankings.items():
            answers[system] = base.items(ranking, limit)
        hybrid = rankings["hybrid (bm25+dense)"]
        answers[BEST_SENTENCE] = base.best_sentence_items(hybrid, question, limit)
        found = timed_find(read, question, filters, args.query_time_units)
        answers["ctxpipe find"] = _find_items(read.finder, question, filters, limit, found)
        for system, update in VARIANTS.items():
            finder = find_variant(read, system, update)
            t0 = time.perf_counter()
            first = finder.find(question, filters, 10)
            VARIANT_MS.setdefault(system, []).append((time.perf_counter() - t0) * 1000)
            answers[system] = _find_items(finder, question, filters, limit, first)
        if not args.no_search:
            res = read.searcher.search(question, filters, ctx=ctx, agent_id=ctx.agent_id)
            answers["ctxpipe search"] = hit_items(res.hits)
        for system, update in SEARCH_VARIANTS.items():
            res = search_variant(read, system, update).search(
                question, filters, ctx=ctx, agent_id=ctx.agent_id, record=False
            )
            answers[system] = hit_items(res.hits)
        tally.add(
            "build_context",
            cat,
            index,
            context_row(read.builder, question, ctx, filters, evidence, contents, answer),
        )
        for system, update in CONTEXT_VARIANTS.items():
            builder = context_variant(read, system, update)
            row = context_row(builder, question, ctx, filters, evidence, contents, answer, False)
            tally.add(system, cat, index, row)
        for system, items in answers.items():
            row = score_items(items, evidence, contents, answer, count)
            tally.add(system, cat, index, row, items)


def _find_items(
    finder: HybridFinder,
    question: str,
    filters: FindFilters,
    limit: int,
    found: FindResult | None = None,
) -> list[Item]:
    """find's 10 hits, and more of them when those do not fill the largest budget."""
    items = hit_items((found or finder.find(question, filters, 10)).hits)
    if sum(it.tokens for it in items) < limit:  # more hits for the larger budgets
        more = hit_items(finder.find(question, filters, FIND_K_FOR_BUDGET).hits)
        items += [it for it in more if it not in items]
    return items


def context_row(
    builder: ContextBuilder,
    question: str,
    ctx: RequestContext,
    filters: FindFilters,
    evidence: set[str],
    turns: dict[str, TurnContent],
    answer: object,
    timed: bool = True,
) -> dict[str, float]:
    """build_context at each budget, scored by `score_context` (its time kept if `timed`)."""
    built: dict[int, Built] = {}
    for budget in BUDGETS:
        req = ContextRequest(query=question, budget=budget, incremental=False)
        res = builder.build(req, ctx, filters)
        if timed:
            CONTEXT_MS.append(res.timings_ms.get("total", 0.0))
        cited = frozenset(r.split(":", 1)[1] if ":" in r else r for r in res.cited_refs)
        built[budget] = Built(res.text, cited, res.total_tokens)
    return score_context(built, evidence, turns, answer)


if __name__ == "__main__":
    raise SystemExit(main())
