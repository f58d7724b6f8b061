"""Where the user lives and what job they do, from first-person clauses in any wording.

A sentence is read as clauses: a subject ("I", and for a home also "we", "my family", "my wife
and I"), the verbs it governs ("We packed up and now call Munich home" — one subject, two
verbs), each with its auxiliaries and time words ("now", "these days", "since March", "last
month"), a verb of the lexicon by meaning (`verbs.CLASSES`: residence, lead, employ, role,
leave) and an object parsed by what that verb takes: a place after a residence verb, an
organisation after an employment verb, a job title after "as" / "promoted to" / "became".

Only what holds now becomes a fact: the present of a state ("I live", "I'm heading"), or the
result of a change ("I moved to", "I joined", "I was promoted to"). A negated, hypothetical
or future clause ("I don't live", "I'd love to move", "I'm moving next year") states nothing;
"I no longer work at Acme" ends the employer ("no longer works at Acme").
"""

from __future__ import annotations

import re

from ctxpipe.providers.rules.patterns import NAME, NOT_NAMES, TECH, clip_clause, role_kind
from ctxpipe.providers.rules.verbs import CHANGES, CLASSES, class_of, forms, verb_form

GROUP_SUBJECT = (
    r"(?i:we|my family|our family|the family|my (?:wife|husband|partner|girlfriend|boyfriend|"
    r"fianc[ée]e?|kids|children) and I)"
)
SUBJECT = re.compile(
    rf"(?<![\w'])(?P<subj>I(?:'(?P<cx>m|ve|d|ll))?|{GROUP_SUBJECT}(?:'(?P<gx>re|ve|d|ll))?)"
    rf"(?![\w'])"
)
NEXT_SUBJECT = re.compile(r"(?<![\w'])(?:I|(?i:we|he|she|they|you|it))(?![\w])")
TIME = (
    r"(?i:now|just|recently|finally|officially|also|currently|still|actually|already|"
    r"eventually|then|since then|these days|nowadays|at the moment|right now|"
    r"(?:last|this|earlier this) (?:week|month|year|spring|summer|autumn|fall|winter)|"
    r"a (?:few |couple of )?(?:weeks?|months?|years?) ago|in the end|after all)"
)
AUX = r"(?i:'m|am|are|'re|have|'ve|has|been|was|were|got|get|gotten|had|'d)"
MODAL = re.compile(
    r"^(?i:would|could|might|may|will|'ll|should|shall|must|can|want|wanted|plan|planning|"
    r"hope|hoping|wish|need|going|gonna|thinking|consider|considering|'d|do|does|did|don't|"
    r"doesn't|didn't|not|never|can't|won't|wouldn't|used|use)$"
)
LEAD = re.compile(rf"\s*(?:(?:{TIME}|{AUX}),?\s+)+")
_FIRST = re.compile(r"\s*([A-Za-z']+)")
SCOPE_CHARS = 300  # a subject governs a clause, not a page: bounds the work per subject
BOUNDARY = re.compile(
    r"\s*(?:,\s*(?:and\s+|but\s+|then\s+|so\s+)?|\s+(?:and|but)\s+(?:then\s+)?|;\s*)"
)
ORG = rf"(?:the\s+)?(?P<org>{NAME})"
PLACE = rf"(?:the\s+)?(?P<place>{NAME})"
ROLE_WORDS = r"[A-Za-z][\w'/-]*"
ROLE = (
    rf"(?P<role>(?:(?i:an?|the)\s+)?{ROLE_WORDS}(?:\s+(?!(?i:at|for|with|in|on|from|and|but|who|"
    rf"since|because|now|last|this|after|before|when|by)\b){ROLE_WORDS}){{0,5}})"
)
AS_ROLE = rf"(?:,?\s+(?i:as)\s+{ROLE})"
AT_ORG = rf"(?:\s+(?i:at|for)\s+{ORG})"
TRAIL = rf"(?:\s+{TIME})*"
WORK_NOUNS = re.compile(
    r"\b(?:team|teams|group|department|division|unit|org|organi[sz]ation|company|business|"
    r"startup|firm|agency|lab|laboratory|practice|studio|shop|store|restaurant|bakery|"
    r"caf[eé]|clinic|office|branch|project|programme|program|squad|crew|staff|people|"
    r"engineers|developers|designers|researchers|analysts|employees|reports|workers|"
    r"volunteers|nurses|operations|sales|marketing|engineering|research|product|design|"
    r"support|platform|infrastructure|school|kitchen|ward)\b",
    re.I,
)
TIME_TAIL = re.compile(rf"(?:\s+(?:{TIME}|(?i:since|from|as of|starting) [^,;]+))+$")


def _first_word(text: str) -> str:
    m = _FIRST.match(text)
    return m.group(1) if m else ""


def _ok_name(name: str | None) -> bool:
    return bool(name) and name.split()[0] not in NOT_NAMES and name.lower() not in TECH  # type: ignore[union-attr]


def _role(text: str) -> str:
    role = clip_clause(TIME_TAIL.sub("", text or "").strip())
    head = re.split(r"\s+of\s+", role)[0]
    return role if role and role_kind(head) == "role" else ""


def _works(role: str, org: str | None) -> str | None:
    if org and not _ok_name(org):
        org = None
    if role:
        return f"works as {role}" + (f" at {org}" if org else "")
    return f"works at {org}" if org else None


def _chunks(scope: str) -> list[tuple[int, str]]:
    """Split a subject's scope into the verb phrases it governs; a piece not starting with a
    lexicon verb belongs to the phrase before it ("lead the data and analytics team")."""
    out: list[tuple[int, str]] = []
    start = 0
    for m in BOUNDARY.finditer(scope):
        lead = LEAD.match(scope, m.end())
        first = _FIRST.match(scope, lead.end() if lead else m.end())
        word = first.group(1) if first else ""
        if verb_form(word) or (word.lower() in {"no", "now"} and m.start() > start):
            out.append((start, scope[start : m.start()]))
            start = m.end()
    out.append((start, scope[start:]))
    return [(i, c) for i, c in out if c.strip()]


_LEADING = re.compile(rf"\s*(?:({AUX})|{TIME}|(no longer|not any ?more))\b,?")


def _verb(chunk: str, aux0: str) -> tuple[str, str, str, set[str], bool] | None:
    """(lemma, kind, rest, auxiliaries, ended) of a verb phrase, or None."""
    auxes = {aux0.lower()} if aux0 else set()
    ended = False
    text = chunk
    while True:
        m = _LEADING.match(text)
        if not m or not m.group(0).strip():
            break
        if m.group(1):
            auxes.add(m.group(1).lower())
        if m.group(2):
            ended = True
        text = text[m.end() :]
    word = _first_word(text)
    if not word or MODAL.match(word):
        return None
    readings = verb_form(word)
    if not readings:
        return None
    rest = text[text.find(word) + len(word) :]
    lemma, kind = readings[0]
    if len(readings) > 1:  # "quit", "run", "left": pick the reading the auxiliaries allow
        wanted = "participle" if auxes & PERFECT_OR_PASSIVE else "past"
        lemma, kind = next(((lem, k) for lem, k in readings if k == wanted), readings[0])
    return lemma, kind, rest, auxes, ended


PERFECT_OR_PASSIVE = frozenset(
    {"have", "'ve", "has", "was", "were", "been", "'m", "am", "are", "'re", "got", "get", "gotten"}
)
DETERMINERS = frozenset(
    """a an the my our their this two three four five six seven eight nine ten eleven twelve
    twenty thirty fifty hundred dozens several""".split()
)


def _holds_now(lemma: str, kind: str, auxes: set[str]) -> bool:
    if auxes & {"had", "'d", "'ll"}:  # "I'd live in Paris", "we'll move to Lyon"
        return False
    if kind in {"base", "third"}:
        return not auxes & {"was", "were"}
    if kind == "ing":  # "I'm heading", "I've been living"; "I'm moving" is a plan
        return bool(auxes & {"'m", "am", "are", "'re", "been"}) and lemma not in CHANGES
    if kind == "past":
        return lemma in CHANGES
    # participle: "I've moved", "I was promoted", "I'm based", "I've lived here for years"
    if lemma in {"base", "live"}:
        return not auxes & {"was", "were"}
    return lemma in CHANGES


def _residence(lemma: str, rest: str) -> str | None:
    patterns = {
        "live": rf"^\s+(?i:in|out of)\s+{PLACE}",
        "reside": rf"^\s+(?i:in)\s+{PLACE}",
        "base": rf"^\s+(?i:in|out of)\s+{PLACE}",
        "settle": rf"^(?:\s+(?i:down|here|there))?\s+(?i:in)\s+{PLACE}",
        "call": rf"^\s+{PLACE}\s+(?i:home)\b",
        "move": (
            rf"^(?:\s+(?i:back|over|out|away|abroad|permanently|house|home|all the way))*"
            rf"(?:\s+(?i:from)\s+(?:the\s+)?{NAME})?\s+(?i:to)\s+{PLACE}"
        ),
    }
    pattern = patterns.get("move" if lemma == "relocate" else lemma)
    m = re.match(pattern, rest) if pattern else None
    return m.group("place") if m and _ok_name(m.group("place")) else None


def _lead(lemma: str, rest: str) -> str | None:
    obj = clip_clause(TIME_TAIL.sub("", clip_clause(re.sub(r"^\s+(?i:up)\b", "", rest))))
    obj = TIME_TAIL.sub("", obj).strip()
    if not obj or re.match(r"(?i:to|it|this|that|them|my time|myself|out|up|into)\b", obj):
        return None
    at_org = re.search(rf"\b(?:at|for)\s+{NAME}", obj)
    if not (WORK_NOUNS.search(obj) or at_org or role_kind(obj.split(" at ")[0]) == "role"):
        return None
    first = obj.split()[0]
    if not (first.lower() in DETERMINERS or first[0].isupper() or first[0].isdigit()):
        if not WORK_NOUNS.match(first):
            return None
    if len(obj.split()) > 12:
        return None
    return f"{forms(lemma)[1]} {obj}"


ORG_THEN_ROLE = rf"{AT_ORG}(?:{TRAIL}{AS_ROLE})?"
ROLE_THEN_ORG = rf"{AS_ROLE}{AT_ORG}?"
_EMPLOY: dict[str, tuple[str, ...]] = {
    "work": (rf"^{ORG_THEN_ROLE}", rf"^{ROLE_THEN_ORG}"),
    "join": (rf"^\s+{ORG}(?![\w'-]|\s+(?i:for|to|on)\b)(?:{TRAIL}{AS_ROLE})?",),  # not "for lunch"
    "start": (
        rf"^(?:\s+(?i:a new job|a new role|a job|my new job|working|work|out))?{ORG_THEN_ROLE}",
        rf"^(?:\s+(?i:a new job|a new role|a job|my new job|out))?{ROLE_THEN_ORG}",
    ),
    "switch": (
        rf"^(?P<jobs>\s+(?i:jobs|companies|employers|teams))?\s+(?i:to)\s+{ORG}"
        rf"(?:{TRAIL}{AS_ROLE})?",
    ),
    "hire": (
        rf"^{AS_ROLE}(?:\s+(?i:at|by|for)\s+{ORG})?",
        rf"^\s+(?i:by|at)\s+{ORG}(?:{TRAIL}{AS_ROLE})?",
    ),
}
_EMPLOY["begin"] = _EMPLOY["start"]


def _employ(lemma: str, rest: str, scope: str) -> str | None:
    m = next(filter(None, (re.match(p, rest) for p in _EMPLOY.get(lemma, ()))), None)
    if not m:
        return None
    gd = m.groupdict()
    if lemma == "switch" and not (
        gd.get("jobs") or gd.get("role") or re.search(r"(?i)\bjob", scope)
    ):
        return None  # "switched to Postgres" is not a new employer
    return _works(_role(gd.get("role") or ""), gd.get("org"))


def _new_role(lemma: str, rest: str) -> str | None:
    patterns = {
        "promote": rf"^\s+(?i:to)\s+{ROLE}{AT_ORG}?",
        "become": rf"^\s+{ROLE}{AT_ORG}?",
        "take": rf"^\s+(?i:over)\s+(?i:as)\s+{ROLE}{AT_ORG}?",
    }
    m = re.match(patterns[lemma], rest)
    if not m:
        return None
    role = _role(m.group("role"))
    return _works(role, m.group("org")) if role else None


def _left(lemma: str, rest: str, scope: str) -> str | None:
    m = re.match(
        rf"^\s+(?:(?P<job>(?i:my|the) (?:job|role|position) (?:at|with)\s+)|(?i:from)\s+)?{ORG}",
        rest,
    )
    if not m or not _ok_name(m.group("org")):
        return None
    classes = {class_of(r[0]) for w in re.findall(r"[A-Za-z]+", scope) for r in verb_form(w)}
    if lemma == "lose" and not m.group("job"):
        return None  # "lost my job at X", never "lost X"
    if lemma == "leave" and not m.group("job"):
        if "residence" in classes or not classes & {"employ", "role", "lead"}:
            return None  # "left Berlin and moved to Munich": a place, not a job
    return f"no longer works at {m.group('org')}"


def _ended(lemma: str, rest: str) -> str | None:
    if lemma == "work":
        m = re.match(rf"^{AT_ORG}", rest)
        return f"no longer works at {m.group('org')}" if m and _ok_name(m.group("org")) else None
    if lemma == "live":
        place = _residence(lemma, rest)
        return f"no longer lives in {place}" if place else None
    return None


def _nominal(sentence: str) -> list[tuple[int, str]]:
    """'My new home is Toronto', 'Munich is home now', 'home is now Lisbon'."""
    out: list[tuple[int, str]] = []
    patterns = (
        rf"\b(?i:my|our) (?i:new )?(?i:home|base|home base) (?i:is|'s)(?: (?i:now))?"
        rf"(?: (?i:in))? {PLACE}",
        rf"(?<![\w'])(?i:home is)(?: (?i:now))?(?: (?i:in))? {PLACE}",
        rf"{PLACE} (?i:is)(?: (?i:now))? (?i:(?:my|our) (?:new )?)?(?i:home)(?: (?i:now))?\s*[.!,]",
    )
    for pattern in patterns:
        for m in re.finditer(pattern, sentence):
            if _ok_name(m.group("place")):
                out.append((m.start(), f"lives in {m.group('place')}"))
    return out


_WORDS = re.compile(r"[a-z]+")
ALL_FORMS = frozenset(
    form for lemmas in CLASSES.values() for lemma in lemmas for form in forms(lemma)
)
CONDITIONAL = re.compile(r"\b(?i:if I|if we|when I was|in case)\b")


def life_facts(sentence: str) -> list[str]:
    """Residence / occupation facts a sentence states about the user now, in text order."""
    s = sentence.replace("’", "'")
    words = set(_WORDS.findall(s.lower()))
    if not (words & ALL_FORMS or "home" in words) or CONDITIONAL.search(s):
        return []
    found: list[tuple[int, str]] = _nominal(s)
    for sm in SUBJECT.finditer(s):
        group = not sm.group("subj").startswith("I")
        nxt = NEXT_SUBJECT.search(s, sm.end())
        scope = s[sm.end() : min(nxt.start() if nxt else len(s), sm.end() + SCOPE_CHARS)]
        aux0 = (
            "'" + (sm.group("cx") or sm.group("gx")) if (sm.group("cx") or sm.group("gx")) else ""
        )
        # "my wife and I" ends with I: the shared scope is read once, as a group's
        for offset, chunk in _chunks(scope):
            fact = _clause(chunk, aux0 if offset == 0 else "", scope, group)
            if fact:
                found.append((sm.end() + offset, fact))
    seen: set[str] = set()
    out: list[str] = []
    for _, fact in sorted(found):
        if fact.lower() not in seen:
            seen.add(fact.lower())
            out.append(fact)
    return out


def _clause(chunk: str, aux0: str, scope: str, group: bool) -> str | None:
    parsed = _verb(chunk, aux0)
    if parsed is None:
        return _be_at(chunk, aux0) if not group else None
    lemma, kind, rest, auxes, ended = parsed
    cls = class_of(lemma)
    if ended:
        return None if group else _ended(lemma, rest)
    if not _holds_now(lemma, kind, auxes):
        if lemma == "live" and kind == "past" and not auxes:  # "I lived in Rome": a past home
            place = _residence(lemma, rest)
            return f"lived in {place}" if place else None
        return None
    if cls == "residence":
        place = _residence(lemma, rest)
        return f"lives in {place}" if place else None
    if group:
        return None
    if cls == "lead":
        return _lead(lemma, rest)
    if cls == "employ":
        return _employ(lemma, rest, scope)
    if cls == "role":
        return _new_role(lemma, rest)
    if cls == "leave":
        return _left(lemma, rest, scope)
    return None


def _be_at(chunk: str, aux0: str) -> str | None:
    """'I'm at Globex now as a staff engineer' (a title is needed: 'I'm at Costa' is not a job)."""
    text = chunk if aux0 in {"'m"} else None
    if text is None:
        m = re.match(r"^\s*(?i:am)\b", chunk)
        text = chunk[m.end() :] if m else None
    if text is None:
        return None
    m = re.match(rf"^(?:\s+{TIME})*\s+(?i:at)\s+{ORG}{TRAIL}{AS_ROLE}", text)
    role = _role(m.group("role")) if m else ""
    return _works(role, m.group("org")) if m and role else None
