"""A speaker's sentences about themselves in the third person, and the grammar of verbs.

A sentence is about its speaker when it has a first-person word (I, me, my, we, our …): these
become the speaker's name (or "the user"), and the verb after a first-person singular subject
— past its adverbs — the third-person form ("I love" → "loves", "I'm" → "is", "I don't" →
"doesn't"). Parts of speech and verb forms come from `lemminflect`'s lexicon, so no verb list
is needed: a present form becomes the third-person form, a past form tells the past tense,
and a modal (can, will, must …), which has no present forms of its own, is kept.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from functools import lru_cache

from lemminflect import getAllLemmas, getInflection

WORD_RE = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)*")
_TOKEN_RE = re.compile(rf"{WORD_RE.pattern}|\S")
# the first-person words other than the subjects "I" and "we" (and "my": see `rewrite`)
_OTHER = {
    "myself": "themself", "mine": "theirs", "us": "them", "ourselves": "themselves",
    "ours": "theirs", "our": "their",
}  # fmt: skip
FIRST_PERSON = frozenset({"i", "we", "me", "my", *_OTHER})
# the verbs a clitic stands for ("I'm", "we've", "I'd")
CLITICS = {"m": "am", "re": "are", "ve": "have", "ll": "will", "d": "would"}
# the negative contractions whose stem is no word of its own
_NEGATIVE = {"can't": "can", "won't": "will", "shan't": "shall"}
_AUXILIARIES = frozenset("be have do will can shall may must".split())  # lemmas: a chain goes on
_NEGATION_RE = re.compile(r"\b(?:not|never|no longer|no more)\b|n't\b")
WH_WORDS = frozenset("who whom whose what when where why how which".split())


def normal(text: str) -> str:
    """`text` with typographic apostrophes made plain (the lexicon knows "don't", not "don’t")."""
    return text.replace("\u2019", "'").replace("\u2018", "'")


def split_words(text: str) -> list[str]:
    return WORD_RE.findall(normal(text))


@lru_cache(maxsize=65536)
def lemmas(word: str) -> dict[str, tuple[str, ...]]:
    """The lemmas of `word` by universal part of speech ({} for an unknown word)."""
    return dict(getAllLemmas(word.lower()))


@lru_cache(maxsize=65536)
def inflections(lemma: str, tag: str) -> tuple[str, ...]:
    """lemminflect's forms of `lemma` for a Penn tag (cached: each call deep-copies its
    tables)."""
    return tuple(getInflection(lemma, tag=tag) or ())


def is_adverb_only(word: str) -> bool:
    pos = lemmas(word)
    return "ADV" in pos and "VERB" not in pos and "AUX" not in pos


def verb_lemma(word: str) -> str | None:
    pos = lemmas(word)
    found = pos.get("VERB") or pos.get("AUX")
    return found[0] if found else None


def opens_question(word: str) -> bool:
    """Can a question open with `word`: a wh-word ("what's" too) or an auxiliary (do, is, can,
    would …: the words lemminflect knows as AUX)?"""
    low = normal(word).lower().split("'")[0]
    return low in WH_WORDS or "AUX" in lemmas(low)


def is_negated(text: str) -> bool:
    return bool(_NEGATION_RE.search(normal(text).lower()))


def _positive(word: str) -> str:
    """A negative contraction's verb ("don't" → do, "can't" → can); other words as they are."""
    low = word.lower()
    return _NEGATIVE.get(low) or low.removesuffix("n't")


def third_person(verb: str) -> str:
    """`verb` as it follows he/she: a present form becomes the third-person one ("am" → is,
    "don't" → doesn't); past forms and modals (no present forms) are kept."""
    base = _positive(verb)
    lemma = verb_lemma(base)
    forms = inflections(lemma, "VBZ") if lemma and base in inflections(lemma, "VBP") else ()
    return forms[0] + verb.lower()[len(base) :] if forms else verb


def is_past(verb: str) -> bool:
    """Is `verb` a past form of its verb ("had", "moved", "didn't", "could")?"""
    base = _positive(verb)
    lemma = verb_lemma(base)
    return (
        lemma is not None and base in inflections(lemma, "VBD") and bool(inflections(lemma, "VBP"))
    )


def chain_verb(chain: Sequence[str]) -> str:
    """The lemma of the main verb of a verb chain ("don't need" → need, "have been writing"
    → write, "am a nurse" → be): auxiliaries, negations and adverbs lead to the next verb."""
    found = ""
    for word in chain:
        low = word.lower()
        if low in ("not", "no") or is_adverb_only(low):
            continue
        lemma = verb_lemma(_positive(low))
        if lemma is None:
            break
        found = lemma
        if lemma not in _AUXILIARIES:
            break
    return found


def has_first_person(sentence: str, person: AbstractSet[str] = FIRST_PERSON) -> bool:
    """Has `sentence` a first-person word (of `person`: {"i"} asks for a singular subject)?"""
    return any(w.lower().split("'")[0] in person for w in split_words(sentence))


@dataclass(frozen=True)
class Rewritten:
    text: str
    main_verb: str  # lemma of the verb that follows the first-person subject ("" when none)
    negated: bool
    past: bool  # the verb after the first subject (else the first inflected verb) is past


def rewrite(sentence: str, name: str) -> Rewritten:
    """`sentence` in the third person about `name` (the speaker), capitalised. A subject "I"
    becomes the name and its verb — past its adverbs ("I still live") — or its clitic ("I'm")
    the third-person form; "we" becomes "<name> and others" and keeps its verb; "my" is
    "<name>'s" the first time the speaker is named in it, "their" after."""
    text = normal(sentence)
    toks = _TOKEN_RE.findall(text)
    out = list(toks)
    owner_named = False
    chain: list[str] = []  # the verb chain of the first subject
    for i, tok in enumerate(toks):
        head, _, clitic = tok.lower().partition("'")
        if head in ("i", "we") and (not clitic or clitic in CLITICS):
            subject = f"{name} and others" if head == "we" else name
            if i == 0 or out[i - 1] in '.!?:;"(':
                subject = subject[:1].upper() + subject[1:]
            owner_named, out[i] = True, subject
            if clitic:
                verb = CLITICS[clitic]
                out[i] += " " + (verb if head == "we" else third_person(verb))
                chain = chain or [verb, *toks[i + 1 :]]
                continue
            j = i + 1  # the verb after the subject and its adverbs
            while (
                j + 1 < len(toks)
                and "ADV" in lemmas(toks[j])
                and (is_adverb_only(toks[j]) or verb_lemma(toks[j + 1]))
            ):
                j += 1
            if j < len(toks) and verb_lemma(_positive(toks[j])):
                chain = chain or toks[j:]
                out[j] = toks[j] if head == "we" else third_person(toks[j])
        elif tok.lower() == "my":
            out[i] = "their" if owner_named else f"{name}'s"
            owner_named = True
        elif tok.lower() == "me" or tok.lower() in _OTHER:
            out[i] = _OTHER.get(tok.lower(), name)
    rewritten = iter(out)
    said = _TOKEN_RE.sub(lambda _: next(rewritten), text).strip()  # the gaps kept
    finite = chain[:1] or [w for w in toks if verb_lemma(w) not in (None, w.lower())][:1]
    past = bool(finite) and is_past(finite[0])
    return Rewritten(said[:1].upper() + said[1:], chain_verb(chain), is_negated(text), past)
