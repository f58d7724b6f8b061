"""`extraction.entity_event`: entities (see entities.py) plus dated events.

An event is a USER sentence (not a question) that carries a date expression and either a
tense cue (past-tense verb → happened, will/going to/-ing → planned) or an event noun
("wedding", "deadline", "interview"…). Relative dates are resolved against the message's
`created_at` (else `session_time`) and rewritten as absolute dates in the stored text.
"""

from __future__ import annotations

import re
from typing import Any

from ctxpipe.providers.rules.dates import DateMention, absolutize, best_date, find_dates, has_date
from ctxpipe.providers.rules.entities import extract_entities, names_in
from ctxpipe.providers.rules.grammar import tense, to_third_person
from ctxpipe.providers.rules.inputs import Msg, anchor_for, load_messages
from ctxpipe.providers.rules.text import (
    STOPWORDS,
    is_hedged,
    is_question,
    normalize_space,
    slugify,
    tokenize,
)

EVENT_NOUNS = re.compile(
    r"\b(?:wedding|meeting|party|deadline|release|launch|interview|trip|appointment|"
    r"conference|birthday|anniversary|exam|talk|demo|flight|concert|game|race|marathon|surgery|"
    r"review|presentation|holiday|vacation|offsite|hackathon|ceremony|graduation|funeral|"
    r"move|visit|standup|retro|workshop|course|class|match|show|festival|dinner|lunch)s?\b",
    re.I,
)
DATE_WORDS = frozenset(
    """yesterday today tomorrow tonight last next this ago week weeks month months year years
    weekend morning afternoon evening night day days past coming on in couple few since during
    monday tuesday wednesday thursday friday saturday sunday january february march april may
    june july august september october november december jan feb mar apr jun jul aug sep sept
    oct nov dec""".split()
)
WEAK_WORDS = frozenset(
    """user just finally also really actually so we i my our the team got went did had was
    were be been is are am will going gonna""".split()
)


def _event_slug(sentence: str, date: DateMention) -> str:
    text = sentence[: date.start] + " " + sentence[date.end :]
    text = re.sub(r"['’]s\b", "", text)
    toks = [
        t
        for t in tokenize(text)
        if t not in STOPWORDS
        and t not in DATE_WORDS
        and t not in WEAK_WORDS
        and not re.fullmatch(r"\d+(?:st|nd|rd|th)?|\d{4}-\d\d-\d\d", t)
    ]
    base = slugify(" ".join(toks[:5]), max_words=5) if toks else "event"
    return f"{base}-{date.iso}" if date.iso else base


def _context(msg: Msg, idx: int) -> str:
    """The following sentence when it continues the same story ('It was…', 'We…')."""
    if idx + 1 < len(msg.sentences):
        nxt = msg.sentences[idx + 1]
        if re.match(r"^(?:It|It's|That|We|She|He|They|The|Everything|Afterwards|Then)\b", nxt):
            return nxt
    return ""


def _event(msg: Msg, idx: int, sentence: str, session_time: Any) -> dict[str, Any] | None:
    s = sentence.replace("’", "'")
    if not has_date(s) or is_question(s):  # an event is dated
        return None
    lead = re.match(r"^[^:]{3,60}:\s+(?=\S)", s)
    if lead and find_dates(s[lead.end() :], None):
        s = s[lead.end() :]  # "Quick update: I left Acme last month" → the part that is dated
    t = tense(s)
    anchor = anchor_for(msg, session_time)
    mentions = find_dates(s, anchor, t)
    if not mentions:
        return None
    best = best_date(mentions) or mentions[0]
    if t is None:
        if not (EVENT_NOUNS.search(s) and best.precision == "day"):
            return None
        t = "future" if best.value and anchor and best.value > anchor else "past"
    if len([w for w in tokenize(s) if w not in STOPWORDS and w not in DATE_WORDS]) < 2:
        return None
    status = "planned" if t == "future" else "happened"
    absolute = normalize_space(absolutize(s, mentions))
    told = to_third_person(absolute)
    follow = _context(msg, idx)
    conf = 0.85 if not best.relative else 0.8
    if best.value is None:
        conf = 0.55
    if is_hedged(s):
        conf -= 0.2
    overview = [
        f"- date: {best.describe()}"
        + (
            f" (from '{best.text}', relative to {anchor.isoformat()})"
            if best.relative and anchor and best.value
            else ""
        ),
        f"- status: {status}",
    ]
    names = [n for n, _, _ in names_in(s) if n.lower() not in DATE_WORDS]
    if names:
        overview.append(f"- involves: {', '.join(dict.fromkeys(names))}")
    overview.append(f"- {told} [{msg.id}]")
    content = [f'- {told} [{msg.id}] — "{normalize_space(s)[:240]}"']
    if follow:
        content.append(
            f"- {to_third_person(absolutize(follow, find_dates(follow, anchor, t)))} [{msg.id}]"
        )
    return {
        "category": "events",
        "routing_key": _event_slug(s, best),
        "abstract": told,
        "overview": "\n".join(overview),
        "content": "\n".join(content),
        "confidence": round(max(0.5, min(0.95, conf)), 2),
        "source_refs": [msg.id],
        "event_time": best.iso,
    }


def extract_entity_event(variables: dict[str, Any]) -> dict[str, Any]:
    messages = load_messages(variables.get("messages"))
    session_time = variables.get("session_time")
    memories = extract_entities(messages, session_time)
    seen: set[str] = set()
    for msg in messages:
        if not msg.is_user:
            continue
        for idx, sentence in enumerate(msg.sentences):
            ev = _event(msg, idx, sentence, session_time)
            if ev and ev["routing_key"] not in seen:
                seen.add(ev["routing_key"])
                memories.append(ev)
    return {"memories": memories}
