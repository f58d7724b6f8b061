"""What a speaker says about themselves, one statement per sentence, and its category.

A sentence of a user message is a *statement* when it is not a question, has `MIN_CONTENT`
content words besides the speakers' names, and speaks of its speaker (a first-person word:
`speech.rewrite` puts it in the third person) or names something (a capitalised name that is
not a speaker's). Its category follows from its grammar, not from phrasings: an attitude as
its main verb (like, love, prefer, want, need …) or a favourite makes a *preference*; the past
tense or a date an *event*; the rest (present states and habits: "is a nurse") is *profile*;
every name it carries makes it a line of that name's *entity* memory too.
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
from ctxpipe.providers.rules import speech
from ctxpipe.providers.rules.inputs import Msg
from ctxpipe.providers.rules.text import is_question, lead_in
from ctxpipe.providers.rules.topics import ATTITUDE, FAVOURITE, slot_of, word_lemmas

MIN_CONTENT = 3  # content words a sentence needs (one fewer when it is about its speaker)

_CALENDAR = {*calendar.month_name, *calendar.day_name}  # not names
_PARTICLE = r"(?:da|de|del|der|di|do|dos|du|la|le|of|the|van|von)"  # inside a name
_NAME_RUN_RE = re.compile(rf"\b[A-Z][\w'’-]*\.?(?:\s+(?:{_PARTICLE}\s+)?[A-Z][\w'’-]*\.?)*")
_CLAUSE_RE = re.compile(r"(?:[,;]?\s+(?:and|but|so)|[;,])\s+(?=(?:I|my)\b)")
# a clause that opens with one of these is subordinate: the comma after it does not end it
_SUBORDINATE_RE = re.compile(
    r"(?i)^\W*(?:when|whenever|if|after|before|because|since|as|while|once|until|though|although|"
    r"every time|each time)\b"
)


@dataclass
class Statement:
    msg: Msg
    text: str  # third person, relative dates resolved
    kind: str  # "profile" | "preferences" | "events" | "" (not about the speaker)
    day: date | None = None
    names: list[str] = field(default_factory=list)
    told: str = ""  # the whole sentence it is a clause of, in the third person
    quote: str = ""  # the speaker's own sentence, when the statement is only a clause of it


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
            if len(words) == 1 or speech.lemmas(words[0]) or words[0].lower() in STOPWORDS:
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
    if speech.has_first_person(first) and len(content_tokens(first)) >= 2:
        out.insert(0, first.strip())
    else:  # it stays with the clause after it
        out[0] = sentence[: ends[0]].strip()
    return [c for c in out if c]


def _kind(clause: str, r: speech.Rewritten, dated: bool) -> str:
    verb = r.main_verb
    attitude = verb in ATTITUDE or (verb == "stand" and speech.is_negated(clause))  # "can't stand"
    if verb in ("need", "want") and re.search(rf"\b{verb[:3]}\w*\s+to\s+\w", clause):
        attitude = False  # "need to …", "want to …": an obligation or a plan, not a taste
    if attitude or word_lemmas(clause) & FAVOURITE:
        return "preferences"
    return "events" if r.past or dated else "profile"


def statements(messages: list[Msg], speakers: list[str]) -> list[Statement]:
    """The statements of the user's messages, in order. An event that sets a single-valued
    attribute ("I moved to Lisbon last week") is a profile statement: what it set holds from
    then on (its line keeps the date)."""
    out: list[Statement] = []
    name_skip = {stem(w.lower()) for s in speakers for w in s.split()}
    known = inner_names(messages)
    for msg in (m for m in messages if m.is_user):
        subject, said_on = msg.name or "the user", msg.day
        for sentence in msg.sentences:
            words = set(content_tokens(sentence)) - name_skip
            about_self = speech.has_first_person(sentence)
            if is_question(sentence) or len(words) < MIN_CONTENT - about_self:
                continue
            names = names_in(sentence, speakers, known)
            if not about_self:  # about something else: a name's entity line,
                text, day = resolve(sentence, said_on)  # the context of an event
                out.append(Statement(msg, text, "", day or said_on, names, text))
                continue
            head, rest = lead_in(sentence)  # a lead-in that says nothing of the speaker goes
            if head and not speech.has_first_person(head) and speech.has_first_person(rest):
                sentence = rest
            r = speech.rewrite(sentence, subject)
            whole = resolve(r.text, said_on, r.past)[0]
            parts = []
            for clause in clauses(sentence):
                r = speech.rewrite(clause, subject)
                text, day = resolve(r.text, said_on, r.past)
                kind = _kind(clause, r, day is not None)
                clause_names = [n for n in names if n in clause]
                parts.append(Statement(msg, text, kind, day, clause_names, whole))
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
