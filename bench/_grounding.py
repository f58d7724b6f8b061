"""Honest credit for retrieval benchmarks: grounded evidence and answer-in-context.

The metrics are deliberately independent of ctxpipe's own text helpers (their own word
normalisation: lowercase words, a short list of function words, the Snowball English stemmer) so
that a change of the system's tokenizer can never move the ruler.

- **Grounded credit.** A returned item is credited with an evidence turn only if it cites that
  turn *and* its returned text carries the turn: more than half of the turn's distinct content
  words, or every content word of one whole sentence of the turn that has at least
  `MIN_SENTENCE_WORDS` of them. Citing a turn is not enough: a memory line that cites 100 turns
  is credited only with the turns whose content it really returns.
- **Answer in context at B tokens.** The returned texts, concatenated in rank order and cut at B
  tokens (the last text cut at a word), contain the gold answer: more than half of the answer's
  distinct content words (an answer without content words — "no", "2" — must appear as a whole
  word sequence).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import pysbd
import snowballstemmer

# Function words only: months, numbers, names and every noun/verb/adjective stay content.
FUNCTION_WORDS = frozenset(
    """a an the and or but if then than so as of at by for from in into on onto to with without
    about over under up down out off is am are was were be been being do does did done have has
    had having i me my mine we us our ours you your yours he him his she her hers it its they them
    their theirs this that these those there here what which who whom whose when where why how
    not no nor too very can could should would will shall just also oh hey hi yeah yes ok okay
    s t d ll m re ve""".split()
)
MIN_SENTENCE_WORDS = 3
_WORD_RE = re.compile(r"[A-Za-z0-9]+")
_STEMMER = snowballstemmer.stemmer("english")
_SEGMENTER = pysbd.Segmenter(language="en", clean=False)


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    return str(_STEMMER.stemWord(word))


def normal_words(text: str) -> list[str]:
    """Lowercased, stemmed words of `text`, in order (function words included)."""
    return [_stem(w.lower()) for w in _WORD_RE.findall(text)]


def content_words(text: str) -> set[str]:
    """Distinct stemmed content words (function words dropped)."""
    return {
        _stem(w) for w in (m.lower() for m in _WORD_RE.findall(text)) if w not in FUNCTION_WORDS
    }


def _most(needed: set[str], have: set[str]) -> bool:
    """More than half of `needed` is in `have` (all of it when it has one word)."""
    return bool(needed) and len(needed & have) * 2 > len(needed)


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SEGMENTER.segment(text) if s.strip()]


@dataclass(frozen=True)
class TurnContent:
    """What must be returned for a turn to count as found."""

    words: frozenset[str]
    sentences: tuple[frozenset[str], ...]  # content words of each long-enough sentence

    @classmethod
    def of(cls, text: str) -> TurnContent:
        whole = frozenset(content_words(text))
        parts = tuple(
            frozenset(ws)
            for ws in (content_words(s) for s in sentences(text))
            if len(ws) >= MIN_SENTENCE_WORDS
        )
        return cls(whole, parts)

    def carried_by(self, returned: set[str]) -> bool:
        if _most(set(self.words), returned):
            return True
        return any(s <= returned for s in self.sentences)


def grounded_turns(text: str, cited: Iterable[str], turns: dict[str, TurnContent]) -> set[str]:
    """The cited turn ids whose content `text` really carries (unknown ids earn nothing)."""
    returned = content_words(text)
    return {t for t in cited if t in turns and turns[t].carried_by(returned)}


def answer_words(answer: object) -> set[str]:
    return content_words(str(answer))


def contains_answer(text: str, answer: object) -> bool:
    """`text` carries the gold answer (most of its content words, or the whole answer)."""
    needed = answer_words(answer)
    if needed:
        return _most(needed, content_words(text))
    want = normal_words(str(answer))
    if not want:
        return False
    have = normal_words(text)
    n = len(want)
    return any(have[i : i + n] == want for i in range(len(have) - n + 1))


def cut_to_budget(texts: Sequence[str], budget: int, count: Callable[[str], int]) -> str:
    """The texts joined in rank order (one per line) up to `budget` tokens; the text that does
    not fit whole is cut at the last word that still fits."""
    out: list[str] = []
    used = 0
    for text in texts:
        n = count(text)
        if used + n <= budget:
            out.append(text)
            used += n
            continue
        words = text.split()
        lo, hi = 0, len(words)
        while lo < hi:  # the longest word prefix that fits
            mid = (lo + hi + 1) // 2
            if used + count(" ".join(words[:mid])) <= budget:
                lo = mid
            else:
                hi = mid - 1
        if lo:
            out.append(" ".join(words[:lo]))
        break
    return "\n".join(out)


def answer_in_context(
    texts: Sequence[str], answer: object, budget: int, count: Callable[[str], int]
) -> bool:
    return contains_answer(cut_to_budget(texts, budget, count), answer)


def best_sentence(text: str, query: str, cap: int, count: Callable[[str], int]) -> str:
    """The sentence of `text` sharing the most content words with `query` (earliest on ties),
    cut to `cap` tokens — the like-for-like unit of a sentence-returning system."""
    q = content_words(query)
    parts = sentences(text) or [text]
    best = max(parts, key=lambda s: (len(content_words(s) & q), -parts.index(s)))
    return cut_to_budget([best], cap, count)
