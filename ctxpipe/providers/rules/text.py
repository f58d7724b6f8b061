"""Text helpers of the rules provider that `ctxpipe.core.text` (tokens, Snowball stems, one
stopword list, pysbd sentences) does not have: code stripping, slugs, noun phrases by part of
speech (lemminflect), questions, chit-chat."""

from __future__ import annotations

import re
import unicodedata

from lemminflect import getAllLemmas

from ctxpipe.core.text import STOPWORDS, cased_tokens, tokenize
from ctxpipe.core.text import split_sentences as core_split_sentences

CHITCHAT = frozenset(
    """hi hello hey yo thanks thank thx ty you ok okay cool great nice good morning evening night
    afternoon bye goodbye cheers lol haha yes no yep nope sure awesome perfect got it alright all
    right sounds welcome np problem see later much very appreciate appreciated that's it's
    wonderful fantastic amazing excellent brilliant the a so ah oh hmm understood noted""".split()
)
_CODE_FENCE_RE = re.compile(r"```.*?(?:```|$)", re.DOTALL)
_INLINE_CODE_RE = re.compile(r"`([^`\n]+)`")
_QUESTION_RE = re.compile(
    r"^(who|what|when|where|why|how|which|do|does|did|can|could|should|would|is|are|will|shall)"
    r"\b[^.!]*$",
    re.IGNORECASE,
)


def strip_code(text: str) -> str:
    """The prose of `text`: code fences removed, inline code kept without its backticks."""
    return _INLINE_CODE_RE.sub(lambda m: m.group(1), _CODE_FENCE_RE.sub("\n", text))


def split_sentences(text: str) -> list[str]:
    """Sentences of `text` without its code fences (`ctxpipe.core.text.split_sentences`)."""
    return core_split_sentences(strip_code(text))


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
    """Ends with a question mark, or opens with a question word and has no '.' or '!'."""
    s = sentence.strip()
    return s.endswith(("?", "？")) or bool(_QUESTION_RE.match(s))


def is_chitchat(text: str) -> bool:
    """Nothing but greetings, thanks, acknowledgements and stopwords."""
    toks = [t for t in tokenize(text) if any(c.isalnum() for c in t)]
    return not toks or all(t in CHITCHAT or t in STOPWORDS for t in toks)
