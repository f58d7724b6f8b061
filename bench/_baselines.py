"""The raw-turn baselines of bench/locomo_recall.py: BM25, dense, their RRF hybrid and its
best-sentence variant over the dated turns of one conversation."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from _grounding import best_sentence
from _recall_scoring import Item

from ctxpipe.retrieval.config import FindConfig
from ctxpipe.retrieval.units.lexical import STOPWORDS, stem, words

SENTENCE_CAP = FindConfig().snippet_tokens  # tokens of a best-sentence item: find's own cap


@dataclass(frozen=True)
class Turn:
    id: str
    speaker: str
    date: datetime
    text: str

    @property
    def dated(self) -> str:
        """What a baseline returns for a turn: its session date, speaker and text."""
        return f"[{self.date:%-d %B %Y}] {self.speaker}: {self.text}"


def tokens_for_bm25(text: str) -> list[str]:
    return [stem(w) for w in words(text) if w not in STOPWORDS and len(w) > 1]


class Baselines:
    """BM25, dense, their RRF hybrid and its best-sentence variant over the dated raw turns of
    one conversation."""

    def __init__(
        self, turns: list[Turn], embed: Callable[[list[str]], Any], count: Callable[[str], int]
    ) -> None:
        from rank_bm25 import BM25Okapi

        self.turns = turns
        self.count = count
        self.bm25 = BM25Okapi([tokens_for_bm25(t.dated) for t in turns])
        self.vectors = np.asarray(embed([t.dated for t in turns]), dtype=np.float32)
        self.tokens = [count(t.dated) for t in turns]

    def rankings(self, question: str, qvec: np.ndarray) -> dict[str, list[int]]:
        bm = self.bm25.get_scores(tokens_for_bm25(question))
        bm_rank = [int(i) for i in np.argsort(-bm, kind="stable")]
        dense = self.vectors @ qvec
        dense_rank = [int(i) for i in np.argsort(-dense, kind="stable")]
        fused: dict[int, float] = defaultdict(float)
        # only turns the text arm really matched take part in its side of the fusion
        for ranking in ([i for i in bm_rank if bm[i] > 0], dense_rank):
            for r, i in enumerate(ranking):
                fused[i] += 1.0 / (60 + r + 1)
        hybrid = sorted(fused, key=lambda i: (-fused[i], i))
        return {"bm25": bm_rank, "dense": dense_rank, "hybrid (bm25+dense)": hybrid}

    def items(self, ranking: Sequence[int], limit: int) -> list[Item]:
        out, used = [], 0
        for i in ranking:
            if len(out) >= 10 and used >= limit:
                break
            t = self.turns[i]
            out.append(Item(t.dated, frozenset({t.id}), self.tokens[i], "turn"))
            used += self.tokens[i]
        return out

    def best_sentence_items(self, ranking: Sequence[int], question: str, limit: int) -> list[Item]:
        out, used = [], 0
        for i in ranking:
            if len(out) >= 10 and used >= limit:
                break
            t = self.turns[i]
            text = f"[{t.date:%-d %B %Y}] {t.speaker}: " + best_sentence(
                t.text, question, SENTENCE_CAP, self.count
            )
            n = self.count(text)
            out.append(Item(text, frozenset({t.id}), n, "turn sentence"))
            used += n
        return out
