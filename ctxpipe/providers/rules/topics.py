"""What a statement is about: its main verb and subject, its topic words, the single-valued
attribute it sets (`SLOTS`, found by `slots_of`; everything else accumulates), and whether it
says it changes something. Two statements share a topic when they share `topic_words`.
"""

from __future__ import annotations

import re
from functools import lru_cache

from ctxpipe.core.dates import strip_dates
from ctxpipe.core.text import STOPWORDS, stem
from ctxpipe.providers.rules import speech
from ctxpipe.providers.rules.text import lead_in

ATTITUDE = frozenset("like love enjoy prefer hate dislike want need wish adore fancy mind".split())
FAVOURITE = frozenset({"favorite", "favourite", "rather"})
# single-valued attributes: the verbs that state them and the nouns that name them
SLOTS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "home": (frozenset("live move relocate reside base".split()), frozenset({"hometown"})),
    "work": (
        frozenset("work join lead manage employ hire".split()),
        frozenset("job employer career profession occupation".split()),
    ),
    "name": (frozenset({"call"}), frozenset({"name"})),
    "response style": (frozenset(), frozenset("answer reply response explanation summary".split())),
}
# words that say a statement replaces an earlier one on its topic
CHANGE_CUES = ("anymore", "any more", "no longer", "now", "instead", "these days", "nowadays")
CHANGE_VERBS = frozenset("stop quit switch change leave become".split())
_CHANGE_CUE_RE = re.compile(rf"\b(?:{'|'.join(CHANGE_CUES)})\b")
_GENERIC = frozenset("be have do get go make take thing lot really".split())
# no topic: attitudes, generic verbs, change cues, function words
_NOT_TOPICS = ATTITUDE | _GENERIC | CHANGE_VERBS | STOPWORDS | {"user", "others"}
_NOT_TOPICS |= {c for cue in CHANGE_CUES for c in cue.split()}

_SUBJECT_WORDS = frozenset({"the", "user", "and", "others", "they"})
_DETERMINERS = frozenset("the a an this that these those".split())  # open a noun phrase
# what someone is at an organisation: "is a nurse at St. Mary's", "is Alice, a data engineer at"
_ROLE_AT_RE = re.compile(r"\b(?:is|was|am)\b[^.;]*?\ban?\s+(?:[\w-]+\s+){0,3}?at\s+[A-Z]")
# a noun the subject owns ("the user's job", "their new job")
_OWN_RE = re.compile(r"(?:'s|\btheir)\s+([a-z]+)(?:\s+([a-z]+))?")
_EMPLOYMENT_LINKS = frozenset({"at", "for", "as", "in"})


@lru_cache(maxsize=65536)
def lemma(word: str) -> str:
    """The dictionary form of `word`: an inflected verb's verb ("lives" → live), else its noun,
    verb or adjective lemma."""
    pos = speech.lemmas(word)
    verb = pos.get("VERB", ("",))[0]
    if verb and verb != word.lower():
        return verb
    return next((pos[tag][0] for tag in ("NOUN", "VERB", "AUX", "ADJ") if tag in pos), word.lower())


def word_lemmas(text: str) -> set[str]:
    return {lemma(w) for w in speech.split_words(text)}


def subject_verb(text: str) -> tuple[str, bool]:
    """(the lemma of the main verb of a third-person statement, whether its subject is the
    speaker): "Ana doesn't need …" → (need, True); "prefers short answers" → (prefer, True);
    "The user's sister Hannah lives in Cork" → (live, False). A lead-in before a colon ("Big
    news: …") is skipped; the subject is the speaker when it is only a name or "the user"."""
    words = speech.split_words(lead_in(text, 4)[1])
    start = 0  # past the subject: a name, a possessive, "the user", "and others"
    while start < len(words):
        w = words[start]
        phrase = " ".join(words[start : start + 2]).lower()
        if w.lower() in _DETERMINERS and not phrase.startswith("the user"):
            return "", False  # a noun phrase is the subject ("the hard work starts"), not them
        subject_word = w.lower() in _SUBJECT_WORDS or w.endswith("'s")
        if not subject_word and not (w[:1].isupper() and speech.verb_lemma(w) is None):
            break
        start += 1
    own = not any(w.endswith("'s") for w in words[:start])
    found = speech.chain_verb(words[start : start + 6])
    return found, own and bool(found)


def main_verb(text: str) -> str:
    """The lemma of the main verb of a third-person statement ("" when none is found)."""
    return subject_verb(text)[0]


def verbs_of(text: str) -> set[str]:
    """The main verb of `text`, the verbs coordinated with it ("left Berlin and moved to
    Munich" → leave, move) and the verbs of its later clauses with the same subject ("…, where
    the user now leads a team" → lead)."""
    found = {main_verb(text)}
    for m in re.finditer(r"\band\s+(?:then\s+)?([a-z]+)", text):
        lem = speech.verb_lemma(m.group(1))
        if lem and lem != m.group(1) and "NOUN" not in speech.lemmas(m.group(1)):
            found.add(lem)
    subject = speech.split_words(text)[:1]
    if subject:
        who = "the user" if subject[0].lower() == "the" else re.escape(subject[0])
        for m in re.finditer(rf"(?<=\s){who}((?:\s+[a-z]+){{1,3}})", text, re.I):
            after = [w for w in m.group(1).split() if not speech.is_adverb_only(w)]
            lem = speech.verb_lemma(after[0]) if after else None
            if lem and lem != after[0].lower():  # an inflected verb: a finite clause
                found.add(lem)
    return found


def slot_of(text: str) -> str | None:
    """The single-valued attribute a statement is about first (None: it accumulates)."""
    return next(iter(slots_of(text)), None)


@lru_cache(maxsize=16384)
def slots_of(text: str) -> tuple[str, ...]:
    """The single-valued attributes a statement sets: a verb of the speaker states one
    ("lives", "moved", "works"), a noun the speaker owns names it ("the user's job"), it says
    what the speaker is at an organisation ("is a nurse at St. Mary's"), or it is an attitude
    to the replies the speaker gets ("prefers short answers")."""
    _, own = subject_verb(text)  # a verb of someone else (a sister's home) is not the speaker's
    words = word_lemmas(text)
    verbs = verbs_of(text) if own else set()
    owns = (m for m in _OWN_RE.finditer(text) if _owner_is_subject(text, m))
    owned = {lemma(w) for m in owns for w in m.groups() if w}
    found: list[str] = []
    if own and _ROLE_AT_RE.search(text):
        found.append("work")
    for name, (slot_verbs, nouns) in SLOTS.items():
        if name == "response style":
            if nouns & words and (words & ATTITUDE or verbs & ATTITUDE):
                found.append(name)
        elif owned & nouns or (
            verbs & slot_verbs and (name != "work" or _employment(text, verbs & slot_verbs))
        ):
            found.append(name)
    return tuple(dict.fromkeys(found))


def _employment(text: str, verbs: set[str]) -> bool:
    """Does a work verb of `text` state an employment ("works as a nurse", "joined Stripe",
    "leads a team at Initech") rather than an activity ("working on my confidence", "managing
    my social media")? Within the few words after it comes an organisation (a capitalised
    name) or a preposition that links a job to its place (at, for, as, in)."""
    words = speech.split_words(text)
    return any(
        speech.verb_lemma(w) in verbs
        and any(a.lower() in _EMPLOYMENT_LINKS or a[:1].isupper() for a in words[i + 1 : i + 7])
        and words[i + 1].lower() != "on"  # "work on X": an activity
        for i, w in enumerate(words)
    )


def _owner_is_subject(text: str, m: re.Match[str]) -> bool:
    """Is the owner of a possessive the statement's subject ("The user's job", "their job";
    not "The user's sister Hannah's job")?"""
    if m.group(0).startswith("their"):
        return True
    before = speech.split_words(text[: m.start()].rsplit(":", 1)[-1])
    return bool(before) and all(w.lower() in _SUBJECT_WORDS or w[:1].isupper() for w in before)


def is_change(text: str) -> bool:
    return bool(_CHANGE_CUE_RE.search(text.lower())) or main_verb(text) in CHANGE_VERBS


def _topic_tokens(text: str) -> list[tuple[str, str]]:
    """(word, stem of its lemma) of the words that say what `text` is about, in order:
    attitudes, auxiliaries, change cues, dates, the subject's name and function words left
    out."""
    words = speech.split_words(strip_dates(text))
    skip = set(_NOT_TOPICS)
    if words and words[0][:1].isupper():  # the subject's name
        skip.add(words[0].lower().removesuffix("'s"))
    lows = (w.lower().removesuffix("'s") for w in words)
    return [
        (low, stem(lemma(low)))
        for low in lows
        if not (low in skip or lemma(low) in skip or low.isdigit() or speech.is_adverb_only(low))
    ]


def topic_words(text: str) -> set[str]:
    """The stems of the lemmas of what `text` is about: two statements share a topic when
    they share some."""
    return {st for _, st in _topic_tokens(text)}


def key_topics(text: str, n: int = 4) -> list[str]:
    """The first `n` words of `text` that say what it is about, each once: what a routing key
    is made of."""
    return list(dict.fromkeys(w for w, _ in _topic_tokens(text)))[:n]
