"""Sentence-level ranking inside the candidate chunks of `find` (score propagation over the
chunk → line → sentence hierarchy).

Every candidate chunk is split into lines (an archive turn, a memory line) and every line into
sentences. A sentence is ranked by reciprocal rank fusion of four rankings — its own BM25 and
cosine, and its line's BM25 and cosine — plus the fused score of its chunk (vector + full-text
ranks from SQL). A sentence is thus found by what it says, by the turn around it and by the
passage around that, and what is returned is only the sentence, citing its turn.

BM25 uses the IDF of the query terms within the searched scope (computed by the SQL) and the
candidates' own mean lengths. Cosines need the lines' and sentences' vectors (for the best
``dense_rows`` chunks only): the index stores them next to the chunks (`unit_texts`, keyed by
`unit_key`), and a unit whose text is the whole chunk reuses the chunk's embedding; a unit with
no stored vector (a replica indexed before unit vectors) is encoded on demand and kept in an
LRU cache (`units.unit_vectors`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import overload

import numpy as np

from ctxpipe.retrieval.models import CandidateRow
from ctxpipe.retrieval.units.bm25 import TermBags, bm25_bags, join_bags, term_bags
from ctxpipe.retrieval.units.lexical import Unit, bm25_tokens, chunk_lines, stem, unit_key
from ctxpipe.retrieval.units.unit_vectors import Stored, UnitVectors, as_vector


@dataclass(slots=True)
class Sentence:
    row: int  # index of the candidate chunk
    line: int  # index of the line across all candidates
    unit: Unit
    score: float = 0.0
    similarity: float = 0.0


@dataclass(slots=True)
class Exploded:
    """The lines and sentences of the candidate chunks, column by column: per line its unit
    and chunk (`line_row`); per sentence its unit, chunk (`row`), line (global index) and
    whether it is that whole line (`same`); the keys of their stored vectors and the bags of
    words of both (`line_bags`, `sent_bags`, in the same order)."""

    lines: list[Unit]
    line_row: list[int]
    units: list[Unit] = field(default_factory=list)
    line_keys: list[str] = field(default_factory=list)  # `unit_key` of each line's text
    unit_keys: list[str] = field(default_factory=list)  # and of each sentence's
    row: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    line: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    same: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    line_bags: TermBags = field(default_factory=lambda: term_bags([], []))
    sent_bags: TermBags = field(default_factory=lambda: term_bags([], []))

    def sentence(self, i: int, score: float = 0.0, similarity: float = 0.0) -> Sentence:
        return Sentence(int(self.row[i]), int(self.line[i]), self.units[i], score, similarity)

    @property
    def sentences(self) -> list[Sentence]:
        return [self.sentence(i) for i in range(len(self.units))]


@dataclass(frozen=True, slots=True)
class _Parsed:
    """A chunk's lines and their sentences with the keys of their stored vectors and the
    bags of their stemmed words; a sentence's `sent_line` is its line's index in the chunk,
    `sent_same` whether it is the whole line."""

    lines: tuple[Unit, ...]
    line_keys: tuple[str, ...]
    line_bags: TermBags
    sents: tuple[Unit, ...]
    sent_keys: tuple[str, ...]
    sent_bags: TermBags
    sent_line: np.ndarray
    sent_same: np.ndarray


def explode(rows: Sequence[CandidateRow]) -> Exploded:
    """Lines and sentences of the candidate chunks (`chunk_lines`), joined from each chunk's
    cached split: no object is made per sentence (`Exploded.sentence` makes one)."""
    ex = Exploded([], [])
    kept: list[int] = []  # the rows with lines, and how many sentences each has
    sents_of: list[int] = []
    lines_of: list[np.ndarray] = []
    same_of: list[np.ndarray] = []
    line_bags: list[TermBags] = []
    sent_bags: list[TermBags] = []
    for r, row in enumerate(rows):
        p = _chunk_units(row.text_content, tuple(row.source_refs), row.context_type)
        if not p.lines:
            continue
        lines_of.append(p.sent_line + len(ex.lines))
        kept.append(r)
        sents_of.append(len(p.sents))
        same_of.append(p.sent_same)
        ex.lines.extend(p.lines)
        ex.line_row.extend([r] * len(p.lines))
        ex.units.extend(p.sents)
        ex.line_keys.extend(p.line_keys)
        ex.unit_keys.extend(p.sent_keys)
        line_bags.append(p.line_bags)
        sent_bags.append(p.sent_bags)
    if kept:
        ex.row = np.repeat(np.asarray(kept, dtype=np.int64), sents_of)
        ex.line, ex.same = np.concatenate(lines_of), np.concatenate(same_of)
        ex.line_bags, ex.sent_bags = join_bags(line_bags), join_bags(sent_bags)
    return ex


_Bag = tuple[list[str], Mapping[str, int]]  # stemmed words and their counts


def _bag(text: str) -> _Bag:
    tokens = bm25_tokens(text)
    return tokens, Counter(tokens)


@lru_cache(maxsize=8192)
def _chunk_units(text: str, refs: tuple[str, ...], context_type: str | None) -> _Parsed:
    """The lines of a chunk with their stemmed words, and each line's sentences with theirs.
    Cached by the chunk's text: the same candidates come back query after query, and
    splitting them is most of the ranking step otherwise. Callers never mutate the units."""
    lines: list[Unit] = []
    line_bags: list[_Bag] = []
    sents: list[Unit] = []
    sent_bags: list[_Bag] = []
    sent_line: list[int] = []
    sent_same: list[bool] = []
    for line in chunk_lines(text, list(refs), context_type):
        bag = _bag(line.text)
        for sent in line.sentences():
            sents.append(sent)
            sent_bags.append(bag if sent is line else _bag(sent.text))
            sent_line.append(len(lines))
            sent_same.append(sent.text == line.text)
        lines.append(line)
        line_bags.append(bag)
    return _Parsed(
        tuple(lines),
        tuple(unit_key(u.text) for u in lines),
        term_bags([c for _, c in line_bags], (len(t) for t, _ in line_bags)),
        tuple(sents),
        tuple(unit_key(u.text) for u in sents),
        term_bags([c for _, c in sent_bags], (len(t) for t, _ in sent_bags)),
        np.asarray(sent_line, dtype=np.int64),
        np.asarray(sent_same, dtype=bool),
    )


def split_ahead(sources: Iterable[tuple[str, tuple[str, ...], str]]) -> None:
    """Split chunks (text, refs, context type) the way `explode` will, into its cache: `find`
    does it for the text arm's chunks while PostgreSQL runs the fused statement, so that
    candidates not seen before cost the ranking step nothing."""
    for text, refs, context_type in sources:
        _chunk_units(text, refs, context_type)


def stemmed_idf(raw: dict[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for term, w in raw.items():
        key = stem(term)
        out[key] = max(out.get(key, 0.0), float(w))
    return out


def rrf_ranks(scores: np.ndarray, mask: np.ndarray, k: float) -> np.ndarray:
    """1/(k + rank) for the entries of `mask` ranked by score (others get 0)."""
    out = np.zeros(len(scores), dtype=np.float32)
    idx = np.flatnonzero(mask)
    if idx.size == 0:
        return out
    order = idx[np.argsort(-scores[idx], kind="stable")]
    out[order] = 1.0 / (k + 1.0 + np.arange(order.size, dtype=np.float32))
    return out


def rank_sentences(
    rows: Sequence[CandidateRow],
    ex: Exploded,
    query_vec: np.ndarray,
    idf: dict[str, float],
    vectors: UnitVectors,
    *,
    rrf_k: float = 60.0,
    dense_rows: int = 24,
    stored: Stored | None = None,
    row_bonus: np.ndarray | None = None,
    line_bonus: np.ndarray | None = None,
) -> Sequence[Sentence]:
    """The sentences, best first, with their fused score and cosine similarity. `stored`:
    the index-time vectors of the dense chunks' units (chunk id -> `unit_key` -> vector: a
    unit has the vector of its chunk's reading); `row_bonus`: a further
    fused term per candidate chunk (the graph signal); `line_bonus`: one per line (the
    lines dated when the query says, `date_match`)."""
    n = len(ex.units)
    if not n:
        return []
    terms = stemmed_idf(idf)
    s_lex = bm25_bags(ex.sent_bags, terms)
    l_lex = bm25_bags(ex.line_bags, terms)
    # dense: lines and sentences of the best chunks
    line_row = np.asarray(ex.line_row, dtype=np.int64)
    dense_line = line_row < dense_rows
    idx = np.flatnonzero(dense_line)
    s_dense = dense_line[ex.line]
    own = np.flatnonzero(s_dense & ~ex.same)  # dense sentences that are not their whole line
    l_sim = np.zeros(len(ex.lines), dtype=np.float32)
    s_sim = np.zeros(n, dtype=np.float32)
    line_vecs = _stored(rows, line_row[idx], [ex.line_keys[i] for i in idx], stored)
    own_vecs = _stored(rows, ex.row[own], [ex.unit_keys[i] for i in own], stored)
    if line_vecs is None or own_vecs is None:  # some unit not stored: cached, else encoded
        line_vecs, own_vecs = _looked_up(rows, ex, idx, own, query_vec, vectors, stored)
    if idx.size:
        l_sim[idx] = line_vecs @ query_vec
    s_sim = np.where(s_dense & ex.same, l_sim[ex.line], s_sim).astype(np.float32)
    if own.size:  # one dot each: a sentence scores as its line
        s_sim[own] = np.fromiter((v @ query_vec for v in own_vecs), np.float32, count=len(own))
    row_rrf = np.fromiter((r.rrf for r in rows), dtype=np.float32, count=len(rows))
    score = (
        rrf_ranks(s_lex, s_lex > 0, rrf_k)
        + rrf_ranks(s_sim, s_dense, rrf_k)
        + rrf_ranks(l_lex, l_lex > 0, rrf_k)[ex.line]
        + rrf_ranks(l_sim, dense_line, rrf_k)[ex.line]
        + row_rrf[ex.row]
    )
    if row_bonus is not None:
        score = score + row_bonus[ex.row]
    if line_bonus is not None:
        score = score + line_bonus[ex.line]
    row_sim = np.fromiter((r.sim or 0.0 for r in rows), dtype=np.float64, count=len(rows))
    similarity = np.where(s_dense, s_sim.astype(np.float64), row_sim[ex.row])
    # best first; ties by chunk, then line, then the order of the sentences
    order = np.lexsort((np.arange(n), ex.line, ex.row, -score))
    return RankedSentences(ex, order, score, similarity)


_NONE: Mapping[str, np.ndarray] = {}  # the stored vectors of a chunk with none


def _stored(
    rows: Sequence[CandidateRow], row_of: np.ndarray, keys: Sequence[str], stored: Stored | None
) -> np.ndarray | None:
    """The stored vectors of units (their chunk's row, their key), stacked; None when any of
    them is not stored."""
    if not keys:
        return np.zeros((0, 0), dtype=np.float32)
    if not stored:
        return None
    out: list[np.ndarray] = []
    for r, key in zip(row_of.tolist(), keys, strict=True):
        vec = stored.get(rows[r].chunk_id, _NONE).get(key)
        if vec is None:
            return None
        out.append(vec)
    return np.stack(out)


def _looked_up(
    rows: Sequence[CandidateRow],
    ex: Exploded,
    idx: np.ndarray,
    own: np.ndarray,
    query_vec: np.ndarray,
    vectors: UnitVectors,
    stored: Stored | None,
) -> tuple[np.ndarray, np.ndarray]:
    """The vectors of the dense lines (`idx`) and of their own sentences (`own`) when some
    are not stored: from the cache, or encoded as the index does (a line that is its whole
    chunk has the chunk's vector)."""
    line_row = ex.line_row
    line_text = [ex.lines[i].text for i in idx]
    for i, text in zip(idx, line_text, strict=True):
        row = rows[line_row[i]]
        if text == row.text_content:
            emb = as_vector(row.embedding)
            if emb is not None and emb.shape == query_vec.shape:
                vectors.put(row.chunk_id, text, emb)
    by_row: dict[int, list[str]] = {}
    for i, text in zip(idx, line_text, strict=True):
        by_row.setdefault(int(line_row[i]), []).append(text)
    for si in own:
        by_row.setdefault(int(ex.row[si]), []).append(ex.units[si].text)
    vectors.complete(rows, by_row, stored)
    lines = [(rows[line_row[i]].chunk_id, text) for i, text in zip(idx, line_text, strict=True)]
    sents = [(rows[ex.row[i]].chunk_id, ex.units[i].text) for i in own]
    return vectors.get_many(lines, stored), vectors.get_many(sents, stored)


class RankedSentences(Sequence[Sentence]):
    """The ranked sentences, best first; each `Sentence` is made when it is read (a find
    reads the first few dozen of hundreds)."""

    def __init__(
        self, ex: Exploded, order: np.ndarray, score: np.ndarray, similarity: np.ndarray
    ) -> None:
        self._ex = ex
        self._order = order
        self._score = score
        self._similarity = similarity

    def __len__(self) -> int:
        return len(self._order)

    def _at(self, i: int) -> Sentence:
        k = int(self._order[i])
        return self._ex.sentence(k, float(self._score[k]), float(self._similarity[k]))

    @overload
    def __getitem__(self, i: int) -> Sentence: ...
    @overload
    def __getitem__(self, i: slice) -> list[Sentence]: ...
    def __getitem__(self, i: int | slice) -> Sentence | list[Sentence]:
        if isinstance(i, slice):
            return [self._at(j) for j in range(*i.indices(len(self)))]
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        return self._at(i % len(self))

    def __iter__(self) -> Iterator[Sentence]:
        return (self._at(i) for i in range(len(self)))


__all__ = [
    "Exploded",
    "RankedSentences",
    "Sentence",
    "explode",
    "rank_sentences",
    "split_ahead",
]
