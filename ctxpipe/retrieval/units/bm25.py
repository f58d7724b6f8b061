"""Okapi BM25 over bags of stemmed words kept as arrays (`TermBags`).

A chunk's lines and sentences are turned into bags once (`term_bags`, cached with the chunk's
split); a find joins the bags of its candidates (`join_bags`) and scores them for the query's
few terms with one array comparison per term (`bm25_bags`), instead of visiting every line and
sentence in Python for every query.

A word is kept as its `hash` (a 64-bit integer, the same in every bag of one process): bags
live only in the process that made them, and two different words sharing a hash is a chance
of about one in 2⁶⁴ per pair.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

K1 = 1.2
B = 0.75

_EMPTY_KEYS = np.zeros(0, dtype=np.int64)
_EMPTY_TF = np.zeros(0, dtype=np.float32)


@dataclass(frozen=True, slots=True)
class TermBags:
    """Bags of words of some documents, column by column: per distinct word of a document its
    key (`hash`) and count, the documents one after the other (`size`: how many distinct
    words each has); `length`: each document's number of words."""

    keys: np.ndarray  # int64
    tf: np.ndarray  # float32
    size: np.ndarray  # int64, per document
    length: np.ndarray  # float32, per document

    def __len__(self) -> int:
        return len(self.length)

    def doc_of(self) -> np.ndarray:
        """The document of every (word, count) entry."""
        return np.repeat(np.arange(len(self.size), dtype=np.int64), self.size)


def term_bags(bags: Sequence[Mapping[str, int]], lengths: Iterable[int]) -> TermBags:
    """The bags (word → count) of documents of `lengths` words, as arrays."""
    keys = [hash(word) for bag in bags for word in bag]
    tf = [count for bag in bags for count in bag.values()]
    return TermBags(
        np.asarray(keys, dtype=np.int64) if keys else _EMPTY_KEYS,
        np.asarray(tf, dtype=np.float32) if tf else _EMPTY_TF,
        np.fromiter((len(bag) for bag in bags), dtype=np.int64, count=len(bags)),
        np.fromiter(lengths, dtype=np.float32, count=len(bags)),
    )


def join_bags(parts: Sequence[TermBags]) -> TermBags:
    """The documents of `parts`, one part after the other."""
    if not parts:
        return term_bags([], [])
    if len(parts) == 1:
        return parts[0]
    return TermBags(
        np.concatenate([p.keys for p in parts]),
        np.concatenate([p.tf for p in parts]),
        np.concatenate([p.size for p in parts]),
        np.concatenate([p.length for p in parts]),
    )


def bm25_bags(bags: TermBags, idf: Mapping[str, float]) -> np.ndarray:
    """BM25 of each document of `bags` for the query terms of `idf` (stemmed term → idf),
    its length against the documents' mean length."""
    n = len(bags)
    if not n or not idf:
        return np.zeros(n, dtype=np.float32)
    lengths = bags.length
    norm = K1 * (1 - B + B * lengths / max(1.0, float(lengths.mean())))
    tf = np.zeros((n, len(idf)), dtype=np.float32)
    doc_of: np.ndarray | None = None
    for j, term in enumerate(idf):  # a few terms: one comparison over every entry each
        at = np.flatnonzero(bags.keys == hash(term))
        if at.size:
            doc_of = bags.doc_of() if doc_of is None else doc_of
            tf[doc_of[at], j] = bags.tf[at]
    weights = np.fromiter(idf.values(), dtype=np.float32, count=len(idf))
    # summed elementwise, not by a BLAS product: a few terms, and no stray FP flags
    return (weights * tf * (K1 + 1) / (tf + norm[:, None])).sum(axis=1, dtype=np.float32)


def bm25(
    docs: Sequence[Sequence[str]],
    idf: Mapping[str, float],
    counts: Sequence[Mapping[str, int]] | None = None,
) -> np.ndarray:
    """BM25 of each doc (token list) for the query terms of `idf` (stemmed term → idf);
    `counts`: each doc's term counts, when the caller has them already."""
    bags = counts if counts is not None else [Counter(d) for d in docs]
    return bm25_bags(term_bags(bags, (len(d) for d in docs)), idf)


__all__ = ["B", "K1", "TermBags", "bm25", "bm25_bags", "join_bags", "term_bags"]
