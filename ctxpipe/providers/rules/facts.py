"""Fact lines: the bullet format extractors emit and the merge policy reads back.

A fact line is ``- <predicate> <object> [m3, m7] — "evidence" (valid from <date> until <date>)
(superseded: <newer fact>)`` (one line; the validity annotation: `ctxpipe.core.validity`).
The predicate decides how two facts about the same attribute interact when merged:
single-valued attributes (job, home, name…) conflict, multi-valued ones (tools, hobbies…)
accumulate, and opposite polarities on the same object ("likes X" / "dislikes X") conflict.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from ctxpipe.core.validity import Validity, split_annotation
from ctxpipe.providers.rules.text import content_tokens, normalize_space

# predicate → attribute group (facts of a single-valued group conflict with each other)
SINGLE_VALUED: dict[str, str] = {
    "is named": "name",
    "works as": "occupation",
    "works at": "occupation",
    "works for": "occupation",
    "lives in": "residence",
    "is based in": "residence",
    "is aged": "age",
    "is married to": "spouse",
    # what the user's job is, in the user's own verb ("leads the data platform team")
    "leads": "occupation",
    "manages": "occupation",
    "heads": "occupation",
    "oversees": "occupation",
}
# a fact that ends a single-valued attribute for one object ("no longer works at Acme")
ENDS: dict[str, str] = {
    "no longer works at": "occupation",
    "no longer works for": "occupation",
    "no longer lives in": "residence",
}
EMPLOYER_ONLY = frozenset({"works at", "works for"})
POSITIVE = ("prefers", "would rather", "likes", "loves", "enjoys", "wants", "always")
NEGATIVE = ("dislikes", "hates", "can't stand", "avoids", "never", "does not want")
MULTI_VALUED = (
    "has been",
    "has",
    "uses",
    "speaks",
    "studied",
    "plays",
    "is from",
    "is",
    "was",
    "mentioned",
)
# longest first so "works as" wins over "works", "is based in" over "is"
PREDICATES: tuple[str, ...] = tuple(
    sorted(
        set(SINGLE_VALUED) | set(ENDS) | set(POSITIVE) | set(NEGATIVE) | set(MULTI_VALUED), key=len
    )[::-1]
)
_LINE_RE = re.compile(
    r"^\s*[-*•]\s+(?P<body>.*?)"
    r"(?:\s+\[(?P<refs>[^\]]*)\])?"
    r"(?:\s+—\s+(?P<evidence>\".*?\"))?\s*$"
)


@dataclass
class Fact:
    """One parsed bullet line (or a free-text line when `bullet` is False)."""

    text: str
    refs: list[str] = field(default_factory=list)
    evidence: str = ""
    superseded: str = ""
    bullet: bool = True
    valid_from: str = ""  # ISO date of the session it was learned in ("" = not recorded)
    valid_to: str = ""  # ISO date of the session of the fact that replaced it

    @property
    def active(self) -> bool:
        return not self.superseded and not self.valid_to

    @property
    def validity(self) -> Validity:
        return Validity(self.valid_from, self.valid_to, self.superseded)

    @property
    def predicate(self) -> str:
        return split_predicate(self.text)[0]

    @property
    def obj(self) -> str:
        return split_predicate(self.text)[1]

    def copy(self) -> Fact:
        """A copy whose refs can grow without changing this line's."""
        return Fact(
            self.text,
            list(self.refs),
            self.evidence,
            self.superseded,
            self.bullet,
            self.valid_from,
            self.valid_to,
        )

    def render(self) -> str:
        if not self.bullet:
            return self.text
        out = f"- {self.text}"
        if self.refs:
            out += f" [{', '.join(self.refs)}]"
        if self.evidence:
            out += f" — {self.evidence}"
        return out + self.validity.render()


@functools.lru_cache(maxsize=65536)
def split_predicate(text: str) -> tuple[str, str]:
    """('works as', 'a data engineer at Acme') — or ('key', value) for 'key: value' lines.
    Cached: merging compares every new line with every old one."""
    low = text.lower()
    for p in PREDICATES:
        if low.startswith(p + " "):
            return p, text[len(p) + 1 :].strip()
    m = re.match(r"^([A-Za-z][\w /'-]{0,30}):\s+(.+)$", text)
    if m:
        return m.group(1).lower().strip() + ":", m.group(2).strip()
    return "", text


def parse_lines(text: str) -> list[Fact]:
    """Facts of a markdown block; non-bullet lines are kept as free-text facts."""
    out: list[Fact] = []
    for raw in (text or "").splitlines():
        if not raw.strip():
            continue
        head, validity = split_annotation(raw)
        m = _LINE_RE.match(head)
        if not m:
            out.append(Fact(text=raw.rstrip(), bullet=False))
            continue
        refs = [r.strip() for r in (m.group("refs") or "").split(",") if r.strip()]
        out.append(
            Fact(
                text=normalize_space(m.group("body")),
                refs=refs,
                evidence=m.group("evidence") or "",
                superseded=validity.superseded,
                valid_from=validity.valid_from,
                valid_to=validity.valid_to,
            )
        )
    return out


def render_lines(facts: list[Fact]) -> str:
    return "\n".join(f.render() for f in facts)


def group_of(predicate: str) -> str | None:
    if predicate in SINGLE_VALUED:
        return SINGLE_VALUED[predicate]
    if predicate.endswith(":") and predicate[:-1] not in MULTI_KEYS:
        return predicate
    return None


def attribute_of(predicate: str) -> str | None:
    """The single-valued attribute a fact states or ends (None for multi-valued facts)."""
    return ENDS.get(predicate) or group_of(predicate)


def _names_org(fact: Fact) -> bool:
    return fact.predicate in EMPLOYER_ONLY or bool(re.search(r"\b(?:at|for) [A-Z]", fact.obj))


def attribute_conflict(old: Fact, new: Fact) -> bool:
    """Does `new` replace `old` as the value of one single-valued attribute?

    Two values of the same attribute conflict ("lives in Berlin" / "lives in Munich"), except
    that a job title without an employer and an employer without a title describe the same job
    ("works at Acme" / "manages a team of five"). A fact that ends an attribute ("no longer
    works at Acme") replaces only the facts that name its object, and is itself replaced when
    that object comes back ("works at Acme" again)."""
    po, pn = old.predicate, new.predicate
    attribute = attribute_of(po)
    if attribute is None or attribute != attribute_of(pn):
        return False
    if po in ENDS or pn in ENDS:
        if po in ENDS and pn in ENDS:
            return False
        ended, stated = (new, old) if pn in ENDS else (old, new)
        return bool(object_tokens(ended)) and object_tokens(ended) <= fact_tokens(stated)
    if attribute == "occupation" and (po in EMPLOYER_ONLY) != (pn in EMPLOYER_ONLY):
        role_only = new if po in EMPLOYER_ONLY else old
        return _names_org(role_only)
    return True


# "key: value" lines whose key accumulates values instead of replacing them
MULTI_KEYS = frozenset({"best for", "common failures", "mentioned", "note", "notes", "evidence"})


def polarity(predicate: str) -> int:
    if predicate in POSITIVE:
        return 1
    if predicate in NEGATIVE:
        return -1
    return 0


@functools.lru_cache(maxsize=65536)
def _token_set(text: str) -> frozenset[str]:
    return frozenset(content_tokens(text))


def fact_tokens(fact: Fact) -> frozenset[str]:
    return _token_set(fact.text)


def object_tokens(fact: Fact) -> frozenset[str]:
    return _token_set(fact.obj)


def synthesize(subject: str, facts: list[Fact], max_chars: int = 240) -> str:
    """One-line synthesis: '<subject>: fact; fact; fact (+N more)'."""
    active = [f.text.rstrip(".") for f in facts if f.active and f.bullet and f.text]
    if not active:
        active = [f.text.rstrip(".") for f in facts if f.text and f.active]
    body: list[str] = []
    for text in active:
        if body and len("; ".join([*body, text])) > max_chars:
            break
        body.append(text)
    more = len(active) - len(body)
    line = "; ".join(body) + (f" (+{more} more)" if more > 0 else "")
    line = line or "no details"
    return f"{subject}: {line}" if subject else line[:1].upper() + line[1:]
