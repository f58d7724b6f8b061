"""Text helpers of the rules provider that `ctxpipe.core.text` (tokens, Snowball stems, one
stopword list, pysbd sentences) does not have: code stripping, slugs, noun phrases by part of
speech (lemminflect), questions."""

from __future__ import annotations

import re
import unicodedata

from lemminflect import getAllLemmas

from ctxpipe.core.text import STOPWORDS, cased_tokens
from ctxpipe.core.text import split_sentences as core_split_sentences

CHITCHAT = frozenset(
    """hi hello hey yo thanks thank thx ty you ok okay cool great nice good morning evening night
    afternoon bye goodbye cheers lol haha yes no yep nope sure awesome perfect got it alright all
    right sounds welcome np problem see later much very appreciate appreciated that's it's
    wonderful fantastic amazing excellent brilliant the a so ah oh hmm understood noted""".split()
)
_CODE_FENCE_RE = re.compile(r"```.*?(?:```|$)", re.DOTALL)
_INLINE_CODE_RE = re.compile(r"`([^`\n]+)`")
_BULLET_RE = re.compile(r"^\s*(?:[-*•]|\d{1,2}[.)])\s+")


def strip_code(text: str) -> tuple[str, list[str]]:
    """Split `text` into prose (code fences removed) and the list of fenced code blocks."""
    blocks = [b.strip("`").strip() for b in _CODE_FENCE_RE.findall(text)]
    prose = _CODE_FENCE_RE.sub("\n", text)
    return _INLINE_CODE_RE.sub(lambda m: m.group(1), prose), blocks


def split_sentences(text: str) -> list[str]:
    """Sentences of `text` without its code fences (`ctxpipe.core.text.split_sentences`)."""
    return core_split_sentences(strip_code(text)[0])


def strip_bullet(line: str) -> str:
    return _BULLET_RE.sub("", line).strip()


def is_bullet(line: str) -> bool:
    return bool(_BULLET_RE.match(line))


def slugify(text: str, max_words: int = 6) -> str:
    """ASCII-ish kebab-case slug; non-Latin scripts are kept rather than dropped."""
    norm = unicodedata.normalize("NFKD", text)
    norm = "".join(c for c in norm if not unicodedata.combining(c))
    parts = [p for p in re.split(r"[^\w]+", norm.lower().replace("_", " ")) if p]
    return "-".join(parts[:max_words])[:80].strip("-") or "item"


def truncate_words(text: str, n: int) -> str:
    ws = text.split()
    return text if len(ws) <= n else " ".join(ws[:n]) + " …"


def is_breaker(word: str) -> bool:
    """Does `word` end a noun phrase? Function words, numbers and the words the lexicon knows
    only as verbs, adverbs or adjectives do (RAKE-style phrase delimiters, by part of speech)."""
    lw = word.lower().replace("’", "'")
    if lw in STOPWORDS or lw.isdigit():
        return True
    pos = getAllLemmas(lw)
    return bool(pos) and "NOUN" not in pos and "PROPN" not in pos


def phrases(sentence: str, max_len: int = 4) -> list[str]:
    """Candidate noun phrases: maximal runs of non-breaker words (RAKE), original casing."""
    out: list[str] = []
    for chunk in re.split(r"[,;:!?()\[\]{}\"“”]|\s[-–—]\s|\.(?:\s|$)", sentence):
        run: list[str] = []
        for w in [*cased_tokens(chunk), "."]:
            if is_breaker(w) or w == ".":
                if run:
                    out.append(" ".join(run[-max_len:]))
                run = []
            else:
                run.append(w)
    return [p for p in out if len(p) > 1]


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
