"""Text primitives of the rules provider: sentences, tokens, stopwords, phrases, slugs.

Pure functions over strings, no third-party NLP. Tokenisation is Unicode-aware (CJK runs become
character bigrams) so overlap measures work beyond English; the lexical cues are English.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from ctxpipe.providers.rules.grammar import IRREGULAR_PAST

STOPWORDS = frozenset(
    """a about above after again against all also am an and any are aren't as at be because been
    before being below between both but by can can't cannot could couldn't did didn't do does
    doesn't doing don't down during each either else etc even ever every few for from further get
    gets got had hadn't has hasn't have haven't having he he'd he'll he's her here here's hers
    herself him himself his how how's however i i'd i'll i'm i've if in into is isn't it it's its
    itself just let let's lot lots may me might mine more most much must mustn't my myself no nor
    not now of off ok okay on once one only or other ought our ours ourselves out over own per
    quite rather really same shan't she she'd she'll she's should shouldn't so some such than
    that that's the their theirs them themselves then there there's these they they'd they'll
    they're they've this those though through thus to too under until up upon us very via was
    wasn't we we'd we'll we're we've were weren't what what's when when's where where's whether
    which while who who's whom why why's will with within without won't would wouldn't yes yet
    you you'd you'll you're you've your yours yourself yourselves hi hello hey thanks thank please
    sure yeah yep nope oh well anyway maybe kind sort bit thing things stuff something anything
    everything nothing someone anyone everyone way ways actually basically probably still already
    like right now today yesterday tomorrow""".split()
)

# Frequent verbs / adverbs / adjectives that end a noun phrase (RAKE-style phrase delimiters).
PHRASE_BREAKERS = STOPWORDS | frozenset(
    """add added adding agree agreed allow ask asked be become began begin believe bring build
    built buy call called came change changed check checked choose chose come consider could
    create created decide decided did do does done feel felt find found fix fixed fixing gave
    get getting give go goes going gone good great had happen happened has have hear heard help
    helped hope keep kept know knew let like liked look looked looking love loved make made
    making mean meant meet met move moved need needed needs new old open prefer preferred put
    ran read run running runs said saw say says see seem seemed seems set show showed start
    started starting stop stopped suggest take taken tell think thought told took tried try
    trying turn turned understand use used uses using want wanted wants went work worked working
    works write wrote also always never usually often sometimes typically currently recently
    finally first then next last later soon again instead exactly pretty definitely perfect
    nice cool awesome fine glad happy sorry hard easy better best worse worst big small little
    many several few enough able sure true false certain main same different quick quickly
    slow slowly book booked keep keeps keeping fail fails failing failed crash crashes
    crashed crashing getting stays stay seems sounds sound two three four five six seven
    eight nine ten minutes hours days weeks months years minute hour day week month year
    morning evening night monday tuesday wednesday thursday friday saturday sunday january
    february march april june july august september october november december near across
    along behind beside inside outside toward towards around among despite onto beyond supports
    support offers offer includes include provides provide requires require allows allow
    contains contain takes take gives give rejects reject rejecting validates validate hit hits
    picks pick updates update stand""".split()
)

CHITCHAT = frozenset(
    """hi hello hey yo thanks thank thx ty you ok okay cool great nice good morning evening night
    afternoon bye goodbye cheers lol haha yes no yep nope sure awesome perfect got it alright all
    right sounds welcome np problem see later much very appreciate appreciated that's it's
    wonderful fantastic amazing excellent brilliant the a so ah oh hmm understood noted""".split()
)

ABBREVIATIONS = frozenset(
    "e.g i.e dr mr mrs ms prof vs etc st inc ltd co corp jr sr approx no fig al cf".split()
)

_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
_WORD_RE = re.compile(rf"[{_CJK}]+|[^\W_](?:[\w'’+#.\-/]*[\w+#])?", re.UNICODE)
_CJK_RE = re.compile(rf"^[{_CJK}]+$")
_CODE_FENCE_RE = re.compile(r"```.*?(?:```|$)", re.DOTALL)
_INLINE_CODE_RE = re.compile(r"`([^`\n]+)`")
_SENT_END_RE = re.compile(r"(?<=[.!?。！？])[\"'”’)\]]*\s+|(?<=[。！？])")
_BULLET_RE = re.compile(r"^\s*(?:[-*•]|\d{1,2}[.)])\s+")


def normalize_space(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def strip_code(text: str) -> tuple[str, list[str]]:
    """Split `text` into prose (code fences removed) and the list of fenced code blocks."""
    blocks = [b.strip("`").strip() for b in _CODE_FENCE_RE.findall(text)]
    prose = _CODE_FENCE_RE.sub("\n", text)
    prose = _INLINE_CODE_RE.sub(lambda m: m.group(1), prose)
    return prose, blocks


# A "sentence" longer than this (no punctuation for pages, or "A. A. A. …") is cut at word
# boundaries into pieces of at most this length: every rule then works on bounded text, so the
# provider's time grows linearly with the size of a message.
MAX_SENTENCE_CHARS = 600


def split_sentences(text: str) -> list[str]:
    """Sentences of `text` (code fences dropped). Lines are hard breaks; bullets/numbers kept;
    none longer than `MAX_SENTENCE_CHARS`."""
    prose, _ = strip_code(text)
    out: list[str] = []
    for line in prose.splitlines():
        line = line.strip()
        if not line:
            continue
        pieces = [p for p in _SENT_END_RE.split(line) if p and p.strip()]
        merged: list[list[str]] = []
        size = 0
        for piece in pieces:
            piece = piece.strip()
            joins = merged and size + len(piece) < MAX_SENTENCE_CHARS
            if joins and (
                _ends_with_abbreviation(merged[-1][-1])
                or (piece[:1].islower() and not _is_cjk(piece[:1]))
            ):
                merged[-1].append(piece)
                size += len(piece) + 1
            else:
                merged.append([piece])
                size = len(piece)
        for parts in merged:
            sentence = " ".join(parts)
            if any(ch.isalnum() for ch in sentence):
                out.extend(cut_long(sentence))
    return out


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


def _ends_with_abbreviation(sentence: str) -> bool:
    last = sentence.rstrip().split(" ")[-1].rstrip(".").lower()
    return last in ABBREVIATIONS or bool(re.fullmatch(r"[a-z]", last))


def _is_cjk(ch: str) -> bool:
    return bool(_CJK_RE.match(ch))


def strip_bullet(line: str) -> str:
    return _BULLET_RE.sub("", line).strip()


def is_bullet(line: str) -> bool:
    return bool(_BULLET_RE.match(line))


def words(text: str) -> list[str]:
    """Word tokens keeping their case (CJK runs kept whole)."""
    return _WORD_RE.findall(text)


def tokenize(text: str) -> list[str]:
    """Lower-cased tokens; CJK runs become character bigrams (cheap language-agnosticism)."""
    out: list[str] = []
    for w in _WORD_RE.findall(text):
        if _CJK_RE.match(w):
            out.extend(w[i : i + 2] for i in range(max(1, len(w) - 1)))
        else:
            out.append(w.lower().replace("’", "'"))
    return out


def stem(token: str) -> str:
    """A very light English stemmer, good enough for overlap measures."""
    t = token.lower()
    if t.endswith("'s"):
        t = t[:-2]
    if len(t) <= 3 or not t.isalpha():
        return t
    for suffix, repl, min_len in (
        ("ies", "y", 5),
        ("sses", "ss", 5),
        ("ing", "", 6),
        ("ed", "", 5),
        ("es", "", 5),
        ("s", "", 4),
    ):
        if t.endswith(suffix) and len(t) >= min_len and not t.endswith("ss"):
            t = t[: len(t) - len(suffix)] + repl
            break
    return t


def content_tokens(text: str) -> list[str]:
    """Stemmed tokens minus stopwords and punctuation-only tokens."""
    return [stem(t) for t in tokenize(text) if t not in STOPWORDS and any(c.isalnum() for c in t)]


def token_set(text: str) -> set[str]:
    return set(content_tokens(text))


def jaccard(a: set[str], b: set[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def containment(a: set[str], b: set[str]) -> float:
    """Fraction of `a` that is also in `b` (1.0 when `a` adds nothing to `b`)."""
    if not a:
        return 1.0
    return len(a & b) / len(a)


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
            breaker = (
                lw in PHRASE_BREAKERS
                or lw in IRREGULAR_PAST
                or (lw.endswith(("ly", "ed")) and len(lw) > 4 and lw.isalpha() and w.islower())
                or lw.isdigit()
            )
            if breaker:
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
    ws = [w for w in words(phrase) if w.lower() not in PHRASE_BREAKERS]
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
