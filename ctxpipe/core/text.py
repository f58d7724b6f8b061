"""The text primitives of the write path (the rules provider, the candidate pipeline) and the
read path (find's lexical ranking, query terms) — one module, on kept libraries:

- **stemming**: the Snowball English stemmer (`snowballstemmer`, which runs on its C build,
  PyStemmer, when that is installed — a dependency of the server: the same stems, ~30 times
  faster on a word not seen before), the one PostgreSQL's `english` text search configuration
  uses, so the IDFs computed in Python key on the same lexemes as the `tsvector` column;
- **one stopword list** (English function words plus chat filler);
- **sentences**: a line is cut after a sentence end (``.``, ``!``, ``?``) followed by a space
  and a word that does not start in lower case, where the full stop ends no abbreviation, initial
  or dotted word; a piece of text where any of that is in doubt ("Dr. Smith", "p.m. on",
  "wait... then") goes to `pysbd` (rule-based, ~100 times slower), run on bounded pieces of each
  line so that its cost stays linear in the text. Both are cached by text across nodes;
- **near-duplicates**: `rapidfuzz` token-set similarity;
- **tokens**: `tokenize` (Unicode-aware, CJK runs as bigrams: overlap measures beyond English)
  and `words` (the ASCII letter/digit runs PostgreSQL's parser turns into lexemes).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from functools import lru_cache

import pysbd
import snowballstemmer
from rapidfuzz import fuzz

from ctxpipe.core.caches import LockedCache

STOPWORDS = frozenset(
    """a about above after again against all also am an and any are aren't as at be because been
    before being below between both but by can can't cannot could couldn't d did didn't do does
    doesn't doing don't down during each either else etc even ever every few for from further get
    gets got had hadn't has hasn't have haven't having he he'd he'll he's her here here's hers
    herself him himself his how how's however i i'd i'll i'm i've if in into is isn't it it's its
    itself just let let's ll lot lots m may me might mine more most much must mustn't my myself no
    nor not of off ok okay on once one only or other ought our ours ourselves out over own per
    quite rather re really s same shall shan't she she'd she'll she's should shouldn't so some
    such t than that that's the their theirs them themselves then there there's these they
    they'd they'll they're they've this those though through thus to too under until up upon us
    ve very via was wasn't we we'd we'll we're we've were weren't what what's when when's where
    where's whether which while who who's whom why why's will with within without won't would
    wouldn't yes yet you you'd you'll you're you've your yours yourself yourselves hi hello hey
    thanks thank please sure yeah yep nope oh well anyway maybe kind sort bit thing things stuff
    something anything everything nothing someone anyone everyone way ways actually basically
    probably still already like right now today yesterday tomorrow""".split()
)

_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
_TOKEN_RE = re.compile(rf"[{_CJK}]+|[^\W_](?:[\w'’+#.\-/]*[\w+#])?", re.UNICODE)
_CJK_RE = re.compile(rf"^[{_CJK}]+$")
_WORD_RE = re.compile(r"[A-Za-z0-9]+")
_SPACE_RE = re.compile(r"\s+")
# a cheap cut of a long line into pieces ending at a likely sentence end (pysbd runs per piece)
_ROUGH_END_RE = re.compile(r"(?<=[.!?。！？])[\"'”’)\]]*\s+")
_INNER_END_RE = re.compile(r"[.!?。！？]")
# a sentence end: the marks, closing quotes or brackets, the space, and the next character
_END_RE = re.compile(r"([.!?。！？]+)([\"'”’)\]]*)(\s+)(?=(\S))")
# words a full stop can end without ending the sentence (titles, Latin, months, units)
_ABBREVIATIONS = frozenset(
    """mr mrs ms dr prof sr jr st vs etc al approx dept est inc ltd co corp no nos vol fig
    jan feb mar apr jun jul aug sep sept oct nov dec mt ft ave blvd rd gen col lt sgt capt
    rev hon pres gov sen rep""".split()
)

MAX_SENTENCE_CHARS = 600  # no sentence is longer: a wall of text is cut at whitespace
_PIECE_CHARS = 1500  # pysbd's cost grows faster than linearly: it sees at most this much

_STEMMER = snowballstemmer.stemmer("english")
_STEM_LOCK = threading.Lock()  # a Snowball stemmer object keeps state between calls
_LOCAL = threading.local()  # a pysbd Segmenter keeps the text it segments: one per thread


def _segmenter() -> pysbd.Segmenter:
    seg = getattr(_LOCAL, "segmenter", None)
    if seg is None:
        seg = _LOCAL.segmenter = pysbd.Segmenter(language="en", clean=False)
    return seg


def normalize_space(text: str) -> str:
    return _SPACE_RE.sub(" ", text).strip()


# ------------------------------------------------------------------ tokens and stems
def tokenize(text: str) -> list[str]:
    """Lower-cased tokens; CJK runs become character bigrams."""
    out: list[str] = []
    for w in _TOKEN_RE.findall(text):
        if _CJK_RE.match(w):
            out.extend(w[i : i + 2] for i in range(max(1, len(w) - 1)))
        else:
            out.append(w.lower().replace("’", "'"))
    return out


def cased_tokens(text: str) -> list[str]:
    """The tokens of `tokenize` keeping their case (names are capitalised)."""
    return _TOKEN_RE.findall(text)


def words(text: str) -> list[str]:
    """Lower-cased ASCII letter/digit runs: the words PostgreSQL's parser makes lexemes of."""
    return [w.lower() for w in _WORD_RE.findall(text)]


@lru_cache(maxsize=1 << 16)
def stem(token: str) -> str:
    """The Snowball English stem of a token (possessive dropped; tokens that are not all
    letters are returned lower-cased as they are). Cached: the same words recur."""
    t = token.lower().replace("’", "'")
    if t.endswith("'s"):
        t = t[:-2]
    if not t.isalpha() or not t.isascii():
        return t
    with _STEM_LOCK:
        return str(_STEMMER.stemWord(t))


def content_tokens(text: str) -> list[str]:
    """Stemmed tokens minus stopwords and punctuation-only tokens."""
    return [stem(t) for t in tokenize(text) if t not in STOPWORDS and any(c.isalnum() for c in t)]


def token_set(text: str) -> set[str]:
    return set(content_tokens(text))


def jaccard(a: AbstractSet[str], b: AbstractSet[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def containment(a: AbstractSet[str], b: AbstractSet[str]) -> float:
    """Fraction of `a` that is also in `b` (1.0 when `a` adds nothing to `b`)."""
    if not a:
        return 1.0
    return len(a & b) / len(a)


def similarity(a: str, b: str) -> float:
    """Near-duplicate similarity of two texts in [0, 1]: rapidfuzz's token-sort ratio of the
    lower-cased texts — word order does not count, added or changed words do (a restatement
    scores near 1, the same sentence with new information well below)."""
    if not a.strip() or not b.strip():
        return 0.0
    return float(fuzz.token_sort_ratio(a.lower(), b.lower())) / 100.0


# ------------------------------------------------------------------ sentences
def cut_long(sentence: str, limit: int = MAX_SENTENCE_CHARS) -> list[str]:
    """`sentence` in pieces of at most `limit` characters, cut at whitespace when there is
    some in the second half of a piece (else hard)."""
    if len(sentence) <= limit:
        return [sentence]
    out: list[str] = []
    start = 0
    while start < len(sentence):
        end = min(start + limit, len(sentence))
        if end < len(sentence):
            space = sentence.rfind(" ", start + limit // 2, end)
            end = space if space > start else end
        piece = sentence[start:end].strip()
        if piece and any(ch.isalnum() for ch in piece):
            out.append(piece)
        start = end
    return out


def _pieces(line: str) -> Iterable[str]:
    """`line` in pieces of at most about `_PIECE_CHARS`, cut after a likely sentence end."""
    if len(line) <= _PIECE_CHARS:
        yield line
        return
    start = 0
    for m in _ROUGH_END_RE.finditer(line):
        if m.end() - start >= _PIECE_CHARS:
            yield line[start : m.end()]
            start = m.end()
    if start < len(line):
        yield from cut_long(line[start:], _PIECE_CHARS)


# pysbd costs ~1-2 ms a piece, and one turn is split by the archive builder, each extractor, the
# indexer and find: the sentences of the pieces it splits are kept, bounded by their characters.
_SEGMENTS: LockedCache[tuple[str, ...]] = LockedCache.lru(
    4_000_000, getsizeof=lambda v: sum(len(s) for s in v) or 1
)


def plain_sentences(piece: str) -> tuple[str, ...] | None:
    """The sentences of `piece` when every sentence end in it is plain (see the module doc),
    else None (a case for pysbd)."""
    out: list[str] = []
    start = 0
    for m in _END_RE.finditer(piece):
        marks, following = m.group(1), m.group(4)
        if following.islower():
            return None  # "wait... then", "Hi! how": a lower-case word may go on the sentence
        if marks[0] == ".":
            if len(marks) > 1:
                return None  # an ellipsis
            before = piece[start : m.start()].rsplit(None, 1)
            word = before[-1].lstrip("\"'“‘([").lower() if before else ""
            if len(word) <= 1 or "." in word or word in _ABBREVIATIONS:
                return None  # an initial, "e.g.", "U.S.", "Dr."
        out.append(piece[start : m.end(2)].strip())
        start = m.end()
    out.append(piece[start:].strip())
    return tuple(s for s in out if s)


def _segment(piece: str) -> tuple[str, ...]:
    if not _INNER_END_RE.search(piece.rstrip()[:-1]):
        return (piece,)  # no sentence end inside it: one sentence, nothing to find
    plain = plain_sentences(piece)  # microseconds: not worth a cache entry
    if plain is not None:
        return plain
    cached = _SEGMENTS.get(piece)
    if cached is None:
        cached = tuple(s.strip() for s in _segmenter().segment(piece) if s.strip())
        _SEGMENTS.put(piece, cached)
    return cached


def clear_sentence_cache() -> None:
    """Forget the sentences found so far (benchmarks measure a cold start)."""
    _SEGMENTS.clear()


def split_sentences(text: str) -> list[str]:
    """The sentences of `text`: every line is a hard break, pysbd finds the boundaries inside
    a line, none is longer than `MAX_SENTENCE_CHARS`, none is only punctuation."""
    out: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        for piece in _pieces(line):
            for sentence in _segment(piece):
                if any(ch.isalnum() for ch in sentence):
                    out.extend(cut_long(sentence))
    return out


__all__ = [
    "MAX_SENTENCE_CHARS",
    "STOPWORDS",
    "cased_tokens",
    "clear_sentence_cache",
    "containment",
    "content_tokens",
    "cut_long",
    "jaccard",
    "normalize_space",
    "plain_sentences",
    "similarity",
    "split_sentences",
    "stem",
    "token_set",
    "tokenize",
    "words",
]
