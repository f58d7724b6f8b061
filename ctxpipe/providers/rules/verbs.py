"""English verbs by meaning, with their forms: where someone lives, what job they do, which job
they left. A lexicon of the language, not of any conversation.

`verb_form("led")` → [("lead", "past")]; `CLASSES` groups lemmas by meaning; `object_kind`
tells whether the name after a verb and its preposition is a place or an organisation
("moved from Berlin" → place, "joined Initech" → organisation).
"""

from __future__ import annotations

import re

# lemma → (base, third person singular, past, past participle, -ing); regular verbs are derived
_IRREGULAR: dict[str, tuple[str, str, str, str, str]] = {
    "lead": ("lead", "leads", "led", "led", "leading"),
    "run": ("run", "runs", "ran", "run", "running"),
    "oversee": ("oversee", "oversees", "oversaw", "overseen", "overseeing"),
    "begin": ("begin", "begins", "began", "begun", "beginning"),
    "take": ("take", "takes", "took", "taken", "taking"),
    "become": ("become", "becomes", "became", "become", "becoming"),
    "leave": ("leave", "leaves", "left", "left", "leaving"),
    "quit": ("quit", "quits", "quit", "quit", "quitting"),
    "get": ("get", "gets", "got", "gotten", "getting"),
    "make": ("make", "makes", "made", "made", "making"),
    "lose": ("lose", "loses", "lost", "lost", "losing"),
}
CLASSES: dict[str, frozenset[str]] = {
    # where the user lives
    "residence": frozenset({"live", "move", "relocate", "settle", "call", "base", "reside"}),
    # what the user is in charge of at work
    "lead": frozenset({"lead", "manage", "head", "run", "oversee", "supervise"}),
    # who employs the user
    "employ": frozenset({"work", "join", "start", "begin", "switch", "hire"}),
    # the user's title changes
    "role": frozenset({"promote", "become", "take"}),
    # a job ends
    "leave": frozenset({"leave", "quit", "resign", "lose"}),
}
# events whose result still holds ("I moved to Munich" → lives in Munich now); the other verbs
# state a condition, and only their present tense does ("I lived in Rome" → not now)
CHANGES = frozenset(
    {"move", "relocate", "settle", "join", "start", "begin", "switch", "promote", "take"}
    | {"become", "hire", "leave", "quit", "resign", "lose"}
)
KINDS = ("base", "third", "past", "participle", "ing")


def _regular(lemma: str) -> tuple[str, str, str, str, str]:
    if lemma.endswith("e"):
        past, ing = lemma + "d", lemma[:-1] + "ing"
    elif re.search(r"[^aeiou][aeiou][pt]$", lemma) and lemma not in {"visit"}:
        past, ing = lemma + lemma[-1] + "ed", lemma + lemma[-1] + "ing"
    else:
        past, ing = lemma + "ed", lemma + "ing"
    third = lemma + ("es" if lemma.endswith(("s", "sh", "ch", "x", "z")) else "s")
    return lemma, third, past, past, ing


def forms(lemma: str) -> tuple[str, str, str, str, str]:
    return _IRREGULAR.get(lemma) or _regular(lemma)


_INDEX: dict[str, list[tuple[str, str]]] = {}
for _lemmas in CLASSES.values():
    for _lemma in sorted(_lemmas):
        for _kind, _form in zip(KINDS, forms(_lemma), strict=True):
            if (_lemma, _kind) not in _INDEX.setdefault(_form, []):
                _INDEX[_form].append((_lemma, _kind))


def verb_form(word: str) -> list[tuple[str, str]]:
    """(lemma, kind) readings of a word among the lexicon's verbs ([] when none)."""
    return list(_INDEX.get(word.lower(), []))


def class_of(lemma: str) -> str | None:
    return next((c for c, lemmas in CLASSES.items() if lemma in lemmas), None)


def base_verbs() -> frozenset[str]:
    """Every lexicon verb's base form (for agreement after 'and')."""
    return frozenset(forms(lemma)[0] for lemmas in CLASSES.values() for lemma in lemmas)


_WORD = re.compile(r"[A-Za-z]+")
_PLACE_PREP = re.compile(
    r"\b(?P<verb>[a-z]+)(?:\s+(?:back|over|out|away|down|here|there|all the way))*\s+"
    r"(?:from\s+(?:the\s+)?(?-i:[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)*)\s+)?"  # "moved from Berlin to"
    r"(?:(?:in|into|to|from|out of|near)\s+)?(?:the\s+)?$",
    re.I,
)
_JOB_WORDS = re.compile(r"\b(?:job|jobs|role|position|company|employer|team|hired|salary)\b", re.I)


def object_kind(sentence: str, before: str) -> str | None:
    """'place' or 'organisation' for the name that follows `before` in `sentence`, from the
    verb that governs it: residence verbs take places ("moved from Berlin", "settled in
    Lyon", "call Munich home"), employment verbs organisations ("work at", "joined", "quit");
    'left X' follows the verbs it is coordinated with ("left Berlin and moved to Munich").
    None when no verb of the lexicon governs the name."""
    m = _PLACE_PREP.search(before[-60:])
    if not m:
        return None
    readings = verb_form(m.group("verb"))
    if not readings:
        return None
    lemma = readings[0][0]
    cls = class_of(lemma)
    prep = before[m.end("verb") :].strip().lower()
    if cls == "residence" and lemma != "call":  # "called Anna" names no place
        return "place"
    if cls == "employ" and (lemma in {"join", "hire"} or re.search(r"\b(?:at|for)\b", prep)):
        return "organisation"
    if lemma in {"quit", "resign"}:
        return "organisation"
    if lemma == "leave" and not prep:
        others = {class_of(r[0]) for w in _WORD.findall(sentence) for r in verb_form(w)}
        if "residence" in others:
            return "place"
        if others & {"employ", "role", "lead"} or _JOB_WORDS.search(sentence):
            return "organisation"
    return None
