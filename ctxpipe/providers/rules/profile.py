"""`extraction.profile`: who the user is, from first-person statements in USER messages.

Recognised (per sentence, case-insensitive except for names):
name ("my name is X", "call me X", "I'm X,"), occupation ("I'm a/an ROLE (at ORG)",
"I work as/at/for", "I joined ORG (as ROLE)", "my job/role is"), residence ("I live in",
"I'm based in", "I moved to"), origin ("I'm from", "I grew up in"), experience ("I've been
X for N years", "N years of experience in X"), stack ("I use", "I work with", "I code in",
"my stack is", "my main editor is"), languages, age, family ("I have two kids", "my
sister Hannah"), hobbies ("I play", "I'm into", "my hobby is", "in my spare time I …",
"I run/swim/climb …"), education ("I studied", "I have a degree in") and other identity
statements ("I'm a vegetarian", "I'm a morning person").

Output: ONE profile memory per commit; each fact is a line ``- <predicate> <object> [id]``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ctxpipe.providers.rules.changes import life_facts
from ctxpipe.providers.rules.facts import (
    Fact,
    attribute_conflict,
    attribute_of,
    render_lines,
    synthesize,
)
from ctxpipe.providers.rules.inputs import Msg, load_messages
from ctxpipe.providers.rules.patterns import (
    NAME,
    NATIONALITIES,
    NOT_NAMES,
    clip_clause,
    cut_dates,
    role_kind,
)
from ctxpipe.providers.rules.text import is_hedged, is_question, normalize_space

ADV = r"(?:(?i:now|currently|still|also|actually|mostly|mainly) )?"
I_AM = r"\bI(?:'m| am)(?: (?i:currently|now|actually|also|still))?"
ROLE = (
    r"(?P<role>(?i:an?|the) [\w' /-]{1,60}?)(?=\s+(?i:at|for|with|in|on|from|of|and|but|who|"
    r"since|because)\b|[,.;:!?)(]|$)"
)
ORG = rf"(?P<org>{NAME})"
PREP_ORG = rf"(?:\s+(?i:at|for|with)\s+{ORG})?(?:\s+in\s+(?P<place>{NAME}))?"
REST = r"(?P<obj>[^.;!?]+)"

Builder = Callable[[re.Match[str]], str | None]


def _role_line(m: re.Match[str]) -> str | None:
    gd = m.groupdict()
    role = cut_dates((gd.get("role") or "").strip())
    org = (gd.get("org") or "").strip()
    where = f" at {org}" if org else ""
    if gd.get("place"):
        where += f" in {gd['place']}"
    if role:
        kind = role_kind(role)
        if kind == "":
            return None
        return ("is " if kind == "identity" else "works as ") + role + where
    return f"works{where}" if org else None


def _obj(prefix: str, group: str = "obj") -> Builder:
    def build(m: re.Match[str]) -> str | None:
        obj = clip_clause(m.group(group))
        if not obj or re.match(r"^(?i:it|this|that|them|those|these|the same)\b", obj):
            return None
        return f"{prefix} {obj}"

    return build


def _name(m: re.Match[str]) -> str | None:
    name = m.group("name")
    if name.split()[0] in NOT_NAMES or name.lower() in NATIONALITIES:
        return None
    return f"is named {name}"


def _nationality(m: re.Match[str]) -> str | None:
    word = m.group("nat")
    return f"is {word}" if word.lower() in NATIONALITIES else None


def _family(m: re.Match[str]) -> str | None:
    rel = m.group("rel").lower()
    name = m.group("fname")
    if name and name in NOT_NAMES:
        name = None
    if not name and rel not in {"wife", "husband", "partner", "kids", "children", "dog", "cat"}:
        return None
    article = "" if rel.endswith(("s", "ren")) else "a "
    return f"has {article}{rel}" + (f" named {name}" if name else "")


def _hobby_verb(m: re.Match[str]) -> str | None:
    verb = m.group("verb").lower()
    rest = clip_clause(m.group("rest") or "")
    third = verb + ("es" if verb.endswith(("sh", "ch", "s")) else "s")
    return f"{third} {rest}".strip() if rest else None


RULES: list[tuple[re.Pattern[str], Builder, float]] = [
    (re.compile(rf"\b(?i:my name is|my name's|call me)\s+(?P<name>{NAME})"), _name, 0.95),
    (re.compile(rf"{I_AM}\s+(?P<name>{NAME})(?=\s*(?:,|\.|!|$|\s(?i:here|and I)\b))"), _name, 0.9),
    (re.compile(rf"{I_AM}\s+{NAME},\s+{ROLE}{PREP_ORG}"), _role_line, 0.9),
    (re.compile(rf"{I_AM}\s+(?P<nat>[A-Z][a-z]+)\b(?!\s+[A-Z])"), _nationality, 0.85),
    (
        re.compile(rf"\bI {ADV}(?i:work|am working|'m working) as {ROLE}{PREP_ORG}"),
        _role_line,
        0.95,
    ),
    (
        re.compile(
            rf"\bI {ADV}(?i:work|am working|'m working|'ve worked|have worked) (?i:at|for) "
            rf"{ORG}(?:\s+(?i:as)\s+{ROLE})?"
        ),
        _role_line,
        0.9,
    ),
    (
        re.compile(
            rf"\bI(?: (?i:have|'ve))?(?: (?i:just|recently|finally))? (?i:joined|started "
            rf"(?:a new job |working )?at|got a job at|was hired by|moved over to) "
            rf"{ORG}(?![\w'-]|\s+(?i:for|to|on)\b)(?:\s+(?i:as)\s+{ROLE})?"
        ),
        _role_line,
        0.9,
    ),
    (
        re.compile(rf"\bI(?: (?i:just|recently))? (?i:started|began) (?i:as) {ROLE}{PREP_ORG}"),
        _role_line,
        0.9,
    ),
    (re.compile(rf"{I_AM}\s+{ROLE}{PREP_ORG}"), _role_line, 0.85),
    (
        re.compile(rf"{I_AM}\s+{ROLE}{PREP_ORG},?\s+(?i:working|focusing|focused) on " + REST),
        _obj("works on"),
        0.85,
    ),
    (
        re.compile(
            r"\bI(?:'m| am)(?: (?i:a|strictly|mostly|fully))? (?P<obj>(?i:vegetarian|vegan|"
            r"pescatarian|gluten-free|lactose intolerant|teetotal|left-handed|colou?r-?blind"
            r"|diabetic|celiac|coeliac))\b"
        ),
        _obj("is"),
        0.9,
    ),
    (
        re.compile(r"\b(?i:my (?:job|role|title|position|job title) is)\s+" + REST),
        _obj("works as"),
        0.85,
    ),
    (
        re.compile(
            rf"\bI(?:'m| am|'ve| have)?(?: (?i:still|currently|now|also))? ?(?i:live|living|"
            rf"based|been living|reside) "
            rf"(?i:in|out of) (?P<obj>{NAME})"
        ),
        _obj("lives in"),
        0.9,
    ),
    (
        re.compile(rf"\bI(?: (?i:just|recently))? (?i:moved|relocated) to (?P<obj>{NAME})"),
        _obj("lives in"),
        0.8,
    ),
    (
        re.compile(
            rf"\bI(?:'m| am| come) (?i:originally )?(?i:from) (?P<obj>{NAME})"
            rf"|\bI (?i:grew up in) (?P<obj2>{NAME})"
        ),
        lambda m: f"is from {m.group('obj') or m.group('obj2')}",
        0.85,
    ),
    (
        re.compile(
            r"\bI(?:'ve| have) been (?P<act>[^.,;!?]+?) for (?P<dur>(?:(?i:over|about|"
            r"almost|nearly|more than|around|roughly) )?\S+ (?i:years?|months?|decades?))"
        ),
        lambda m: f"has been {m.group('act').strip()} for {m.group('dur')}",
        0.9,
    ),
    (
        re.compile(
            r"\bI(?:'ve| have) (?P<n>\S+ (?:\+ )?years?) of (?i:experience|exp) "
            r"(?i:in|with|as|doing) (?P<obj>[^.;!?]+)"
        ),
        lambda m: f"has {m.group('n')} of experience in {clip_clause(m.group('obj'))}",
        0.9,
    ),
    (
        re.compile(
            r"\bI (?:(?i:mostly|mainly|usually|primarily|mostly just|currently|also) )?"
            r"(?i:use|work with|code in|program in|write code in|develop in) " + REST
        ),
        _obj("uses"),
        0.8,
    ),
    (
        re.compile(r"\b(?i:my (?:tech |daily |usual )?(?:tech )?stack (?:is|includes))\s+" + REST),
        _obj("uses"),
        0.85,
    ),
    (
        re.compile(
            r"\b(?i:my (?:main|primary|daily|go-to|work) (?P<what>language|editor|ide|"
            r"laptop|machine|os|tool|database|shell) is)\s+" + REST
        ),
        lambda m: f"uses {clip_clause(m.group('obj'))} as main {m.group('what').lower()}",
        0.85,
    ),
    (re.compile(r"\bI (?i:speak) " + REST), _obj("speaks"), 0.9),
    (re.compile(r"\bI (?i:teach|lecture in|tutor) " + REST), _obj("teaches"), 0.9),
    (
        re.compile(
            r"\bI(?:'m| am| just turned| turned) (?P<age>\d{1,2})(?: (?i:years old|yo)\b"
            r"|(?=[,.!]|$))"
        ),
        lambda m: f"is aged {m.group('age')}",
        0.9,
    ),
    (
        re.compile(r"\bI(?:'m| am) (?i:married)(?: to (?P<obj>[A-Z]\w+))?"),
        lambda m: "is married" + (f" to {m.group('obj')}" if m.group("obj") else ""),
        0.9,
    ),
    (
        re.compile(
            r"\bI(?: have|'ve got| have got|'ve) (?P<obj>(?i:a|an|one|two|three|four|\d+) (?:\w+ )?"
            r"(?i:kids?|children|sons?|daughters?|twins|sisters?|brothers?|siblings|"
            r"dogs?|cats?|pets?|grandchildren|grandkids)\b(?: (?i:named|called) [A-Z]\w+"
            r"(?: and [A-Z]\w+)?)?)"
        ),
        _obj("has"),
        0.9,
    ),
    (
        re.compile(
            r"\b(?i:my) (?P<rel>(?i:wife|husband|partner|boyfriend|girlfriend|son|daughter|"
            r"sister|brother|mom|mum|mother|dad|father|twin|kids|children|dog|cat|"
            r"fiancée?|grandmother|grandfather|niece|nephew|cousin))"
            r"(?:,? (?P<fname>[A-Z][a-z]+))?\b"
        ),
        _family,
        0.8,
    ),
    (re.compile(r"\bI (?i:play|practice|practise) " + REST), _obj("plays"), 0.85),
    (
        re.compile(r"\b(?i:my (?:hobby is|hobbies are|hobbies include))\s+" + REST),
        _obj("has hobbies:"),
        0.9,
    ),
    (
        re.compile(r"\bI(?:'m| am) (?:(?i:really|very|big|super) )?(?i:into) " + REST),
        _obj("is into"),
        0.85,
    ),
    (
        re.compile(r"\b(?i:in my (?:free|spare) time),? I " + REST),
        _obj("in their free time:"),
        0.85,
    ),
    (
        re.compile(
            r"\bI (?P<verb>(?i:run|swim|cycle|climb|surf|paint|knit|bake|hike|ski|dance|"
            r"sing|draw|garden|fish|sail|row|box|skate)) (?P<rest>[^.;!?]*(?i:every|"
            r"weekends?|marathons?|mornings?|evenings?|regularly|club|times a week)[^.;!?]*)"
        ),
        _hobby_verb,
        0.8,
    ),
    (
        re.compile(
            r"\bI (?i:studied|majored in|graduated (?:from|in)|have an? (?:degree|phd|"
            r"master's|masters|bachelor's|ba|bsc|msc) in|did my (?:phd|masters|degree) "
            r"(?:in|at)) " + REST
        ),
        lambda m: f"studied {clip_clause(m.group('obj'))}",
        0.85,
    ),
]

# every rule starts with the user's "I" or with "my" / "call me" / "in my": a sentence
# without one of them is not read by the rules at all (one search instead of one per rule)
RULE_STARTS = (r"\bI", r"\b(?i:my", r"\b(?i:call me", r"\b(?i:in my")
RULE_GATE = re.compile(r"\bI|\b(?i:my|call me)")

PRIORITY = ["is named", "works as", "works at", "works for", "lives in", "is based in", "is from"]


def _quote(sentence: str) -> str:
    s = normalize_space(sentence).replace('"', "'")
    return f'"{s[:200]}"'


def facts_from_message(msg: Msg) -> list[tuple[Fact, float]]:
    out: list[tuple[Fact, float]] = []
    for sentence in msg.sentences:
        s = sentence.replace("’", "'")
        if is_question(s):
            continue
        found: dict[str, float] = {}
        if RULE_GATE.search(s) and not re.search(r"\b(?i:if I|when I was|used to|no longer)\b", s):
            for pattern, build, conf in RULES:
                for m in pattern.finditer(s):
                    text = build(m)
                    if text:
                        text = normalize_space(text)
                        found[text] = max(found.get(text, 0.0), conf)
        for text in life_facts(s):  # home and job in any wording (it reads negation itself)
            text = normalize_space(text)
            found[text] = max(found.get(text, 0.0), 0.85)
        if not found:
            continue
        hedge = 0.25 if is_hedged(s) else 0.0
        for text, conf in found.items():
            low = text.lower()
            if any(low != o.lower() and _subsumed(low, o.lower()) for o in found):
                continue
            out.append((Fact(text, [msg.id], _quote(s)), conf - hedge))
    return out


def _subsumed(small: str, big: str) -> bool:
    """'works at acme' is subsumed by 'works as a data engineer at acme'."""
    a, b = set(small.split()), set(big.split())
    return a <= b or (small.split(" ")[-1] == big.split(" ")[-1] and len(a - b) <= 1 < len(b - a))


def _supersede_within_session(facts: list[Fact]) -> None:
    """A later fact of the same single-valued attribute (in the order the user said them)
    replaces an earlier one: "lives in Berlin" … "lives in Munich"."""
    for i, old in enumerate(facts):
        if attribute_of(old.predicate) is None:  # multi-valued facts accumulate
            continue
        for new in facts[i + 1 :]:
            if new.obj.lower() != old.obj.lower() and attribute_conflict(old, new):
                old.superseded = f"later in the session: {new.text}"
                break


def profile_subject(facts: list[Fact]) -> str:
    names = [f.obj for f in facts if f.predicate == "is named" and f.active]
    return names[-1] if names else "User"


def profile_abstract(facts: list[Fact]) -> str:
    subject = profile_subject(facts)
    body = [f for f in order_facts(facts) if f.predicate != "is named"]
    return synthesize(subject, body or facts)


def order_facts(facts: list[Fact]) -> list[Fact]:
    def key(f: Fact) -> int:
        p = f.predicate
        return PRIORITY.index(p) if p in PRIORITY else len(PRIORITY)

    return sorted(facts, key=key)


def extract_profile(variables: dict[str, Any]) -> dict[str, Any]:
    messages = [m for m in load_messages(variables.get("messages")) if m.is_user]
    merged: dict[str, Fact] = {}
    confidence: list[float] = []
    for msg in messages:
        for fact, conf in facts_from_message(msg):
            key = fact.text.lower()
            if key in merged:
                if msg.id not in merged[key].refs:
                    merged[key].refs.append(msg.id)
                continue
            merged[key] = fact
            confidence.append(conf)
    if not merged:
        return {"memories": []}
    said = list(merged.values())  # in the order the user said them
    _supersede_within_session(said)
    facts = order_facts(said)
    order = {m.id: m.index for m in messages}
    refs = sorted({r for f in facts for r in f.refs}, key=lambda r: order.get(r, 0))
    overview = render_lines([Fact(f.text, f.refs, "", f.superseded) for f in facts])
    memory = {
        "category": "profile",
        "routing_key": "profile",
        "abstract": profile_abstract(facts),
        "overview": overview,
        "content": render_lines(facts),
        "confidence": round(min(0.95, max(0.5, max(confidence))), 2),
        "source_refs": refs,
    }
    return {"memories": [memory]}
