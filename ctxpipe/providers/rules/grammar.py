"""Just enough English grammar: tense cues and first → third person rewriting."""

from __future__ import annotations

import re

IRREGULAR_PAST = frozenset(
    """ate began bought broke brought built came caught chose did drank drove fell felt flew
    forgot fought found gave got grew had heard held hid hit hurt kept knew led left lent lost
    made meant met paid put quit ran read rode rang rose said sang sat saw sent set shot shut
    sold spent spoke stood stole swam taught thought threw told took understood was went were
    woke won wore wrote""".split()
)

# -ed words that are usually adjectives / nouns rather than past-tense verbs
NOT_PAST_ED = frozenset(
    """need seed feed speed bed red shed bleed breed embed indeed proceed succeed exceed based
    interested tired bored excited confused annoyed worried scared married related limited
    advanced detailed experienced supposed used beloved naked wicked sacred""".split()
)

FUTURE_RE = re.compile(
    r"\b(will|'ll|going to|gonna|plan(?:ning)? to|scheduled|about to|intend to|"
    r"(?:am|'m|are|'re|is) (?:\w+ing)\b)",
    re.IGNORECASE,
)

MODALS = frozenset(
    "am is are was were will would can could should shall might must may did do does has had "
    "have".split()
)

ADVERBS = frozenset(
    """just also really finally recently never always usually often sometimes mostly still
    already actually only currently mainly primarily even totally now officially eventually
    then no longer rarely seldom hardly barely occasionally generally basically personally
    definitely probably certainly truly absolutely literally simply somehow suddenly soon
    both all""".split()
)
# a verb of the same clause after "and": "I moved to Munich and now lead a team" → "leads"
_COORDINATED = frozenset(
    """live move lead manage head run oversee work join start switch become take leave quit
    love like enjoy hate want need have go do make teach study play use own write build
    help spend""".split()
)


def is_past_verb(token: str) -> bool:
    t = token.lower()
    if t in IRREGULAR_PAST:
        return True
    return t.endswith("ed") and len(t) > 3 and t.isalpha() and t not in NOT_PAST_ED


def tense(sentence: str) -> str | None:
    """'past', 'future' or None, from verb cues (first match wins, future checked first)."""
    if FUTURE_RE.search(sentence):
        return "future"
    toks = re.findall(r"[A-Za-z']+", sentence)
    for i, t in enumerate(toks):
        low = t.lower()
        if low in {"was", "were", "did", "had"}:
            return "past"
        if is_past_verb(low):
            prev = toks[i - 1].lower() if i else ""
            # "is based", "I'm interested" → adjectival; "have used" → perfect (past-ish)
            if prev in {"is", "am", "are", "be", "been", "'m", "get", "got"}:
                continue
            return "past"
    return None


_IRREGULAR_THIRD = {"have": "has", "do": "does", "go": "goes", "be": "is", "'m": "is"}


def third_singular(verb: str) -> str:
    """The verb as it agrees with 'the user': lead → leads, go → goes, have → has, be → is;
    past tenses, modals and verbs already in the third person stay as they are."""
    v = verb
    low = v.lower()
    if low in _IRREGULAR_THIRD:
        return _IRREGULAR_THIRD[low]
    if low in MODALS or low.endswith("ed") or low in IRREGULAR_PAST or low in ADVERBS:
        return v
    if low.endswith("s") and not low.endswith(("ss", "us", "is", "ys")) and len(low) > 2:
        return v  # "leads", "goes", "runs": already agrees
    if re.search(r"[^aeiou]y$", low):
        return v[:-1] + "ies"
    if re.search(r"(s|sh|ch|x|z|o)$", low):
        return v + "es"
    return v + "s"


_CONTRACTIONS = [
    (r"\bI'm\b", "the user is"),
    (r"\bI am\b", "the user is"),
    (r"\bI've\b", "the user has"),
    (r"\bI have\b", "the user has"),
    (r"\bI'd\b", "the user would"),
    (r"\bI'll\b", "the user will"),
    (r"\bI was\b", "the user was"),
    (r"\bwe're\b", "the team is"),
    (r"\bwe've\b", "the team has"),
    (r"\bwe'll\b", "the team will"),
    (r"\bmyself\b", "themselves"),
    (r"\bmine\b", "the user's"),
    (r"\bmy\b", "the user's"),
    (r"\bour\b", "the team's"),
    (r"\bme\b", "the user"),
    (r"\bus\b", "the team"),
]


_ADV_ALT = "|".join(sorted(ADVERBS))
# "the user moved to Munich and now lead" — no other subject between "the user" and the verb
_CONJOINED = re.compile(
    rf"(\bthe user (?:(?!\b(?:he|she|they|you|it|the team|who|that|which)\b)[^.;:!?])*?"
    rf"\band (?:(?:{_ADV_ALT}) )*)({'|'.join(sorted(_COORDINATED))})\b"
)


# "my wife and I", "Anna and I" at the start of a clause: a plural subject
_PLURAL_BEFORE = re.compile(
    r"(?:^|[,;:]\s*|\b(?:when|while|because|so|but|then)\s+)\W*"
    r"(?:(?:the user's|the team's) \w+|[A-Z][a-z]+) and\s*$"
)


def to_third_person(sentence: str) -> str:
    """'I ran my first marathon' → 'The user ran the user's first marathon' (roughly)."""
    s = sentence.replace("’", "'")
    for pattern, repl in _CONTRACTIONS:
        s = re.sub(pattern, repl, s, flags=0 if pattern.startswith(r"\bI") else re.IGNORECASE)

    def subject(m: re.Match[str], who: str) -> str:
        rest = m.group(2)
        adverb = m.group(1) or ""
        # "my wife and I live": a plural subject keeps the plain verb
        plural = _PLURAL_BEFORE.search(m.string[: m.start()])
        verb = rest if plural else third_singular(rest)
        return f"{who} {adverb}{verb}"

    adv = "|".join(sorted(ADVERBS))
    s = re.sub(
        rf"\bI\s+((?:(?:{adv})\s+)*)([A-Za-z]+)\b",
        lambda m: subject(m, "the user"),
        s,
    )
    s = re.sub(r"\bI\b", "the user", s)
    s = re.sub(r"\b[Ww]e\b", "the team", s)
    s = _CONJOINED.sub(lambda m: m.group(1) + third_singular(m.group(2)), s)
    s = s.strip()
    return s[:1].upper() + s[1:] if s else s
