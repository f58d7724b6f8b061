"""What a speaker says about themselves, one statement per sentence, and what it is about.

A sentence of a user message is a *statement* when it is not a question, has at least
`MIN_CONTENT` content words besides the speakers' names, and either speaks of its speaker
(a first-person word: `speech.rewrite` puts it in the third person with the speaker's name)
or names something (a capitalised name that is not a speaker's). Its category follows from its
grammar, not from phrasings:

- a statement whose main verb is an attitude (like, love, prefer, want, need …) or that names
  a favourite is a *preference*;
- one whose main verb is in the past tense, or that carries a date, is an *event*;
- the others (present states and habits: "is a nurse", "has two kids", "plays the cello")
  are *profile*;
- every name it carries makes it a line of that name's *entity* memory as well.

What a statement is about, and whether it changes something: `topics`.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from datetime import date

from ctxpipe.core.dates import resolve
from ctxpipe.core.text import STOPWORDS, content_tokens, stem
from ctxpipe.providers.rules.inputs import Msg
from ctxpipe.providers.rules.speech import (
    has_first_person,
    inflections,
    lemmas,
    rewrite,
    verb_lemma,
)
from ctxpipe.providers.rules.text import is_question
from ctxpipe.providers.rules.topics import (
    ATTITUDE,
    FAVOURITE,
    WORD_RE,
    is_negated,
    slot_of,
    word_lemmas,
)

MIN_CONTENT = 3  # content words a sentence needs (one fewer when it is about its speaker)

_PRESENT_AUX = frozenset("am is are have has will can do does".split())  # and any "'m", "'ve" …
_PAST_AUX = frozenset("was were had did could".split())
_CALENDAR = {*calendar.month_name, *calendar.day_name}  # not names
_PARTICLE = r"(?:da|de|del|der|di|do|dos|du|la|le|of|the|van|von)"  # inside a name
_NAME_RUN_RE = re.compile(rf"\b[A-Z][\w'’-]*\.?(?:\s+(?:{_PARTICLE}\s+)?[A-Z][\w'’-]*\.?)*")
_CLAUSE_RE = re.compile(
    r"(?:,|;)?\s+(?:and|but|so)\s+(?=(?:I|I'm|I've|I'd|I'll|my)\b)"
    r"|[;,]\s+(?=(?:I|I'm|I've|I'd|I'll|my)\b)"
)
# a clause that opens with one of these is subordinate: the comma after it does not end it
_SUBORDINATE_RE = re.compile(
    r"^\W*(?:when|whenever|if|after|before|because|since|as|while|once|until|though|although|"
    r"every time|each time)\b",
    re.I,
)


@dataclass
class Statement:
    msg: Msg
    text: str  # third person, relative dates resolved
    kind: str  # "profile" | "preferences" | "events" | "" (not about the speaker)
    verb: str = ""
    day: date | None = None
    names: list[str] = field(default_factory=list)
    told: str = ""  # the whole sentence it is a clause of, in the third person
    quote: str = ""  # the speaker's own sentence, when the statement is only a clause of it


def _is_past(sentence: str, verb: str) -> bool:
    """Is the clause in the past tense? Its first finite verb — the auxiliary after a
    first-person subject ("I've got": present, "I had": past), else the main verb's form,
    else the first verb form that is not a base form — is a past form."""
    text = sentence.replace("\u2019", "'")
    m = re.search(
        r"\b(?:I|we|We)(?:\s+(?:just|really|also|still|never|already))?(\s+\w+|'\w+)", text
    )
    if m:
        aux = m.group(1).strip().lower()
        if aux in _PRESENT_AUX or aux.startswith("'"):
            return False
        if aux in _PAST_AUX:
            return True
    for w in WORD_RE.findall(text):
        low = w.lower()
        lem = verb_lemma(low)
        if lem is None or (verb and lem != verb) or low in ("is", "are", "has", "am"):
            if verb == "" and low in ("is", "are", "has", "am", "will", "can"):
                return False
            continue
        if lem == low and not verb:
            continue
        return low in inflections(lem, "VBD")
    return False


def names_in(
    sentence: str, exclude: Iterable[str] = (), known: AbstractSet[str] = frozenset()
) -> list[str]:
    """Capitalised names in `sentence` (runs of capitalised words: "St. Mary's Hospital"). A
    capital at the start of a sentence says nothing: a sentence-initial word is part of a name
    only when the run goes on ("Amy Ellis Nutt") or the word is `known` as a name (seen
    capitalised inside a sentence)."""
    skip = {w.lower() for name in exclude for w in name.split()}
    start = len(sentence) - len(sentence.lstrip(" \"'“‘(-"))
    out: list[str] = []
    for m in _NAME_RUN_RE.finditer(sentence):
        words = m.group(0).split()
        if m.start() == start and words[0].rstrip(".") not in known:
            if len(words) == 1 or lemmas(words[0]) or words[0].lower() in STOPWORDS:
                words = words[1:]
        words = [w for w in words if not _is_speaker(re.split(r"['’.]", w)[0], skip)]
        words = [w for w in words if w.rstrip(".") not in _CALENDAR]
        name = " ".join(words).rstrip(".").removesuffix("'s").removesuffix("’s").strip("'’")
        if len(name) > 1 and not name.isupper():
            out.append(name)
    return list(dict.fromkeys(out))


def inner_names(messages: list[Msg]) -> set[str]:
    """The words written with a capital inside a sentence in these messages."""
    return {
        w.rstrip(".").removesuffix("'s")
        for msg in messages
        for sentence in msg.sentences
        for m in _NAME_RUN_RE.finditer(sentence, 1)
        for w in m.group(0).split()
    }


def _is_speaker(word: str, speakers: set[str]) -> bool:
    """`word` is "I", a speaker's name, or its short form ("Mel" for Melanie)."""
    low = word.lower()
    return low == "i" or any(s == low or (len(low) >= 3 and s.startswith(low)) for s in speakers)


def clauses(sentence: str) -> list[str]:
    """The clauses of a sentence that have their own first-person subject ("I'm a nurse and
    I live in Berlin" → two, the conjunction dropped); a first piece that says nothing of the
    speaker ("Hey, I need …", "Also, I'm …") stays with the clause after it."""
    cuts = [
        m
        for m in _CLAUSE_RE.finditer(sentence)
        if m.group(0).strip() not in (",", ";")
        or not _SUBORDINATE_RE.match(sentence[: m.start()].split(",")[-1])
    ]
    if not cuts:
        return [sentence]
    ends = [m.start() for m in cuts[1:]] + [len(sentence)]
    out = [sentence[m.end() : end].strip() for m, end in zip(cuts, ends, strict=True)]
    first = sentence[: cuts[0].start()]
    if has_first_person(first) and len(content_tokens(first)) >= 2:
        out.insert(0, first.strip())
    else:  # it stays with the clause after it
        out[0] = sentence[: ends[0]].strip()
    return [c for c in out if c]


def _kind(clause: str, verb: str) -> str:
    attitude = verb in ATTITUDE or (verb == "stand" and is_negated(clause))  # "can't stand"
    if verb in ("need", "want") and re.search(rf"\b{verb[:3]}\w*\s+to\s+\w", clause):
        attitude = False  # "need to …", "want to …": an obligation or a plan, not a taste
    if attitude or word_lemmas(clause) & FAVOURITE:
        return "preferences"
    return "events" if _is_past(clause, verb) else "profile"


def _without_lead_in(sentence: str) -> str:
    """A statement without a lead-in that says nothing of the speaker ("Big news: I moved
    …" → "I moved …")."""
    head, colon, rest = sentence.partition(": ")
    if colon and rest and not has_first_person(head) and has_first_person(rest):
        return rest
    return sentence


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def statements(messages: list[Msg], speakers: list[str]) -> list[Statement]:
    """The statements of the user's messages, in order. An event that sets a single-valued
    attribute ("I moved to Lisbon last week") is a profile statement: what it set holds from
    then on (its line keeps the date)."""
    out: list[Statement] = []
    name_skip = {stem(w.lower()) for s in speakers for w in s.split()}
    known = inner_names(messages)
    for msg in messages:
        if not msg.is_user:
            continue
        subject = msg.name or "the user"
        said_on = msg.created_at.date() if msg.created_at else None
        for sentence in msg.sentences:
            words = set(content_tokens(sentence)) - name_skip
            about_self = has_first_person(sentence)
            if is_question(sentence) or len(words) < MIN_CONTENT - about_self:
                continue
            names = names_in(sentence, speakers, known)
            if not about_self:  # about something else: a name's entity line,
                text, day = resolve(sentence, said_on)  # the context of an event
                out.append(Statement(msg, text, "", "", day or said_on, names, text))
                continue
            sentence = _without_lead_in(sentence)
            r = rewrite(sentence, subject)
            whole = resolve(_capital(r.text), said_on, _is_past(sentence, r.main_verb))[0]
            parts = []
            for clause in clauses(sentence):
                r = rewrite(clause, subject)
                kind = _kind(clause, r.main_verb)
                past = _is_past(clause, r.main_verb)
                text, day = resolve(_capital(r.text), said_on, past)
                if day is not None and kind == "profile":
                    kind = "events"
                clause_names = [n for n in names if n in clause]
                parts.append(Statement(msg, text, kind, r.main_verb, day, clause_names, whole))
            # clauses are statements of their own only when they say different kinds of thing,
            # are preferences (each may be reversed on its own) or one sets a single-valued
            # attribute; else the sentence is kept whole
            kinds = {p.kind for p in parts}
            if kinds in ({"profile"}, {"events"}) and not any(slot_of(p.text) for p in parts):
                day = next((p.day for p in parts if p.day), None)
                parts = [replace(parts[0], text=whole, day=day, names=names)]
            for found in parts:
                found.day = found.day or said_on
                found.quote = sentence if len(parts) > 1 else ""
                if found.kind == "events" and slot_of(found.text):
                    found.kind = "profile"  # what it set holds from then on: a dated fact
                out.append(found)
    return out
