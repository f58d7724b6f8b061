"""Hybrid `find`: pgvector cosine fused with PostgreSQL full-text rank (reciprocal rank fusion),
returning the sentences that match — each citing the turns it comes from.

1. candidates: `CandidateStore` fuses the vector and the full-text ranking of chunks in SQL
   (exact scan or HNSW, chosen by the owner's row count);
2. ranking: `units.rank_sentences` ranks the sentences of those chunks by fusing their own,
   their line's and their chunk's scores (score propagation down the hierarchy), with the
   line and sentence vectors the index stored for the best ``dense_rows`` chunks (one query;
   a unit without one is encoded);
3. hits: the best sentences, one per cited turn, up to ``top_k`` and, when one is given, a
   token budget; a hit returns the sentence grown with its neighbours in the same turn or
   memory line up to ``snippet_tokens`` (`snippets.grow_snippet`), who said it and when (an
   archive line) or the date it is about (a memory), and, for a line of a memory's L1/L2, the
   memory's L0 line;
   a line of a profile or preference memory is a hit only while its fact is valid — now, or
   on ``filters.as_of`` (`ctxpipe.core.validity`) — checked before the ``top_k`` and budget
   cuts, so a closed fact leaves no hole; as of a date, a line reads as it did then and the
   memory's L0 line (a synthesis of what holds now) comes with it only when it held then;
4. results are grouped by context type; each returned node records a recall (in the
   background: recording never slows down or fails a read).

The text arm's statement is sent first (pipeline mode, `storage.pipelined`), then the query is
embedded while PostgreSQL ranks the text in its own process, and the arm is read after. One
Python thread does both: `overlap_embedding` embeds on a worker thread instead, and the two
threads hand the interpreter lock back and forth — on LoCoMo on two cores, find p50/p95
16.3–17.0 / 18.4–20.2 ms with the embedding first and the text arm after it, against
17.7–20.5 / 20.4–26.0 ms on two threads, the embedding itself 8 ms against 10–12. The fused
statement is sent the same way, and while PostgreSQL scans the vectors this thread splits the
text arm's chunks (its statement returns what they say) into the lines and sentences the
ranking reads — a candidate not seen before costs the ranking step nothing unless the vector
arm alone found it — and resolves the dates the query names (`date_match.query_periods`,
milliseconds of the date parser for a query that names one).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import nullcontext
from datetime import date
from typing import TypeVar

import numpy as np

from ctxpipe.core.config import UnitContext
from ctxpipe.core.validity import as_of_view, split_annotation
from ctxpipe.providers.base import Embedder
from ctxpipe.retrieval.config import FindConfig
from ctxpipe.retrieval.find.candidate_store import CandidateStore
from ctxpipe.retrieval.find.hit_rules import holds, restates, temporal
from ctxpipe.retrieval.find.recall_stats import RecallStatsStore
from ctxpipe.retrieval.find.text_arm import TextArm
from ctxpipe.retrieval.models import CandidateRow, FindFilters, FindHit, FindResult
from ctxpipe.retrieval.tokens import TokenCounter
from ctxpipe.retrieval.units.date_match import Period, line_bonus, query_periods
from ctxpipe.retrieval.units.lexical import (
    Unit,
    bm25_tokens,
    query_terms,
    unit_texts,
    without_words,
)
from ctxpipe.retrieval.units.sentence_ranking import (
    Sentence,
    explode,
    rank_sentences,
    rrf_ranks,
    split_ahead,
)
from ctxpipe.retrieval.units.snippets import grow_snippet, hit_date
from ctxpipe.retrieval.units.unit_vectors import StoredUnitCache, UnitVectors
from ctxpipe.storage.db import Database
from ctxpipe.storage.pipelined import Pending

_T = TypeVar("_T")
_MIN_CUT_TOKENS = 8  # a budget's last hit is cut to what is left, unless that is less


class HybridFinder:
    def __init__(
        self,
        db: Database,
        embedder: Embedder,
        counter: TokenCounter,
        *,
        schema: str = "ctx",
        config: FindConfig | None = None,
        recall_stats: RecallStatsStore | None = None,
        unit_context: UnitContext = "chunk",
    ) -> None:
        self.db = db
        self.embedder = embedder
        self.counter = counter
        self.config = config or FindConfig()
        self.schema = schema
        self.store = CandidateStore(db, schema, self.config)
        self.recall_stats = recall_stats
        self.vectors = UnitVectors(embedder, context=unit_context)
        self.stored_units = StoredUnitCache(
            self.store.unit_vectors, send=self.store.send_unit_vectors
        )
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="find-embed")
        # the stored unit vectors' fetches (waits on PostgreSQL): their own threads, so that
        # concurrent finds' fetches never queue behind their question embeddings
        self._fetches = ThreadPoolExecutor(max_workers=8, thread_name_prefix="find-units")

    @property
    def max_score(self) -> float:
        """The best fused score a hit can get (first in every ranking) for a query that names
        no date (`best_score`: for a given query)."""
        cfg = self.config
        return (4.0 + cfg.vector_weight + cfg.text_weight + cfg.graph_weight) / (cfg.rrf_k + 1.0)

    def best_score(self, query: str, as_of: date | None = None) -> float:
        """The best fused score a hit of `query` can get: a query that names a date adds the
        date ranking's term (`date_match`)."""
        cfg = self.config
        if cfg.date_weight and query_periods(query, as_of or date.today()):
            return self.max_score + cfg.date_weight / (cfg.rrf_k + 1.0)
        return self.max_score

    # ------------------------------------------------------------------ public API
    def embed(self, query: str) -> list[float]:
        return [float(x) for x in self.embedder.encode([query])[0]]

    def dense_query(self, query: str, filters: FindFilters, common: set[str] | None = None) -> str:
        """The text the vector arm embeds: the query without the scope's own stopwords
        (`CandidateStore.common_lexemes`: words more than `common_word_ratio` of its chunks
        hold), which the text arm does not match on either. Such a word tells no chunk from
        another, but in a question's embedding it dominates: "What is Ann's relationship
        status?" comes nearest to any short line that names Ann ("Ann would love to check them
        out") and far from the turn that answers it ("It'll be tough as a single parent"),
        which says "I". `common`: those words, when the caller has them already."""
        if common is None:
            terms = query_terms(query, self.config.max_query_terms)
            common = self.store.common_terms(filters, terms)
        return without_words(query, common) if common else query

    def _timed_embed(self, query: str, timings: dict[str, float]) -> list[float]:
        t0 = time.perf_counter()
        try:
            return self.embed(query)
        finally:
            timings["embed"] = (time.perf_counter() - t0) * 1000

    def find(
        self,
        query: str,
        filters: FindFilters,
        top_k: int | None = None,
        *,
        query_vector: Sequence[float] | None = None,
        record: bool | None = None,
        plan: str | None = None,
        budget_tokens: int | None = None,
    ) -> FindResult:
        """The best `top_k` hits for `query` within `filters`, grouped by context type;
        with `budget_tokens`, no more hits than fit in that many tokens (the last one cut)."""
        cfg = self.config
        k = top_k or cfg.top_k
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        n_cand = max(cfg.candidates, 2 * k)
        # the scope's own stopwords (cached per scope): searched with by neither arm
        common = self.store.common_terms(filters, query_terms(query, cfg.max_query_terms))
        timings["common_words"] = (time.perf_counter() - t0) * 1000
        qvec = list(query_vector or ())
        embed = query_vector is None
        dense = self.dense_query(query, filters, common) if embed else ""

        def arm_of(call: Callable[..., _T]) -> _T:  # text_arm, or send_text_arm (not read)
            return call(query, filters, n_cand, plan=plan, timings=timings, common=common)

        if embed and cfg.overlap_embedding:  # on a thread while this one runs the text arm
            pending = self._pool.submit(self._timed_embed, dense, timings)
            arm = arm_of(self.store.text_arm)
            qvec = pending.result()
        elif embed and cfg.send_text_arm_first:  # PostgreSQL ranks the text while the model runs
            with arm_of(self.store.send_text_arm) as sent:
                qvec = self._timed_embed(dense, timings)
                arm = sent.result()
        else:
            if embed:
                qvec = self._timed_embed(dense, timings)
            arm = arm_of(self.store.text_arm)
        # the chunks' own vectors serve the ranking only when it does not read the stored
        # unit vectors (a line that is its whole chunk has one of those too), or for a chunk
        # with none stored (the fused statement returns those)
        chunk_vectors = not (cfg.stored_units and cfg.dense_rows)
        with self.store.send_fuse(
            qvec, filters, arm, n_cand, chunk_vectors=chunk_vectors, timings=timings
        ) as fused:
            # the best of the text arm's chunks are mostly among the candidates the ranking
            # reads the stored unit vectors of: those not held yet are fetched beside the
            # fused statement (when the pool has a connection idle: this one is held)
            units = None if chunk_vectors else self._send_units(arm, len(qvec))
            with units or nullcontext():
                # while PostgreSQL scans the vectors: the text arm's chunks are split and the
                # query's dates resolved (the ranking needs both; the statement neither)
                split_ahead(arm.sources)
                periods = (
                    query_periods(query, filters.as_of or date.today()) if cfg.date_weight else []
                )
                if units is not None:
                    units.result()
            cand = fused.result()
        t1 = time.perf_counter()
        rows = [r for r in cand.rows if (r.sim or 0.0) >= filters.min_score]
        bonus = self._graph_ranking(filters.account_id, rows)
        qv = np.asarray(qvec, dtype=np.float32)
        hits = self._hits(rows, qv, k, cand.idf, budget_tokens, bonus, filters.as_of, periods)
        timings["rank"] = (time.perf_counter() - t1) * 1000
        if hits and (cfg.record_recalls if record is None else record) and self.recall_stats:
            self.recall_stats.record_hits_later(filters.account_id, hits)
        timings["total"] = (time.perf_counter() - t0) * 1000
        return FindResult.from_hits(
            query, hits, plan=cand.plan, owner_rows=cand.scope_rows, timings_ms=timings
        )

    def _send_units(self, arm: TextArm, dim: int) -> Pending[None] | None:
        """The stored unit vectors of the text arm's best `dense_rows` chunks not held yet,
        their statement sent (None when all are held, or the pool has no idle connection)."""
        n = self.config.dense_rows
        chunks = dict(zip(arm.ids[:n], arm.versions[:n], strict=True))
        return self.stored_units.send_missing(chunks, (dim,)) if chunks else None

    async def afind(self, query: str, filters: FindFilters, top_k: int | None = None) -> FindResult:
        return await asyncio.to_thread(self.find, query, filters, top_k)

    def exact_neighbours(
        self, qvec: Sequence[float], filters: FindFilters, n: int
    ) -> list[tuple[str, float]]:
        return self.store.exact_neighbours(qvec, filters, n)

    def invalidate(self) -> None:
        """Forget cached scope statistics and unit vectors (after bulk loads, a re-index)."""
        self.store.invalidate()
        self.stored_units.clear()

    # ------------------------------------------------------------------ internals
    def _hits(
        self,
        rows: list[CandidateRow],
        q: np.ndarray,
        top_k: int,
        idf: dict[str, float],
        budget_tokens: int | None = None,
        row_bonus: np.ndarray | None = None,
        as_of: date | None = None,
        periods: Sequence[Period] = (),
    ) -> list[FindHit]:
        if not rows:
            return []
        cfg = self.config
        pending: Future[dict[str, dict[str, np.ndarray]]] | None = None
        stored: dict[str, dict[str, np.ndarray]] | None = {}
        if cfg.stored_units and cfg.dense_rows:  # any not held: fetched while lines are split
            stored = self.stored_units.held(rows[: cfg.dense_rows])
            if stored is None:
                pending = self._fetches.submit(
                    self.stored_units.get, rows[: cfg.dense_rows], q.shape
                )
        ex = explode(rows)
        dated = line_bonus(periods, ex.lines, ex.line_row, rows, cfg.date_weight, cfg.rrf_k)
        if pending is not None:
            stored = pending.result()
        ranked = rank_sentences(
            rows,
            ex,
            q,
            idf,
            self.vectors,
            rrf_k=float(cfg.rrf_k),
            dense_rows=cfg.dense_rows,
            stored=stored,
            row_bonus=row_bonus,
            line_bonus=dated,
        )
        hits: list[FindHit] = []
        cited: set[str] = set()
        texts: set[str] = set()
        per_uri: dict[str, int] = {}
        left = budget_tokens if budget_tokens is not None else -1
        valid: dict[int, bool] = {}  # line -> its fact holds (the sentences share it)
        for s in ranked:
            if len(hits) >= top_k or left == 0:
                break
            row = rows[s.row]
            if s.line not in valid:
                valid[s.line] = holds(row, ex.lines[s.line], as_of)
            if not valid[s.line]:
                continue  # a closed fact (or one not yet true): not a hit, not a hole
            uri = row.uri
            refs = list(s.unit.refs)
            norm = " ".join(s.unit.text.lower().split())
            if norm in texts or (refs and set(refs) <= cited):
                continue  # says nothing new: same text, or only turns already cited
            if per_uri.get(uri, 0) >= cfg.max_hits_per_uri:
                continue
            texts.add(norm)
            cited.update(refs)
            per_uri[uri] = per_uri.get(uri, 0) + 1
            hit = self._hit(row, s, ex.lines[s.line], as_of)
            if left >= 0:
                if hit.tokens > left:
                    if left < _MIN_CUT_TOKENS:
                        break
                    hit = self._cut(hit, left)
                left = max(0, left - hit.tokens)
            hits.append(hit)
        return hits

    def warm(self) -> None:
        """Load what the first query of a process would otherwise pay for (a few hundred
        ms): the model, the date parser's language data, the sentence splitter, the stemmer."""
        self.embed("warm up")
        query_periods("what happened last week of May 2023", date.today())
        for text in unit_texts("Warming up the splitter. And the stemmer.", [], "memory"):
            bm25_tokens(text)

    def _graph_ranking(self, account_id: str, rows: list[CandidateRow]) -> np.ndarray | None:
        """Graph distance over the candidates: the nodes of the best `graph_seeds`
        chunks are at distance 0, candidates one relation away from them at 1; the ranking by
        1/(1+d) enters the fusion with `graph_weight` (None when off or nothing is related)."""
        cfg = self.config
        if cfg.graph_weight <= 0 or not rows:
            return None
        seeds = list(dict.fromkeys(r.uri for r in rows[: cfg.graph_seeds]))
        uris = list(dict.fromkeys(r.uri for r in rows))
        near = {b if a in seeds else a for a, b in self.store.edges_among(account_id, seeds, uris)}
        near -= set(seeds)
        if not near:
            return None
        score = np.array(
            [1.0 if r.uri in seeds else 0.5 if r.uri in near else 0.0 for r in rows],
            dtype=np.float32,
        )
        return cfg.graph_weight * rrf_ranks(score, score > 0, float(cfg.rrf_k))

    def _cut(self, hit: FindHit, tokens: int) -> FindHit:
        """`hit` with its text cut to fit in `tokens` (its L0 line first to go)."""
        cut = hit.model_copy(update={"abstract": "", "text": hit.text or hit.abstract})
        cut.text = self.counter.truncate(cut.text, tokens)
        cut.tokens = self.counter.count(cut.returned_text())
        return cut

    def _hit(
        self, row: CandidateRow, s: Sentence, line: Unit, as_of: date | None = None
    ) -> FindHit:
        text = grow_snippet(line, s.unit, self.config.snippet_tokens, self.counter)
        level = row.level
        ctype = row.context_type or "memory"
        when = hit_date(s.unit, row)
        valid_facts = temporal(row)
        if valid_facts:
            text = as_of_view(text, as_of)
            when = split_annotation(line.text)[1].valid_from or when
        abstract = ""
        if level == 0:
            abstract = text
        elif valid_facts:
            # a profile or preference memory is a list of facts, its L0 line a digest of the
            # first of them: other facts, not this line's context (and, as of a date, what
            # holds now rather than then); each line names whom it is about
            pass
        elif ctype != "session":  # a memory's L1/L2 line comes with its L0 line
            lines = row.abstract_text.strip().splitlines()
            abstract = self.counter.truncate(lines[0], self.config.abstract_tokens) if lines else ""
            t = " ".join(text.lower().split())
            if restates(abstract, text, cut=bool(lines) and abstract != lines[0]):
                abstract = ""
            elif t in " ".join(abstract.lower().split()):
                abstract = text
        hit = FindHit(
            uri=row.uri,
            level=level,
            chunk_index=row.chunk_index,
            chunk_id=row.chunk_id,
            context_type=ctype,
            category=row.category,
            owner_space=row.owner_space,
            parent_uri=row.parent_uri,
            score=s.score,
            similarity=s.similarity,
            text_rank=row.bm25,
            vector_rank=row.vr,
            fts_rank=row.tr,
            abstract=abstract,
            text=text,
            source_refs=list(s.unit.refs),
            role=s.unit.role or ("" if ctype == "session" else "memory"),
            speaker=s.unit.speaker,
            date=when,
            node_version=row.node_version,
            chunk_text=row.text_content,
        )
        hit.tokens = self.counter.count(hit.returned_text())
        return hit


__all__ = ["HybridFinder"]
