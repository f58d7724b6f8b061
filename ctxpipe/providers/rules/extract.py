"""`extraction.profile`, `extraction.preferences`, `extraction.entity_event` from statements.

Each handler takes the user's statements (`statements.statements`) of its categories and
writes one line per statement, citing only the message the statement comes from:

- profile: ONE memory (routing key ``profile``) with the profile statements;
- preferences: one memory per topic — the single-valued attribute it is about (`SLOTS`), else
  the first noun after its verb — with its statements, plus the user's instructions
  (imperative sentences: "Keep answers short.", "Please don't use emojis.");
- events: one memory per message with event statements, dated by the first date they name
  (else the day the message was sent);
- entities: one memory per name, with every statement that carries the name.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ctxpipe.core.text import content_tokens
from ctxpipe.providers.rules.inputs import Msg, load_messages
from ctxpipe.providers.rules.lines import Line, render_lines, synthesize
from ctxpipe.providers.rules.speech import first_person_subject, lemmas, verb_lemma
from ctxpipe.providers.rules.statements import MIN_CONTENT, Statement, statements
from ctxpipe.providers.rules.text import is_question, slugify
from ctxpipe.providers.rules.topics import ATTITUDE, WORD_RE, lemma, main_verb, slot_of, topic_words

CONFIDENCE = 0.7
EVENT_SENTENCES = 6  # an event line tells at most this many sentences of its message
_DIRECTIVE = ("please", "always", "never", "don't")  # what marks a sentence as a request


def _memory(category: str, key: str, subject: str, found: list[Statement]) -> dict[str, Any]:
    lines = [Line(s.text, [s.msg.id]) for s in found]
    # the full text (L2) quotes the speaker's own sentence where a line is only a clause of it
    quoted = [Line(s.text, [s.msg.id], s.quote) for s in found]
    out: dict[str, Any] = {
        "category": category,
        "routing_key": key,
        "abstract": synthesize(subject, lines),
        "overview": render_lines(lines),
        "content": render_lines(quoted),
        "confidence": CONFIDENCE,
        "source_refs": list(dict.fromkeys(s.msg.id for s in found)),
    }
    days = [s.day for s in found if s.day]
    if category == "events" and days:
        out["event_time"] = days[0].isoformat()
    return out


def _load(variables: dict[str, Any]) -> tuple[list[Msg], list[Statement], str]:
    """The messages, the user's statements and whom they are about (the user's name)."""
    messages = load_messages(variables.get("messages"))
    found = statements(messages, sorted({m.name for m in messages if m.name}))
    name = next((m.name for m in messages if m.is_user and m.name), None)
    return messages, found, name or str(variables.get("user_id") or "") or "the user"


def extract_profile(variables: dict[str, Any]) -> dict[str, Any]:
    _, found, subject = _load(variables)
    profile = [s for s in found if s.kind == "profile"]
    return {"memories": [_memory("profile", "profile", subject, profile)] if profile else []}


def topic_key(text: str) -> str:
    """A preference's topic: its single-valued attribute, else the first topic word after its
    verb (else its first topic word)."""
    slot = slot_of(text)
    if slot:
        return slot
    words = WORD_RE.findall(text)
    verb = main_verb(text)
    after = False
    for w in words[1:]:
        if not after:
            after = verb_lemma(w) == verb
            continue
        pos = lemmas(w)
        if topic_words(w) and (not pos or "NOUN" in pos or "VERB" in pos):
            return lemma(w)
    topics = sorted(topic_words(text))
    return topics[0] if topics else "general"


def _instruction(msg: Msg, sentence: str) -> Statement | None:
    """An imperative sentence of the user: a standing instruction to the other party. It opens
    with a base-form verb (after "please", "always", "never", "don't") that is not an adverb or
    adjective or attitude ("Love that colour!" is the speaker's own), and has no subject. An
    exclamation is one only with one of those markers ("Wow, that looks great!" is not)."""
    words = WORD_RE.findall(sentence)
    lead = [w for w in words[:3] if w.lower() not in _DIRECTIVE]
    if not lead or is_question(sentence) or len(content_tokens(sentence)) < MIN_CONTENT:
        return None
    if sentence.rstrip().endswith("!") and len(lead) == len(words[:3]):
        return None
    first = lead[0].lower()
    pos = lemmas(first)
    not_verb = verb_lemma(first) != first or "ADV" in pos or "ADJ" in pos
    if not_verb or first in ("let", "be") or first in ATTITUDE:
        return None
    finite = {"is", "are", "was", "were", "has", "have", "had", "does", "did", "will"}
    if first_person_subject(sentence) or finite & {w.lower() for w in words[1:]}:
        return None
    subject = msg.name or "the user"
    text = f"{subject[:1].upper()}{subject[1:]} wants: {sentence[:1].lower()}{sentence[1:]}"
    return Statement(msg, text, "preferences", "want")


def extract_preferences(variables: dict[str, Any]) -> dict[str, Any]:
    messages, found, subject = _load(variables)
    prefs = [s for s in found if s.kind == "preferences"]
    for msg in messages:
        if msg.is_user:
            prefs.extend(st for st in (_instruction(msg, s) for s in msg.sentences) if st)
    groups: dict[str, list[Statement]] = defaultdict(list)
    for s in prefs:
        groups[topic_key(s.text)].append(s)
    return {"memories": [_memory("preferences", key, subject, g) for key, g in groups.items()]}


def extract_entity_event(variables: dict[str, Any]) -> dict[str, Any]:
    _, found, subject = _load(variables)
    by_name: dict[str, list[Statement]] = defaultdict(list)
    by_msg: dict[str, list[Statement]] = defaultdict(list)
    for s in found:
        by_msg[s.msg.id].append(s)
        for name in s.names:
            by_name[name].append(s)
    memories = [_memory("entities", slugify(name), name, g) for name, g in by_name.items()]
    for group in by_msg.values():
        events = [s for s in group if s.kind == "events"]
        if not events:
            continue
        # what happened is told by the whole message: one line, dated by its first event
        first = events[0]
        text = " ".join(list(dict.fromkeys(s.told or s.text for s in group))[:EVENT_SENTENCES])
        told = Statement(first.msg, text, "events", first.verb, first.day, first.names)
        low = first.text.lower()
        # in the order the text says them; a stem not spelled in it (and ties) by the stem
        words = sorted(topic_words(first.text), key=lambda w: (low.find(w) % (len(low) + 1), w))
        words = words[:4]
        key = slugify(f"{first.day.isoformat() if first.day else ''} {' '.join(words)}")
        memories.append(_memory("events", key, subject, [told]))
    return {"memories": memories}
