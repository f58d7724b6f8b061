"""LoCoMo retrieval quality: ctxpipe find / search / build_context against raw-turn baselines.

    .venv/bin/python bench/locomo_recall.py PATH/TO/locomo_dev.json [--limit-conversations N]

Every session of every conversation is committed through the pipeline in process (rules LLM,
dedup against the replica, the same code as Celery runs), the outbox is drained by the index
worker after each commit, then for every question of categories 1-4:

- ctxpipe `find` (hybrid pgvector + full text) and `search` (intent + hierarchical), top 5/10;
- baselines over the raw turns of the same conversation, in the same run: BM25 (rank-bm25),
  dense MiniLM (cosine), and their reciprocal-rank-fusion hybrid;
- `build_context` at a 1,000-token budget: does the assembled context cite the evidence?

A returned item counts as a hit only through the message ids of the text it returns (an archive
line cites its turn, a memory cites the turns it was derived from), and the tokens counted are
the tokens of that returned text (the model's own tokenizer). Questions of category 5
(adversarial, no answer) are left out. One account per conversation; speaker_a is the user,
speaker_b the assistant (both named), the session date is every message's timestamp, a shared
image is kept as its caption.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ctxpipe.commit.coordinator import CommitCoordinator  # noqa: E402
from ctxpipe.commit.payloads import CommitRequest  # noqa: E402
from ctxpipe.core.config import Settings  # noqa: E402
from ctxpipe.core.session import RequestContext, SessionInput  # noqa: E402
from ctxpipe.index.worker import IndexWorker  # noqa: E402
from ctxpipe.retrieval.access import owner_spaces  # noqa: E402
from ctxpipe.retrieval.context_builder import ContextRequest  # noqa: E402
from ctxpipe.retrieval.engine import ReadPath  # noqa: E402
from ctxpipe.retrieval.models import FindFilters, FindHit  # noqa: E402
from ctxpipe.retrieval.text import STOPWORDS, stem, words  # noqa: E402
from ctxpipe.runtime import Runtime  # noqa: E402
from ctxpipe.storage.embedded_pg import start_postgres, stop_postgres  # noqa: E402
from ctxpipe.storage.migrations import migrate  # noqa: E402
from ctxpipe.storage.netutil import free_port  # noqa: E402

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
SYSTEMS = ("ctxpipe find", "ctxpipe search", "bm25", "dense", "hybrid (bm25+dense)")
BASELINES = ("bm25", "dense", "hybrid (bm25+dense)")
SCHEMA = "locomo_bench"
FIND_MS: list[float] = []  # wall time of every ctxpipe find call
_ID_RE = re.compile(r"D\d+:\d+")


# ------------------------------------------------------------------ data
def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "x"


def turn_text(turn: dict[str, Any]) -> str:
    text = str(turn.get("text", "")).strip()
    caption = turn.get("blip_caption")
    if caption:
        text = f"{text} (shared a photo: {caption})".strip()
    return text


def parse_date(text: str) -> datetime:
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y")


def sessions_of(conv: dict[str, Any]) -> list[tuple[int, datetime, list[dict[str, Any]]]]:
    out = []
    for key, turns in conv.items():
        m = re.fullmatch(r"session_(\d+)", key)
        if m and isinstance(turns, list) and turns:
            out.append((int(m.group(1)), parse_date(conv[f"{key}_date_time"]), turns))
    return sorted(out)


def evidence_ids(raw: Sequence[str]) -> set[str]:
    """Normalised evidence turn ids ('D:11:26' -> 'D11:26', 'D9:1 D4:4' -> two ids)."""
    out: set[str] = set()
    for item in raw:
        for part in re.split(r"[\s,;]+", str(item)):
            part = re.sub(r"^D:(\d+):", r"D\1:", part.strip())
            if _ID_RE.fullmatch(part):
                out.add(part)
    return out


# ------------------------------------------------------------------ metrics
class Tally:
    def __init__(self) -> None:
        self.rows: dict[str, dict[int, list[dict[str, float]]]] = defaultdict(
            lambda: defaultdict(list)
        )

    def add(self, system: str, category: int, row: dict[str, float]) -> None:
        self.rows[system][category].append(row)

    def mean(self, system: str, key: str, category: int | None = None) -> float:
        rows = (
            [r for c in self.rows[system].values() for r in c]
            if category is None
            else self.rows[system][category]
        )
        return float(np.mean([r[key] for r in rows])) if rows else float("nan")

    def count(self, system: str, category: int | None = None) -> int:
        if category is None:
            return sum(len(c) for c in self.rows[system].values())
        return len(self.rows[system][category])


def score_ranked(ranked: Sequence[tuple[set[str], int]], evidence: set[str]) -> dict[str, float]:
    """ranked: (cited turn ids, tokens) per returned item, best first."""

    def cited(k: int) -> set[str]:
        out: set[str] = set()
        for ids, _ in ranked[:k]:
            out |= ids
        return out

    c5, c10 = cited(5), cited(10)
    return {
        "any@5": float(bool(c5 & evidence)),
        "any@10": float(bool(c10 & evidence)),
        "all@10": float(evidence <= c10),
        "tokens@5": float(sum(t for _, t in ranked[:5])),
        "tokens@10": float(sum(t for _, t in ranked[:10])),
    }


def hit_ids(h: FindHit) -> set[str]:
    return {m for m in h.message_ids}


# ------------------------------------------------------------------ baselines
def tokens_for_bm25(text: str) -> list[str]:
    return [stem(w) for w in words(text) if w not in STOPWORDS and len(w) > 1]


class Baselines:
    """BM25, dense and RRF hybrid over the raw turns of one conversation."""

    def __init__(self, turns: list[tuple[str, str]], embed: Callable[[list[str]], Any]) -> None:
        from rank_bm25 import BM25Okapi

        self.ids = [t[0] for t in turns]
        self.texts = [t[1] for t in turns]
        self.bm25 = BM25Okapi([tokens_for_bm25(t) for t in self.texts])
        self.vectors = np.asarray(embed(self.texts), dtype=np.float32)
        self.embed = embed

    def rankings(self, question: str, qvec: np.ndarray) -> dict[str, list[int]]:
        bm = self.bm25.get_scores(tokens_for_bm25(question))
        bm_rank = [int(i) for i in np.argsort(-bm, kind="stable")]
        dense = self.vectors @ qvec
        dense_rank = [int(i) for i in np.argsort(-dense, kind="stable")]
        fused: dict[int, float] = defaultdict(float)
        for ranking in (bm_rank, dense_rank):
            for r, i in enumerate(ranking):
                fused[i] += 1.0 / (60 + r + 1)
        hybrid = sorted(fused, key=lambda i: (-fused[i], i))
        return {"bm25": bm_rank, "dense": dense_rank, "hybrid (bm25+dense)": hybrid}


# ------------------------------------------------------------------ ingest
def commit_conversation(
    coord: CommitCoordinator, worker: IndexWorker, sample: dict[str, Any]
) -> tuple[RequestContext, list[str], list[tuple[str, str]]]:
    conv = sample["conversation"]
    a, b = conv["speaker_a"], conv["speaker_b"]
    account = slug(f"locomo-{sample['sample_id']}")
    user, agent = slug(a), slug(b)
    session_ids: list[str] = []
    turns: list[tuple[str, str]] = []
    for n, date, items in sessions_of(conv):
        sid = f"{slug(sample['sample_id'])}-s{n}"
        session_ids.append(sid)
        messages = []
        for i, t in enumerate(items):
            text = turn_text(t)
            turns.append((t["dia_id"], f"{t['speaker']}: {text}"))
            messages.append(
                {
                    "id": t["dia_id"],
                    "role": "user" if t["speaker"] == a else "assistant",
                    "name": t["speaker"],
                    "content": text,
                    "created_at": (date + timedelta(seconds=i)).isoformat(),
                }
            )
        session = SessionInput(
            account_id=account, user_id=user, agent_id=agent, session_id=sid, messages=messages
        )
        coord.commit_sync(CommitRequest.from_session(session, commit_id=f"locomo-{sid}"))
        worker.drain(max_seconds=600)
    ctx = RequestContext(account_id=account, user_id=user, agent_id=agent, session_id="bench")
    return ctx, session_ids, turns


# ------------------------------------------------------------------ report
def fmt(x: float) -> str:
    return "  -  " if math.isnan(x) else f"{x:5.3f}"


def report(tally: Tally, ctx_tally: Tally, meta: dict[str, Any]) -> dict[str, Any]:
    cats = sorted(CATEGORIES)
    out: dict[str, Any] = {"meta": meta, "systems": {}, "build_context": {}}
    print()
    print(f"questions (categories 1-4): {tally.count('bm25')}  " + "  ".join(
        f"{CATEGORIES[c]}={tally.count('bm25', c)}" for c in cats))  # fmt: skip
    head = f"{'system':22} {'metric':8} " + " ".join(f"{CATEGORIES[c]:>11}" for c in cats)
    print(head + f" {'all':>7} {'tok@10':>7}")
    for system in SYSTEMS:
        out["systems"][system] = {}
        for metric in ("any@5", "any@10", "all@10"):
            vals = [tally.mean(system, metric, c) for c in cats]
            overall = tally.mean(system, metric)
            out["systems"][system][metric] = {"overall": overall} | {
                CATEGORIES[c]: v for c, v in zip(cats, vals, strict=True)
            }
            tok = tally.mean(system, "tokens@10") if metric == "any@10" else float("nan")
            print(
                f"{system:22} {metric:8} "
                + " ".join(f"{fmt(v):>11}" for v in vals)
                + f" {fmt(overall):>7} "
                + (f"{tok:7.1f}" if not math.isnan(tok) else "")
            )
        out["systems"][system]["tokens@10"] = tally.mean(system, "tokens@10")
        out["systems"][system]["tokens@5"] = tally.mean(system, "tokens@5")
    hybrid = out["systems"]["hybrid (bm25+dense)"]
    find = out["systems"]["ctxpipe find"]
    best_base = {
        CATEGORIES[c]: max(out["systems"][b]["any@10"][CATEGORIES[c]] for b in BASELINES)
        for c in cats
    }
    gain = find["any@10"]["overall"] - hybrid["any@10"]["overall"]
    ratio = find["tokens@10"] / hybrid["tokens@10"] if hybrid["tokens@10"] else float("nan")
    below = [c for c, v in best_base.items() if find["any@10"][c] < v]
    print()
    print(
        f"ctxpipe find vs hybrid baseline: recall_any@10 {find['any@10']['overall']:.3f} vs "
        f"{hybrid['any@10']['overall']:.3f} ({gain * 100:+.1f} points, goal >= +5.0); tokens@10 "
        f"{find['tokens@10']:.1f} vs {hybrid['tokens@10']:.1f} (ratio {ratio:.2f}, goal <= 0.60)"
    )
    print(
        "categories where find is below the best baseline (recall_any@10): "
        + (", ".join(below) if below else "none")
    )
    out["goal"] = {"gain_points": gain * 100, "token_ratio": ratio, "below_best_baseline": below}
    n = ctx_tally.count("build_context")
    if n:
        any_cited = ctx_tally.mean("build_context", "any")
        all_cited = ctx_tally.mean("build_context", "all")
        tokens = ctx_tally.mean("build_context", "tokens")
        per_cat = {CATEGORIES[c]: ctx_tally.mean("build_context", "any", c) for c in cats}
        print(
            f"build_context @ {meta['budget']} tokens: evidence cited (any) {any_cited:.3f}, "
            f"(all) {all_cited:.3f}; mean context {tokens:.0f} tokens; max "
            f"{ctx_tally_max(ctx_tally):.0f}; per category "
            + ", ".join(f"{k}={v:.3f}" for k, v in per_cat.items())
        )
        out["build_context"] = {
            "budget": meta["budget"],
            "any": any_cited,
            "all": all_cited,
            "mean_tokens": tokens,
            "max_tokens": ctx_tally_max(ctx_tally),
            "per_category": per_cat,
        }
    return out


def ctx_tally_max(t: Tally) -> float:
    return max((r["tokens"] for c in t.rows["build_context"].values() for r in c), default=0.0)


# ------------------------------------------------------------------ main
def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("data", type=Path, help="path of locomo_dev.json (read in place)")
    ap.add_argument("--limit-conversations", type=int, default=None, metavar="N")
    ap.add_argument("--database-url", default=None, help="use this server (else an embedded one)")
    ap.add_argument("--budget", type=int, default=1000, help="build_context budget (tokens)")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    ap.add_argument("--no-search", action="store_true", help="skip ctxpipe search (faster)")
    args = ap.parse_args(argv)

    data = json.loads(args.data.read_text(encoding="utf-8"))
    if args.limit_conversations:
        data = data[: args.limit_conversations]
    tmp = Path(tempfile.mkdtemp(prefix="ctxpipe-locomo-"))
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
        _reset_schema(url)
        migrate(url, schema=SCHEMA, embedding_dim=settings.embedding_dim)
        rt = Runtime(settings)
        coord = CommitCoordinator(rt.components())
        worker = IndexWorker.from_runtime(rt, "locomo-bench")
        read = ReadPath.from_runtime(rt)
        counter = read.counter
        embed = rt.embedder.encode
        tally, ctx_tally = Tally(), Tally()
        t_ingest = t_query = 0.0
        for sample in data:
            t0 = time.perf_counter()
            ctx, sessions, turns = commit_conversation(coord, worker, sample)
            t_ingest += time.perf_counter() - t0
            t1 = time.perf_counter()
            evaluate(sample, ctx, sessions, turns, read, embed, counter, tally, ctx_tally, args)
            t_query += time.perf_counter() - t1
            print(
                f"{sample['sample_id']}: {len(sessions)} sessions, {len(turns)} turns "
                f"(ingest {t_ingest:.0f}s, queries {t_query:.0f}s so far)",
                flush=True,
            )
        meta = {
            "conversations": len(data),
            "budget": args.budget,
            "ingest_s": round(t_ingest, 1),
            "query_s": round(t_query, 1),
            "find_p50_ms": round(float(np.percentile(FIND_MS, 50)), 1) if FIND_MS else None,
            "find_p95_ms": round(float(np.percentile(FIND_MS, 95)), 1) if FIND_MS else None,
            "total_s": round(time.perf_counter() - started, 1),
        }
        out = report(tally, ctx_tally, meta)
        print(
            f"\nctxpipe find latency (question embedding included, line vectors computed on "
            f"first sight): p50 {meta['find_p50_ms']} ms, p95 {meta['find_p95_ms']} ms"
        )
        print(f"ingest {t_ingest:.0f}s, queries {t_query:.0f}s, total {meta['total_s']:.0f}s")
        if args.json:
            args.json.write_text(json.dumps(out, indent=2), encoding="utf-8")
        rt.close()
    finally:
        if args.database_url is None and pg_dir.exists():
            stop_postgres(pg_dir)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def _reset_schema(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")


def evaluate(
    sample: dict[str, Any],
    ctx: RequestContext,
    sessions: list[str],
    turns: list[tuple[str, str]],
    read: ReadPath,
    embed: Callable[[list[str]], Any],
    counter: Any,
    tally: Tally,
    ctx_tally: Tally,
    args: argparse.Namespace,
) -> None:
    base = Baselines(turns, embed)
    turn_tokens = [counter.count(t) for t in base.texts]
    filters = FindFilters(account_id=ctx.account_id, owner_spaces=owner_spaces(ctx, sessions))
    known = set(base.ids)
    for qa in sample["qa"]:
        cat = int(qa.get("category", 0))
        if cat not in CATEGORIES:
            continue
        evidence = evidence_ids(qa.get("evidence", [])) & known
        if not evidence:
            continue
        question = str(qa["question"])
        qvec = np.asarray(embed([question])[0], dtype=np.float32)
        for system, ranking in base.rankings(question, qvec).items():
            ranked = [({base.ids[i]}, turn_tokens[i]) for i in ranking[:10]]
            tally.add(system, cat, score_ranked(ranked, evidence))
        t0 = time.perf_counter()
        found = read.finder.find(question, filters, 10)  # embeds the question itself
        FIND_MS.append((time.perf_counter() - t0) * 1000)
        tally.add(
            "ctxpipe find",
            cat,
            score_ranked([(hit_ids(h), h.tokens) for h in found.hits], evidence),
        )
        if not args.no_search:
            res = read.searcher.search(question, filters, ctx=ctx, agent_id=ctx.agent_id)
            tally.add(
                "ctxpipe search",
                cat,
                score_ranked([(hit_ids(h), h.tokens) for h in res.hits], evidence),
            )
        built = read.builder.build(
            ContextRequest(query=question, budget=args.budget, incremental=False), ctx, filters
        )
        cited = {r.split(":", 1)[1] if ":" in r else r for r in built.cited_refs}
        ctx_tally.add(
            "build_context",
            cat,
            {
                "any": float(bool(cited & evidence)),
                "all": float(evidence <= cited),
                "tokens": float(built.total_tokens),
            },
        )


if __name__ == "__main__":
    raise SystemExit(main())
