"""A speaker's sentences about themselves, rewritten in the third person.

The mechanism is grammatical, not a list of phrasings: a sentence is about its speaker when it
has a first-person word (I, me, my, we, our …). The first-person words are replaced by the
speaker's name (or "the user"), and the verb that follows a first-person singular subject —
after any adverbs — is put in the third person with `lemminflect` ("I love" → "loves",
"I'm" → "is", "I don't" → "doesn't"); a past or modal verb is left as it is. Part-of-speech
comes from lemminflect's lexicon (the parts of speech a word can have), so no verb list is
needed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from lemminflect import getAllLemmas, getInflection

_TOKEN_RE = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)*|\S")
# the first-person words: subject forms (handled with their verb) and the others
_SUBJECT = {"i": "", "i'm": "is", "i've": "has", "i'll": "will", "i'd": "would"}
_PLURAL_SUBJECT = {"we": "", "we're": "are", "we've": "have", "we'll": "will", "we'd": "would"}
_OTHER = {
    "myself": "themself", "mine": "theirs", "us": "them", "ourselves": "themselves",
    "ours": "theirs", "our": "their",
}  # fmt: skip
# the third person of a first-person auxiliary (lemminflect gives "is"/"has"/"does" too, but
# a negative contraction has no entry)
_AUX_3RD = {"am": "is", "have": "has", "do": "does", "don't": "doesn't", "haven't": "hasn't"}
_AUXILIARIES = frozenset(
    "be have do will would can could shall should may might must".split()
)  # the closed class of English auxiliaries: a verb chain goes on after them
_NEGATIONS = frozenset({"not", "never", "no", "nor", "neither", "nobody", "nothing"})
FIRST_PERSON = frozenset(_SUBJECT) | frozenset(_PLURAL_SUBJECT) | frozenset(_OTHER) | {"my"}


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


def _adverb_before_verb(tokens: list[re.Match[str]], j: int) -> bool:
    """Is token `j` an adverb between a subject and its verb ("I still live": still)?"""
    word = tokens[j].group(0)
    if is_adverb_only(word):
        return True
    nxt = tokens[j + 1].group(0) if j + 1 < len(tokens) else ""
    return "ADV" in lemmas(word) and bool(nxt) and verb_lemma(nxt) is not None


def third_person(verb: str) -> str:
    """`verb` as it follows he/she: base forms inflected, past forms and modals kept."""
    low = verb.lower()
    if low in _AUX_3RD:
        return _AUX_3RD[low]
    pos = lemmas(low)
    if "AUX" in pos and low not in ("be", "need"):  # can, will, would, must, was …
        return verb
    lemma = verb_lemma(low)
    if lemma is None or lemma != low:  # a past form, a participle, or not a verb
        return verb
    forms = inflections(lemma, "VBZ")
    return forms[0] if forms else verb


def _normal(text: str) -> str:
    return text.replace("\u2019", "'").replace("\u2018", "'")


def has_first_person(sentence: str) -> bool:
    return any(t.lower() in FIRST_PERSON for t in _TOKEN_RE.findall(_normal(sentence)))


def first_person_subject(sentence: str) -> bool:
    """Is a first-person singular word the subject of one of its clauses?"""
    return any(t.lower() in _SUBJECT for t in _TOKEN_RE.findall(_normal(sentence)))


@dataclass(frozen=True)
class Rewritten:
    text: str
    main_verb: str  # lemma of the verb that follows the first-person subject ("" when none)
    negated: bool


def rewrite(sentence: str, name: str) -> Rewritten:
    """`sentence` in the third person about `name` (the speaker)."""
    text = _normal(sentence)
    out: list[str] = []
    pos = 0
    tokens = list(_TOKEN_RE.finditer(text))
    words = [t.group(0) for t in tokens]
    owner_named = False
    main_verb = ""
    i = 0
    while i < len(tokens):
        m = tokens[i]
        out.append(text[pos : m.start()])
        pos = m.end()
        word = m.group(0)
        low = word.lower()
        if low in _SUBJECT or low in _PLURAL_SUBJECT:
            plural = low in _PLURAL_SUBJECT
            subject = f"{name} and others" if plural else name
            if i == 0 or (out and out[-1].strip() == "" and _sentence_start(out)):
                subject = subject[0].upper() + subject[1:]
            aux = (_PLURAL_SUBJECT if plural else _SUBJECT)[low]
            out.append(subject + (f" {aux}" if aux else ""))
            owner_named = True
            if aux:
                main_verb = main_verb or _chain_verb([word.split("'")[1], *words[i + 1 :]])
                i += 1
                continue
            j = i + 1  # the verb after the subject and its adverbs
            while j < len(tokens) and _adverb_before_verb(tokens, j):
                j += 1
            verb = words[j].lower() if j < len(words) else ""
            if verb and (plural or verb in _AUX_3RD or verb.endswith("n't") or verb_lemma(verb)):
                main_verb = main_verb or _chain_verb(words[j:])
                if not plural:  # "we" keeps its verb
                    out.append(text[pos : tokens[j].start()] + third_person(words[j]))
                    pos = tokens[j].end()
                    i = j
            i += 1
            continue
        if low == "my":
            out.append("their" if owner_named else f"{name}'s")
            owner_named = True
        else:
            out.append(name if low == "me" else _OTHER.get(low, word))
        i += 1
    out.append(text[pos:])
    negated = any(t.group(0).lower() in _NEGATIONS or t.group(0).endswith("n't") for t in tokens)
    return Rewritten("".join(out).strip(), main_verb, negated)


def _chain_verb(words: list[str]) -> str:
    """The lemma of the main verb of a verb chain ("don't need" → need, "have been writing"
    → write, "'m a nurse" → be): auxiliaries, negations and adverbs lead to the next verb."""
    found = ""
    for word in words:
        low = word.lower()
        if low in ("not", "n't") or is_adverb_only(low):
            continue
        if low.endswith("n't"):
            low = {"can't": "can", "won't": "will", "shan't": "shall"}.get(low, low[:-3])
        low = {"m": "am", "ve": "have", "ll": "will", "d": "would", "re": "are"}.get(low, low)
        lemma = verb_lemma(low)
        if lemma is None:
            break
        found = lemma
        if lemma not in _AUXILIARIES:
            break
    return found


def _sentence_start(out: list[str]) -> bool:
    before = "".join(out).rstrip()
    return not before or before[-1] in '.!?:;"('
