"""Named entities: people, organisations, places, projects and products the user talks about.

Candidates are capitalised (multi-)word names not at sentence start (or at sentence start when
the same name also appears mid-sentence / is multi-word / carries a cue). A candidate becomes a
memory when the USER mentions it and it is salient: typed by a cue ("my sister Hannah",
"project Falcon", "at Northwind", "in Porto", "X Inc"), multi-word, or mentioned in ≥ 2
messages. The sentences that mention it become its content, with their message ids.

Not facts: a name used to address someone ("Hey Mel!", "Thanks, Melanie!" — `is_address`), and
an entity the user only asks about: it needs at least one statement of the user.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from ctxpipe.providers.rules.dates import absolutize, find_dates
from ctxpipe.providers.rules.grammar import tense, to_third_person
from ctxpipe.providers.rules.inputs import Msg, anchor_for
from ctxpipe.providers.rules.patterns import (
    GENERIC_ACRONYMS,
    IMPERATIVE_VERBS,
    NAME,
    NATIONALITIES,
    NOT_NAMES,
    PLACE_NOUNS,
    TECH,
)
from ctxpipe.providers.rules.text import (
    PHRASE_BREAKERS,
    STOPWORDS,
    normalize_space,
    slugify,
    tokenize,
)
from ctxpipe.providers.rules.verbs import object_kind

RELATIONS = (
    "friend best friend sister brother colleague coworker co-worker manager boss wife husband "
    "partner son daughter mom mum dad mother father teammate team lead lead mentor cousin uncle "
    "aunt neighbour neighbor roommate flatmate client doctor therapist fiancé fiancée girlfriend "
    "boyfriend grandmother grandfather grandma grandpa niece nephew report tech lead cto ceo "
    "landlord coach teacher professor advisor supervisor"
).split()
_REL_ALT = "|".join(
    sorted(
        {re.escape(r) for r in RELATIONS} | {"team lead", "best friend", "tech lead"},
        key=len,
        reverse=True,
    )
)
REL_BEFORE = re.compile(rf"\b(?:my|our)\s+(?P<rel>{_REL_ALT})(?:\s*,)?\s*$", re.I)
PERSON_AFTER = re.compile(
    r"^\s*(?:'s\b|\s*(?:said|says|told|asks|asked|thinks|thought|suggested|wants|wanted|is getting|"
    r"got|mentioned|recommended|called|texted|emailed|reviewed|helped|is visiting))",
    re.I,
)
PROJECT_BEFORE = re.compile(r"\b(?:project|codename|repo|repository)\s*$", re.I)
PROJECT_AFTER = re.compile(
    r"^\s+(?:project|repo|service|app|codebase|pipeline|migration|"
    r"dashboard|library|package)\b",
    re.I,
)
ORG_SUFFIX = re.compile(
    r"\b(?:Inc|Corp|Corporation|Ltd|LLC|GmbH|Labs|Bank|University|College|"
    r"Institute|Group|Technologies|Systems|Analytics|Traders|Foundation|"
    r"Hospital|School|Agency|Studio|Studios|Company|AG|SA|Software|Health)\b"
)
WORK_CONTEXT = re.compile(
    r"\b(?:work|works|worked|working|job|joined|join|joining|hired|"
    r"intern|employer|company|office|team at|contract)\b",
    re.I,
)
ORG_BEFORE = re.compile(
    r"\b(?:at|for|joined|join|joining|from|with|left|leaving)\s+(?:the\s+)?$", re.I
)
PLACE_BEFORE = re.compile(
    r"\b(?:in|to|from|near|visit|visiting|visited|around|across|through)\s+(?:the\s+)?$", re.I
)
STRONG_PLACE_BEFORE = re.compile(
    r"\b(?:live|lives|living|lived|based|moved|relocated|trip|flew|fly|flying|"
    r"travel(?:l?ing)?|holiday|vacation)\s+(?:in|to|at)\s+(?:the\s+)?$",
    re.I,
)
PLACE_NAME_HEAD = re.compile(
    r"\b(?:Museum|Park|Airport|Station|Street|Square|Bridge|Beach|Lake|Mountains?|Islands?|"
    r"Castle|Cathedral|Gallery|Zoo|Stadium|Hall|Centre|Center|Market)$"
)
# A name used to address someone — "Hey Mel!", "Thanks, Melanie!", "Wow, Mel, that's great",
# "Glad you agree, Caroline.", "Melanie, look!" — is a form of address, not a statement about
# them: it stands between a sentence start, a comma or one opening word and a punctuation mark,
# and is not an item of a list ("Paris, London, and Rome").
_ADDRESS_AFTER = re.compile(r"^\s*(?:[,!?.;:]|$)")
_ADDRESS_BEFORE = re.compile(r"[,;:!?.]\s*$")
_OPENING_WORD = re.compile(r"^\W*(?P<w>[A-Za-z]+)[\s,]*$")
_LIST_AFTER = re.compile(r"^\s*,\s*(?:and\b|or\b|(?!I\b|I['’])[A-Z])")
# words that take the person spoken to right after them ("thanks Mel", "hi Ann")
_ADDRESS_WORDS = re.compile(
    r"\b(?:hey|hi|hello|thanks|thank you|bye|goodbye|dear|congrats|congratulations)\s*,?\s*$",
    re.I,
)
_LIST_BEFORE = re.compile(r"\w\s+[A-Z][\w'’-]*\s*,\s*$|\b(?:and|or)\s*$")
_NAME_TOKEN = re.compile(r"[A-Z][\w&'’-]*(?:\.[A-Za-z]+)*|[A-Z]{2,}\d*")
_CONNECTOR = re.compile(r"^\s+(?:of|de|da|del|von|van|&)\s+$|^\s+$")


@dataclass
class Mention:
    name: str
    msg: Msg
    sentence: str
    start: int
    end: int


@dataclass
class Entity:
    name: str
    kind: str = ""
    relation: str = ""
    cue: bool = False
    mentions: list[Mention] = field(default_factory=list)
    scores: dict[str, float] = field(default_factory=dict)

    def vote(self, kind: str, weight: float) -> None:
        self.scores[kind] = self.scores.get(kind, 0.0) + weight


def _raw_names(sentence: str) -> list[tuple[str, int, int]]:
    """Maximal capitalised sequences (allowing 'of', '&' connectors)."""
    toks = [(m.group(0), m.start(), m.end()) for m in _NAME_TOKEN.finditer(sentence)]
    out: list[tuple[str, int, int]] = []
    i = 0
    while i < len(toks):
        word, start, end = toks[i]
        if word in NOT_NAMES or word.rstrip("'’s") in NOT_NAMES:
            i += 1
            continue
        j = i
        while j + 1 < len(toks):
            gap = sentence[toks[j][2] : toks[j + 1][1]]
            if not _CONNECTOR.match(gap) or toks[j + 1][0] in NOT_NAMES:
                break
            j += 1
        name = sentence[start : toks[j][2]]
        out.append((re.sub(r"['’]s$", "", name), start, toks[j][2]))
        i = j + 1
    return out


def _valid(name: str) -> bool:
    low = name.lower()
    return not (
        name in GENERIC_ACRONYMS
        or low in STOPWORDS
        or low in NATIONALITIES
        or len(name) < 2
        or name.isdigit()
    )


def _is_sentence_start(sentence: str, start: int) -> bool:
    return not re.search(r"[A-Za-z0-9]", sentence[:start])


def is_address(sentence: str, start: int, end: int) -> bool:
    """Whether the name at sentence[start:end] addresses someone instead of naming a topic."""
    # only the nearby words matter (and a bounded window keeps this linear in the text)
    head = start <= 80  # the sentence start lies inside the window
    before, after = sentence[max(0, start - 80) : start], sentence[end : end + 80]
    if not _ADDRESS_AFTER.match(after) or _LIST_AFTER.match(after) or _LIST_BEFORE.search(before):
        return False
    if _ADDRESS_BEFORE.search(before) or _ADDRESS_WORDS.search(before):
        return True
    if head and not before.strip():
        return True
    opening = _OPENING_WORD.match(before) if head else None  # "Hey Mel!", not "Visited Porto!"
    return opening is not None and not opening.group("w").lower().endswith(("ed", "ing"))


def _is_question(sentence: str) -> bool:
    return sentence.rstrip(" \"'’”)").endswith("?")


def _self_names(messages: list[Msg]) -> set[str]:
    out: set[str] = set()
    for m in messages:
        if m.is_user:
            lead = r"\b(?:(?i:my name is|call me)|I'm|I am)"
            pattern = rf"{lead}\s+({NAME})(?=\s*(?:[,.!]|$|and\b))"
            for hit in re.finditer(pattern, m.content.replace("’", "'")):
                out.add(hit.group(1))
                out.update(hit.group(1).split())
    return out


def _common_word(word: str, lowercase_vocab: set[str]) -> bool:
    low = word.lower()
    return low in PHRASE_BREAKERS or low in IMPERATIVE_VERBS or low in lowercase_vocab


def names_in(sentence: str, lowercase_vocab: set[str] | None = None) -> list[tuple[str, int, int]]:
    """Candidate names of one sentence; a sentence-initial common word is peeled off."""
    vocab = lowercase_vocab or set()
    out: list[tuple[str, int, int]] = []
    for name, st, en in _raw_names(sentence):
        if _is_sentence_start(sentence, st) and " " in name:
            first = name.split(" ", 1)[0]
            if _common_word(first, vocab):
                name = name.split(" ", 1)[1]
                st = en - len(name)
        if _valid(name):
            out.append((name, st, en))
    return out


_WINDOW = 120  # characters around a name that its cues are read from (linear on long text)


def collect(messages: list[Msg]) -> dict[str, Entity]:
    mid_sentence: set[str] = set()
    raw: list[tuple[str, Msg, str, int, int]] = []
    vocab = {t for m in messages for t in tokenize(m.content) if t.islower()}
    lower_words = {w for m in messages for w in re.findall(r"\b[a-z][a-z]+\b", m.content)}
    vocab &= lower_words
    for msg in messages:
        for s in msg.sentences:
            for name, st, en in names_in(s, vocab):
                raw.append((name, msg, s, st, en))
                if not _is_sentence_start(s, st):
                    mid_sentence.add(name)
    selves = _self_names(messages)
    entities: dict[str, Entity] = {}
    for name, msg, s, st, en in raw:
        before, after = s[max(0, st - _WINDOW) : st], s[en : en + _WINDOW]
        typed = bool(
            REL_BEFORE.search(before) or PROJECT_BEFORE.search(before) or ORG_SUFFIX.search(name)
        )
        if (
            _is_sentence_start(s, st)
            and name not in mid_sentence
            and " " not in name
            and not typed
            and not PERSON_AFTER.match(after)
        ):
            continue
        if name in selves or is_address(s, st, en):
            continue
        ent = entities.setdefault(name, Entity(name))
        ent.mentions.append(Mention(name, msg, s, st, en))
        _classify(ent, s, before, after)
    return _fold_aliases(entities)


@functools.lru_cache(maxsize=4096)
def _about_work(sentence: str) -> bool:
    """Cached: every name of a sentence asks it."""
    return bool(WORK_CONTEXT.search(sentence))


@dataclass(frozen=True)
class Cues:
    """What one mention's context says of its name: votes per kind, a relation ("sister"),
    and whether any of it is a cue strong enough to keep the name."""

    votes: tuple[tuple[str, float], ...]
    relation: str
    cue: bool


@functools.lru_cache(maxsize=4096)
def cues(name: str, sentence: str, before: str, after: str) -> Cues:
    """The cues of a mention of `name` in `sentence` between `before` and `after`. Cached: a
    name said over and over in the same words is read once."""
    votes: list[tuple[str, float]] = []
    relation = ""
    cue = False
    rel = REL_BEFORE.search(before)
    if rel:
        relation = rel.group("rel").lower()
        votes.append(("person", 3))
        cue = True
    if PERSON_AFTER.match(after):
        votes.append(("person", 1.5))
    if PROJECT_BEFORE.search(before) or PROJECT_AFTER.match(after):
        votes.append(("project", 3))
        cue = True
    if ORG_SUFFIX.search(name):
        votes.append(("organisation", 3))
        cue = True
    # the verb that governs the name decides first: "moved from Berlin" is a place even in a
    # sentence about work, "joined Initech" an organisation
    governed = object_kind(sentence, before)
    if governed:
        votes.append((governed, 3))
        cue = True
    if ORG_BEFORE.search(before) and governed != "place":
        votes.append(("organisation", 2 if _about_work(sentence) else 0.8))
        cue = cue or _about_work(sentence)
    if STRONG_PLACE_BEFORE.search(before) or PLACE_NAME_HEAD.search(name):
        votes.append(("place", 2.5))
        cue = True
    if PLACE_BEFORE.search(before) and governed != "organisation":
        votes.append(("place", 0.5 if _about_work(sentence) else 1.5))
        cue = cue or not _about_work(sentence)
    if re.search(r"[a-z][A-Z]|\d|\.|^[A-Z]{2,}$", name):
        votes.append(("product", 1))
    if name.lower() in TECH or name.split()[0].lower() in TECH:
        votes.append(("product", 4))
    near = sentence[sentence.find(name) :][:80]
    if re.search(rf"{re.escape(name)}\s+(?:is|was)\s+an?\b", near) and PLACE_NOUNS.search(near):
        votes.append(("place", 2.5))
    return Cues(tuple(votes), relation, cue)


def _classify(ent: Entity, sentence: str, before: str, after: str) -> None:
    found = cues(ent.name, sentence, before, after)
    for kind, weight in found.votes:
        ent.vote(kind, weight)
    ent.relation = ent.relation or found.relation
    ent.cue = ent.cue or found.cue


def _fold_aliases(entities: dict[str, Entity]) -> dict[str, Entity]:
    """'Acme' folds into 'Acme Analytics', 'Falcon' into 'Project Falcon' (word-boundary)."""
    names = sorted(entities, key=len, reverse=True)
    for short in sorted(entities, key=len):
        for long in names:
            if long == short or short not in entities or long not in entities:
                continue
            if re.search(rf"(?:^|\s){re.escape(short)}(?:\s|$)", long):
                target, src = entities[long], entities.pop(short)
                target.mentions.extend(src.mentions)
                for k, v in src.scores.items():
                    target.vote(k, v)
                target.relation = target.relation or src.relation
                target.cue = target.cue or src.cue
                break
    return entities


def _display(name: str) -> str:
    return re.sub(r"^(?:Project|The)\s+", "", name) or name


def _sentence_line(m: Mention, session_time: Any) -> tuple[str, str]:
    anchor: date | None = anchor_for(m.msg, session_time)
    dates = find_dates(m.sentence, anchor, tense(m.sentence))
    absolute = absolutize(m.sentence, dates)
    told = to_third_person(absolute) if m.msg.is_user else f"(assistant) {absolute}"
    return normalize_space(told), normalize_space(m.sentence)


def extract_entities(messages: list[Msg], session_time: Any) -> list[dict[str, Any]]:
    memories: list[dict[str, Any]] = []
    lines: dict[tuple[str, str], tuple[str, str]] = {}  # a sentence is told once, whoever it names

    def line_of(m: Mention) -> tuple[str, str]:
        key = (m.msg.id, m.sentence)
        if key not in lines:
            lines[key] = _sentence_line(m, session_time)
        return lines[key]

    for ent in collect(messages).values():
        # an entity needs a statement of the user about it, not only a question
        stated = [m for m in ent.mentions if m.msg.is_user and not _is_question(m.sentence)]
        if not stated:
            continue
        n_msgs = len({m.msg.id for m in ent.mentions})
        if not (ent.cue or n_msgs >= 2 or " " in ent.name):
            continue
        kind = max(ent.scores, key=lambda k: ent.scores[k]) if ent.scores else "thing"
        seen: set[str] = set()
        overview = [f"- type: {kind}"]
        if ent.relation:
            overview.append(f"- relation: the user's {ent.relation}")
        content: list[str] = []
        refs: list[str] = []
        for m in sorted(ent.mentions, key=lambda x: x.msg.index):
            told, quote = line_of(m)
            if told.lower() in seen:
                continue
            seen.add(told.lower())
            overview.append(f"- {told} [{m.msg.id}]")
            content.append(f'- {told} [{m.msg.id}] — "{quote[:200]}"')
            if m.msg.id not in refs:
                refs.append(m.msg.id)
        told_lines = [line for line in overview if line.endswith("]")]
        user_lines = [
            line
            for line in told_lines
            if not line.startswith("- (assistant)") and not line.rsplit(" [", 1)[0].endswith("?")
        ]
        pick = (user_lines or told_lines or [""])[0]
        first = pick[2:].rsplit(" [", 1)[0] if pick else ""
        label = f"{_display(ent.name)} ({kind}" + (
            f", the user's {ent.relation})" if ent.relation else ")"
        )
        conf = 0.85 if ent.cue else 0.7 if n_msgs >= 2 else 0.6
        memories.append(
            {
                "category": "entities",
                "routing_key": slugify(_display(ent.name)),
                "abstract": f"{label}: {first}" if first else label,
                "overview": "\n".join(overview),
                "content": "\n".join(content),
                "confidence": conf,
                "source_refs": refs,
            }
        )
    return memories
