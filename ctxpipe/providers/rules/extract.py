"""The extraction handlers. `extraction.procedure` gathers the session's cases (`cases`),
patterns (`routines`) and skills (`skills`); the others write one line per statement of the
user (`statements.statements`), citing only the message it comes from:

- profile: ONE memory (routing key ``profile``) with the profile statements;
- preferences: one memory per topic (`topic_key`) with its statements and the user's
  instructions (imperative sentences: "Keep answers short.", "Please don't use emojis.");
- events: one memory per message with event statements, telling its sentences, dated by the
  first date they name (else the day the message was sent);
- entities: one memory per name, with every statement that carries the name.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ctxpipe.core.text import content_tokens
from ctxpipe.providers.rules import topics
from ctxpipe.providers.rules.cases import case_memory, find_cases
from ctxpipe.providers.rules.inputs import Msg, load_messages, load_tools
from ctxpipe.providers.rules.lines import Line, memory, render_lines, synthesize
from ctxpipe.providers.rules.routines import extract_patterns
from ctxpipe.providers.rules.skills import extract_skills
from ctxpipe.providers.rules.speech import has_first_person, lemmas, split_words, verb_lemma
from ctxpipe.providers.rules.statements import MIN_CONTENT, Statement, statements
from ctxpipe.providers.rules.text import is_question, slugify

CONFIDENCE = 0.7
EVENT_SENTENCES = 6  # an event line tells at most this many sentences of its message
_DIRECTIVE = ("please", "always", "never", "don't")  # what marks a sentence as a request


def _memory(category: str, key: str, subject: str, found: list[Statement]) -> dict[str, Any]:
    lines = [Line(s.text, [s.msg.id]) for s in found]
    # the full text (L2) quotes the speaker's own sentence where a line is only a clause of it
    quoted = render_lines([Line(s.text, [s.msg.id], s.quote) for s in found])
    days = [s.day for s in found if s.day]
    dated = {"event_time": days[0].isoformat()} if category == "events" and days else {}
    abstract, overview = synthesize(subject, lines), render_lines(lines)
    refs = [s.msg.id for s in found]
    return memory(category, key, abstract, overview, quoted, CONFIDENCE, refs=refs, **dated)


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
    verb that can name a thing (a noun, a verb, a word the lexicon does not know), else its
    first topic word."""
    words, verb = split_words(text), topics.main_verb(text)
    at = next((i for i, w in enumerate(words[1:], 1) if verb_lemma(w) == verb), len(words))
    named = (w for w in words[at + 1 :] if not lemmas(w) or {"NOUN", "VERB"} & set(lemmas(w)))
    first = next((topics.lemma(w) for w in named if topics.topic_words(w)), None)
    return topics.slot_of(text) or first or min(topics.topic_words(text), default="general")


def _instruction(msg: Msg, sentence: str) -> Statement | None:
    """An imperative sentence of the user: a standing instruction to the other party. It opens
    with a base-form verb (after "please", "always", "never", "don't") that is not an adverb or
    adjective or attitude ("Love that colour!" is the speaker's own), and has no subject. An
    exclamation is one only with one of those markers ("Wow, that looks great!" is not)."""
    words = split_words(sentence)
    lead = [w for w in words[:3] if w.lower() not in _DIRECTIVE]
    if not lead or is_question(sentence) or len(content_tokens(sentence)) < MIN_CONTENT:
        return None
    if sentence.rstrip().endswith("!") and len(lead) == len(words[:3]):
        return None
    first = lead[0].lower()
    pos = lemmas(first)
    not_verb = verb_lemma(first) != first or "ADV" in pos or "ADJ" in pos
    if not_verb or first in ("let", "be") or first in topics.ATTITUDE:
        return None
    finite = {"is", "are", "was", "were", "has", "have", "had", "does", "did", "will"}
    if has_first_person(sentence, {"i"}) or finite & {w.lower() for w in words[1:]}:
        return None
    subject = msg.name or "the user"
    text = f"{subject[:1].upper()}{subject[1:]} wants: {sentence[:1].lower()}{sentence[1:]}"
    return Statement(msg, text, "preferences")


def extract_preferences(variables: dict[str, Any]) -> dict[str, Any]:
    messages, found, subject = _load(variables)
    prefs = [s for s in found if s.kind == "preferences"]
    prefs += [st for m in messages if m.is_user for s in m.sentences if (st := _instruction(m, s))]
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
        told = Statement(first.msg, text, "events", first.day, first.names)
        day = first.day.isoformat() if first.day else ""
        key = slugify(f"{day} {' '.join(topics.key_topics(first.text))}")
        memories.append(_memory("events", key, subject, [told]))
    return {"memories": memories}


def extract_procedure(variables: dict[str, Any]) -> dict[str, Any]:
    messages = load_messages(variables.get("messages"))
    tools = load_tools(variables.get("tools"))
    memories: list[dict[str, Any]] = []
    for mem in map(case_memory, find_cases(messages)):
        key, n = mem["routing_key"], 2
        while any(m["routing_key"] == mem["routing_key"] for m in memories):  # the same slug
            mem["routing_key"] = f"{key}-{n}"
            n += 1
        memories.append(mem)
    memories.extend(extract_patterns(messages, tools))
    memories.extend(extract_skills(messages, tools))
    return {"memories": memories}
