"""Text helpers of the rules provider that `ctxpipe.core.text` (tokens, Snowball stems, one
stopword list, pysbd sentences) does not have: code stripping, slugs, noun phrases by part of
speech (lemminflect) and the key phrases of a text by tf-idf, questions, chit-chat."""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable
from itertools import groupby

from ctxpipe.core.text import STOPWORDS, cased_tokens, content_tokens, tokenize
from ctxpipe.core.text import split_sentences as core_split_sentences
from ctxpipe.providers.rules.speech import lemmas, normal, opens_question, split_words

# greetings, thanks, acknowledgements: with the stopwords, the words of chit-chat
CHITCHAT = frozenset(
    """yo thx ty cool great nice good morning evening night afternoon bye goodbye cheers lol haha
    alright sounds welcome np problem see later appreciate appreciated wonderful fantastic amazing
    excellent brilliant awesome perfect ah hmm understood noted""".split()
)
_CODE_FENCE_RE = re.compile(r"```.*?(?:```|$)", re.DOTALL)
_INLINE_CODE_RE = re.compile(r"`([^`\n]+)`")


def strip_code(text: str) -> str:
    """The prose of `text`: code fences removed, inline code kept without its backticks."""
    return _INLINE_CODE_RE.sub(lambda m: m.group(1), _CODE_FENCE_RE.sub("\n", text))


def split_sentences(text: str) -> list[str]:
    """Sentences of `text` without its code fences (`ctxpipe.core.text.split_sentences`)."""
    return core_split_sentences(strip_code(text))


def lead_in(text: str, max_words: int = 8) -> tuple[str, str]:
    """(lead-in, rest) of "<lead-in>: <rest>" with a lead-in of at most `max_words` words ("Big
    news: I moved …", "Rollout plan: first …"), else ("", text)."""
    head, colon, rest = text.partition(": ")
    short = 0 < len(head.split()) <= max_words
    return (head.strip(), rest) if colon and rest.strip() and short else ("", text)


def slugify(text: str, max_words: int = 6) -> str:
    """ASCII-ish kebab-case slug; non-Latin scripts are kept rather than dropped."""
    norm = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    parts = re.findall(r"[^\W_]+", norm.lower())
    return "-".join(parts[:max_words])[:80].strip("-") or "item"


def truncate_words(text: str, n: int) -> str:
    """The first `n` words of `text` on one line, "…" marking a cut."""
    ws = text.split()
    return " ".join(ws[:n]) + (" …" if len(ws) > n else "")


def is_breaker(word: str) -> bool:
    """Does `word` end a noun phrase? Function words, numbers (no letter) and the words the
    lexicon knows only as verbs, adverbs or adjectives do (RAKE-style phrase delimiters, by
    part of speech)."""
    lw = normal(word).lower()
    if lw in STOPWORDS or not any(c.isalpha() for c in lw):
        return True
    pos = lemmas(lw)
    return bool(pos) and "NOUN" not in pos and "PROPN" not in pos


def phrases(sentence: str, max_len: int = 4) -> list[str]:
    """Candidate noun phrases: maximal runs of non-breaker words (RAKE), original casing."""
    chunks = re.split(r"[,;:!?()\[\]{}\"“”]|\s[-–—]\s|\.(?:\s|$)", sentence)
    runs = (run for c in chunks for cut, run in groupby(cased_tokens(c), is_breaker) if not cut)
    return [p for p in (" ".join(list(run)[-max_len:]) for run in runs) if len(p) > 1]


def tf_idf(docs: list[str]) -> dict[str, float]:
    """The weight of each content token of `docs`: (1 + log tf) × log(1 + n / df)."""
    tokens = [content_tokens(doc) for doc in docs]
    tf, df = Counter(t for ts in tokens for t in ts), Counter(t for ts in tokens for t in set(ts))
    n = max(1, len(docs))
    return {w: (1 + math.log(tf[w])) * math.log(1 + n / df[w]) for w in tf}


def key_phrases(
    terms: Iterable[tuple[str, int]], weights: dict[str, float], k: int = 6
) -> list[str]:
    """The `k` best of `terms` (a phrase, how many times it counts): its count × the mean
    weight of its tokens, a longer phrase a little more. A phrase inside (or around) one
    chosen before is left out, as are chit-chat and short lower-case words."""
    counts: Counter[tuple[str, ...]] = Counter()
    surface: dict[tuple[str, ...], str] = {}
    for p, n in terms:
        toks = tuple(content_tokens(p))
        if not toks or all(t in CHITCHAT for t in toks) or len(toks) > 4:
            continue
        if len(toks) == 1 and len(toks[0]) < 4 and not re.search(r"\d|[A-Z]", p):
            continue
        counts[toks] += n
        surface.setdefault(toks, p)

    def rank(t: tuple[str, ...]) -> float:
        return counts[t] * sum(weights.get(w, 0.1) for w in t) / len(t) * (1 + 0.35 * (len(t) - 1))

    chosen: list[tuple[str, ...]] = []
    for t in sorted(counts, key=lambda t: -rank(t)):
        if not any(set(t) <= set(c) or set(c) <= set(t) for c in chosen):
            chosen.append(t)
    return [surface[t] for t in chosen[:k]]


def is_question(sentence: str) -> bool:
    """Ends with a question mark, or opens with a word a question opens with
    (`speech.opens_question`) and has no '.' or '!'."""
    s = sentence.strip()
    opener = next(iter(split_words(s)), "")
    return s.endswith(("?", "？")) or (opens_question(opener) and not re.search(r"[.!]", s))


def is_chitchat(text: str) -> bool:
    """Nothing but greetings, thanks, acknowledgements and stopwords."""
    toks = [t for t in tokenize(text) if any(c.isalnum() for c in t)]
    return not toks or all(t in CHITCHAT or t in STOPWORDS for t in toks)
