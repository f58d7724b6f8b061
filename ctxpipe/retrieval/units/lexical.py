"""Text helpers of the read path: query terms, the full-text query, and the units of a chunk
with the message ids each one cites.

Citations. Session archives store L2 as ``[msgid] role (name): text`` lines and memories cite
their turns per line (``… [D1:3, D2:4]``). A unit (a line) cites the ids in its markers that the
chunk's `source_refs` also hold. A unit without markers cites the chunk's refs when the chunk is
derived from those turns (a memory's L0 line); a summary of a session (an archive's L0/L1)
contains no turn and cites none.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from ctxpipe.core.text import STOPWORDS, split_sentences, stem, words

# "[D1:3]" / "[m-1, m-2]" / "[D1:13, D2:16]" — message ids inside square brackets
_MARKER_RE = re.compile(r"\[([A-Za-z0-9][\w.@:-]*(?:\s*,\s*[A-Za-z0-9][\w.@:-]*)*)\]")
# an archive line: "[msgid] role (name): text"
_LINE_RE = re.compile(
    r"^\[([^\]]+)\]\s+(user|assistant|system|tool)(?:\s+\(([^)]*)\))?"
    r"(?:\s+on\s+(\d{1,2} [A-Z][a-z]+ \d{4}))?:\s*(.*)$"
)

_BULLET_START = frozenset("-*\u20220123456789")
_BULLET_RE = re.compile(r"^(?:[-*\u2022]|\d+[.)])\s+")
_SPACE_PUNCT_RE = re.compile(r"\s+([.,;:!?])")
_SPACES_RE = re.compile(r"\s{2,}")


def query_terms(query: str, limit: int = 12) -> list[str]:
    """Distinct content words of the query, in order (stopwords and 1-letter words dropped)."""
    out: list[str] = []
    for w in words(query):
        if len(w) < 2 or w in STOPWORDS or w in out:
            continue
        out.append(w)
        if len(out) >= limit:
            break
    return out


_QUERY_WORD_RE = re.compile(r"[A-Za-z0-9]+(?:['’][A-Za-z]{0,2})?")  # "Ann's" is one word


def without_words(text: str, drop: Iterable[str]) -> str:
    """`text` without the words whose lexeme (`words`) is in `drop` ("Ann's" with "ann"),
    spaces collapsed."""
    gone = set(drop)

    def keep(m: re.Match[str]) -> str:
        lexemes = words(m.group(0))
        return "" if lexemes and lexemes[0] in gone else m.group(0)

    return " ".join(_QUERY_WORD_RE.sub(keep, text).split())


def tsquery_or(terms: Sequence[str]) -> str:
    """``a | b | c`` for ``to_tsquery('english', …)`` (terms are [a-z0-9]+ only)."""
    safe = [t for t in terms if re.fullmatch(r"[a-z0-9]+", t)]
    return " | ".join(safe)


def bm25_idf(df: int, n: int) -> float:
    return math.log(1.0 + (max(n, df) - df + 0.5) / (df + 0.5))


@dataclass(slots=True)
class Unit:
    """One line (or sentence) of a chunk, as returned to the caller.

    `prefix` is the speaker of an archive line (``"Ann: "``), repeated on its sentences;
    `role`, `speaker` and `spoken_on` (``"8 May 2023"``) are what the line's header says."""

    text: str
    refs: list[str] = field(default_factory=list)
    index: int = 0
    prefix: str = ""
    role: str = ""
    speaker: str = ""
    spoken_on: str = ""

    @property
    def body(self) -> str:
        return self.text[len(self.prefix) :] if self.prefix else self.text

    def sentences(self) -> list[Unit]:
        """The unit split into sentences (each keeps the prefix and the refs)."""
        parts = split_sentences(self.body)
        if len(parts) <= 1:
            return [self]
        return [
            Unit(
                self.prefix + p,
                list(self.refs),
                self.index,
                self.prefix,
                self.role,
                self.speaker,
                self.spoken_on,
            )
            for p in parts
        ]

    def sentence_ranges(self) -> list[tuple[str, list[tuple[int, int]]]] | None:
        """Each sentence's text with the character ranges of this unit's text it is made of
        (the prefix, then its part of the body): none when the unit is one sentence, None when
        a sentence cannot be placed in it."""
        parts = split_sentences(self.body)
        if len(parts) <= 1:
            return []
        head = [(0, len(self.prefix))] if self.prefix else []
        out: list[tuple[str, list[tuple[int, int]]]] = []
        cursor = len(self.prefix)
        for p in parts:
            at = self.text.find(p, cursor)
            if at < 0:
                return None
            cursor = at + len(p)
            out.append((self.prefix + p, [*head, (at, cursor)]))
        return out


def bm25_tokens(text: str) -> list[str]:
    """Stemmed content words (the lexical view of a unit or a query)."""
    return list(_bm25_tokens(text))


@lru_cache(maxsize=20_000)
def _bm25_tokens(text: str) -> tuple[str, ...]:
    """Cached: the units of the candidate chunks recur across queries."""
    return tuple(stem(w) for w in words(text) if len(w) > 1 and w not in STOPWORDS)


def _qualify(ids: Iterable[str], chunk_refs: Sequence[str]) -> list[str]:
    """Map bare marker ids to the chunk's qualified refs (``session:msgid``)."""
    out: list[str] = []
    for mid in ids:
        mid = mid.strip()
        matches = [r for r in chunk_refs if r == mid or r.endswith(":" + mid)]
        for r in matches:
            if r not in out:
                out.append(r)
    return out


def _markers(ln: str, chunk_refs: Sequence[str]) -> tuple[list[str], str]:
    """The refs a memory line's markers name, and the line without them (nor a list bullet,
    a space before punctuation or a run of spaces)."""
    refs: list[str] = []
    clean = ln
    if "[" in ln:
        marker_ids: list[str] = []
        for mm in _MARKER_RE.finditer(ln):
            marker_ids.extend(mm.group(1).split(","))
        refs = _qualify(marker_ids, chunk_refs)
        clean = _MARKER_RE.sub("", ln).strip()
    if clean[:1] in _BULLET_START:
        clean = _BULLET_RE.sub("", clean)
    clean = _SPACE_PUNCT_RE.sub(r"\1", clean)
    if "  " in clean:
        clean = _SPACES_RE.sub(" ", clean)
    return refs, clean


def _render_line(m: re.Match[str]) -> tuple[str, str]:
    role, name, when, text = m.group(2), m.group(3), m.group(4), m.group(5)
    who = name.strip() if name and name.strip() else role
    return (f"{who} ({when}): " if when else f"{who}: "), text.strip()


def split_units(text: str, chunk_refs: Sequence[str], *, derived: bool) -> list[Unit]:
    """The lines of a chunk with what each cites.

    `derived`: a line without markers cites every ref of the chunk (a memory derived from
    those turns); otherwise (a session archive) it cites none."""
    units: list[Unit] = []
    for ln in (ln.strip() for ln in text.splitlines()):
        if not ln:
            continue
        m = _LINE_RE.match(ln) if ln.startswith("[") else None
        if m:
            refs = _qualify(m.group(1).split(","), chunk_refs)
            prefix, body = _render_line(m)
            name = (m.group(3) or "").strip()
            units.append(
                Unit(
                    prefix + body,
                    refs,
                    prefix=prefix,
                    role=m.group(2),
                    speaker=name or m.group(2),
                    spoken_on=m.group(4) or "",
                )
            )
            continue
        refs, clean = _markers(ln, chunk_refs)
        if not refs and derived:
            refs = list(chunk_refs)
        if clean:
            units.append(Unit(clean, refs))
    for i, u in enumerate(units):
        u.index = i
    return units


def chunk_lines(text: str, chunk_refs: Sequence[str], context_type: str | None) -> list[Unit]:
    """The lines of a chunk that find ranks. A line that cites nothing inside a chunk that
    cites turns (an archive's summary) is left out: it cannot be traced to a turn."""
    refs = [str(x) for x in chunk_refs]
    derived = (context_type or "memory") != "session"
    return [u for u in split_units(text, refs, derived=derived) if not refs or u.refs]


def unit_texts(text: str, chunk_refs: Sequence[str], context_type: str | None) -> list[str]:
    """The distinct texts of the lines and sentences of a chunk that find ranks (what the
    index embeds next to the chunk)."""
    out: dict[str, None] = {}
    for line in chunk_lines(text, chunk_refs, context_type):
        out[line.text] = None
        for s in line.sentences():
            out[s.text] = None
    return list(out)


@lru_cache(maxsize=1 << 16)
def unit_key(text: str) -> str:
    """The key of a unit's stored vector: 128-bit BLAKE2b of its text, hex. Cached: `find`
    looks up the same units' vectors query after query."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


def lexical_score(unit_text: str, weights: dict[str, float]) -> float:
    """Sum of the weights of query terms (stemmed) that occur in the unit."""
    if not weights:
        return 0.0
    present = {stem(w) for w in words(unit_text)}
    return sum(wt for term, wt in weights.items() if stem(term) in present)


__all__ = [
    "STOPWORDS",
    "Unit",
    "bm25_idf",
    "bm25_tokens",
    "chunk_lines",
    "lexical_score",
    "query_terms",
    "split_units",
    "stem",
    "tsquery_or",
    "unit_key",
    "unit_texts",
    "words",
]
