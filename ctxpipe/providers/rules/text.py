"""Text primitives of the rules provider: phrases, slugs, hedges, questions, and — from the
one text module both paths share (`ctxpipe.core.text`: Snowball stems, one stopword list,
pysbd sentences) — tokens, stems and sentences. The lexical cues are English; tokenisation is
Unicode-aware (CJK runs become character bigrams) so overlap measures work beyond English.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from lemminflect import getAllLemmas

from ctxpipe.core.text import (
    MAX_SENTENCE_CHARS,
    STOPWORDS,
    containment,
    content_tokens,
    cut_long,
    jaccard,
    normalize_space,
    stem,
    token_set,
    tokenize,
)
from ctxpipe.core.text import cased_tokens as words
from ctxpipe.core.text import split_sentences as core_split_sentences


def is_breaker(word: str) -> bool:
    """Does `word` end a noun phrase? Function words, numbers and the words the lexicon knows
    only as verbs, adverbs or adjectives do (RAKE-style phrase delimiters, by part of speech)."""
    lw = word.lower().replace("’", "'")
    if lw in STOPWORDS or lw.isdigit():
        return True
    pos = getAllLemmas(lw)
    return bool(pos) and "NOUN" not in pos and "PROPN" not in pos


CHITCHAT = frozenset(
    """hi hello hey yo thanks thank thx ty you ok okay cool great nice good morning evening night
    afternoon bye goodbye cheers lol haha yes no yep nope sure awesome perfect got it alright all
    right sounds welcome np problem see later much very appreciate appreciated that's it's
    wonderful fantastic amazing excellent brilliant the a so ah oh hmm understood noted""".split()
)

ABBREVIATIONS = frozenset(
    "e.g i.e dr mr mrs ms prof vs etc st inc ltd co corp jr sr approx no fig al cf".split()
)

_CODE_FENCE_RE = re.compile(r"```.*?(?:```|$)", re.DOTALL)
_INLINE_CODE_RE = re.compile(r"`([^`\n]+)`")
_BULLET_RE = re.compile(r"^\s*(?:[-*•]|\d{1,2}[.)])\s+")


def strip_code(text: str) -> tuple[str, list[str]]:
    """Split `text` into prose (code fences removed) and the list of fenced code blocks."""
    blocks = [b.strip("`").strip() for b in _CODE_FENCE_RE.findall(text)]
    prose = _CODE_FENCE_RE.sub("\n", text)
    prose = _INLINE_CODE_RE.sub(lambda m: m.group(1), prose)
    return prose, blocks


# A "sentence" longer than this (no punctuation for pages, or "A. A. A. …") is cut at word
# boundaries into pieces of at most this length: every rule then works on bounded text, so the
# provider's time grows linearly with the size of a message.
def split_sentences(text: str) -> list[str]:
    """Sentences of `text` (code fences dropped; `ctxpipe.core.text.split_sentences`: lines are
    hard breaks, bullets/numbers kept, none longer than `MAX_SENTENCE_CHARS`)."""
    prose, _ = strip_code(text)
    return core_split_sentences(prose)


def strip_bullet(line: str) -> str:
    return _BULLET_RE.sub("", line).strip()


def is_bullet(line: str) -> bool:
    return bool(_BULLET_RE.match(line))


def slugify(text: str, max_words: int = 6) -> str:
    """ASCII-ish kebab-case slug; non-Latin scripts are kept rather than dropped."""
    norm = unicodedata.normalize("NFKD", text)
    norm = "".join(c for c in norm if not unicodedata.combining(c))
    parts = [p for p in re.split(r"[^\w]+", norm.lower().replace("_", " ")) if p]
    slug = "-".join(parts[:max_words])
    return slug[:80].strip("-") or "item"


def truncate_words(text: str, n: int) -> str:
    ws = text.split()
    return text if len(ws) <= n else " ".join(ws[:n]) + " …"


def phrases(sentence: str, max_len: int = 4) -> list[str]:
    """Candidate noun phrases: maximal runs of non-breaker words (RAKE), original casing."""
    out: list[str] = []
    run: list[str] = []
    # punctuation splits runs: work on punctuation-separated chunks
    for chunk in re.split(r"[,;:!?()\[\]{}\"“”]|\s[-–—]\s|\.(?:\s|$)", sentence):
        for w in words(chunk):
            lw = w.lower().replace("’", "'")
            if is_breaker(lw):
                if run:
                    out.append(" ".join(run[-max_len:]))
                run = []
            else:
                run.append(w)
        if run:
            out.append(" ".join(run[-max_len:]))
        run = []
    return [p for p in out if len(p) > 1]


def head_noun(phrase: str) -> str:
    ws = [w for w in words(phrase) if not is_breaker(w)]
    return ws[-1] if ws else phrase


def is_capitalized(word: str) -> bool:
    if word.isupper():
        return len(word) > 1
    return word[:1].isupper()


def dedupe_keep_order(items: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
        key = item.lower()
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


HEDGES = re.compile(
    r"\b(i think|i guess|i suppose|maybe|perhaps|probably|kind of|sort of|not sure|might|"
    r"i believe|possibly|somewhat|i feel like)\b",
    re.IGNORECASE,
)


def is_hedged(sentence: str) -> bool:
    return bool(HEDGES.search(sentence))


def is_question(sentence: str) -> bool:
    s = sentence.strip()
    if s.endswith(("?", "？")):
        return True
    return bool(
        re.match(
            r"^(who|what|when|where|why|how|which|do|does|did|can|could|should|would|is|are|"
            r"will|shall)\b[^.!]*$",
            s,
            re.IGNORECASE,
        )
    ) and not s.endswith((".", "!"))


__all__ = [
    "ABBREVIATIONS",
    "CHITCHAT",
    "HEDGES",
    "MAX_SENTENCE_CHARS",
    "is_breaker",
    "STOPWORDS",
    "containment",
    "content_tokens",
    "cut_long",
    "dedupe_keep_order",
    "head_noun",
    "is_bullet",
    "is_capitalized",
    "is_hedged",
    "is_question",
    "jaccard",
    "normalize_space",
    "phrases",
    "slugify",
    "split_sentences",
    "stem",
    "strip_bullet",
    "strip_code",
    "token_set",
    "tokenize",
    "truncate_words",
    "words",
]
