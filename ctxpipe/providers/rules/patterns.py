"""Shared regex building blocks and lexicons (names, roles, clause clipping)."""

from __future__ import annotations

import re

from ctxpipe.providers.rules.dates import find_dates

# A capitalised name: "Acme", "Acme Analytics", "Bank of Ireland", "Node.js", "O'Brien"
NAME_WORD = r"(?!I\b)[A-Z][\w&'’-]*(?:\.[A-Za-z]+)*"
NAME = rf"{NAME_WORD}(?:\s+(?:(?:of|de|du|da|del|von|van|la|le|&)\s+)?{NAME_WORD}){{0,4}}"
CLAUSE_END = (
    r"(?=\s+(?:and|but|so|because|which|who|although|though|while|when|since|where|"
    r"if|until|after|before)\b|\s+[-–—]\s|[,.;:!?)(]|$)"
)

ROLE_HEADS = frozenset(
    """engineer developer programmer scientist designer manager teacher nurse doctor student
    researcher analyst writer lead architect consultant founder cofounder co-founder director
    administrator admin accountant lawyer attorney chef cook pilot driver editor journalist
    professor lecturer tutor intern apprentice officer executive ceo cto cfo coo vp head owner
    freelancer contractor technician mechanic electrician plumber carpenter artist musician
    photographer physician surgeon dentist pharmacist therapist psychologist paramedic
    firefighter soldier librarian clerk cashier barista waiter waitress bartender farmer
    economist statistician mathematician physicist chemist biologist engineer sre devops
    maintainer postdoc fellow principal partner recruiter marketer salesperson strategist
    coordinator specialist assistant associate representative secretary veterinarian vet
    translator interpreter producer director animator illustrator copywriter blogger
    streamer coach trainer instructor""".split()
)
ROLE_SUFFIXES = ("er", "or", "ist", "ian", "ant", "ent", "eer")
NOT_ROLES = frozenset(
    """fan lover user customer beginner believer follower member speaker reader player order
    other brother sister mother father daughter winner loser owner-operator supporter neighbour
    neighbor newcomer vegetarian vegan pescatarian christian parent resident citizen patient
    client subscriber viewer listener riser sleeper eater drinker runner swimmer cyclist
    climber gamer hiker adopter perfectionist optimist pessimist minimalist introvert
    extrovert fanatic enthusiast collector learner traveler traveller""".split()
)
NON_NOUN_HEADS = frozenset(
    """bit little lot few couple ton bunch sort kind huge big fan great good bad total real
    fast slow quick""".split()
)
ADJECTIVE_SUFFIXES = ("ed", "ing", "ful", "ous", "ble", "ive", "less", "ish", "ic", "al", "y")

NATIONALITIES = frozenset(
    """american british english scottish welsh irish french german italian spanish portuguese
    dutch belgian swiss austrian swedish norwegian danish finnish polish czech greek turkish
    russian ukrainian indian chinese japanese korean vietnamese thai filipino indonesian
    australian canadian mexican brazilian argentinian chilean colombian peruvian nigerian
    kenyan egyptian moroccan israeli iranian pakistani""".split()
)

NOT_NAMES = frozenset(
    """I I'm I've I'd I'll OK Ok Okay Thanks Thank Hi Hello Hey Yes No Yeah Sure Please Sorry
    The A An This That These Those It Its It's We We're You Your He She They Our My Me Also
    Then But And Or So If When What Where Why How Who Which Just Great Cool Nice Good Perfect
    Awesome Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March
    April May June July August September October November December Today Tomorrow Yesterday
    Let Let's Here There Maybe Actually Anyway Btw BTW FYI Quick Update Step First Second
    Third Finally Next Last Note Also Unfortunately Sounds Done Still Now Any Some Every
    Option Error Warning Traceback Exception Problem Issue""".split()
)
# Acronyms too generic to be entities
GENERIC_ACRONYMS = frozenset(
    """API APIs SQL JSON YAML HTTP HTTPS URL CPU GPU RAM SSD CLI UI UX OS PR PRs CI CD ETA
    FAQ PDF CSV TL DR TLDR ASAP IMO IIRC AM PM OK ID IDs DB DNS SSH TLS SSL IDE VM VMs""".split()
)

TECH = frozenset(
    """python go golang rust java typescript javascript kotlin swift ruby php scala haskell
    elixir clojure lua c++ c# postgres postgresql mysql sqlite mongodb redis kafka airflow dbt
    spark docker kubernetes k8s terraform ansible linux macos windows ubuntu debian vim neovim
    emacs vscode vs code intellij pycharm helix sublime git github gitlab bitbucket jira slack
    notion figma react vue angular svelte django flask fastapi rails spring node node.js
    pytorch tensorflow jax numpy pandas grafana prometheus pgbouncer nginx aws gcp azure
    excel chatgpt copilot""".split()
) | {"vs code", "google cloud", "visual studio code"}
PLACE_NOUNS = re.compile(
    r"\b(?:guesthouse|hotel|hostel|restaurant|cafe|café|bar|museum|park|airport|station|"
    r"beach|city|town|village|island|venue|gym|studio|school|hospital|clinic|office)\b",
    re.IGNORECASE,
)
IMPERATIVE_VERBS = frozenset(
    """put try run use add set make switch install enable disable wrap cap deploy send open
    close restart check call ask book pick go let see note keep move read write start stop
    remove delete update upgrade downgrade configure create build push pull merge include give
    show tell explain mention suggest avoid skip leave bring plan schedule""".split()
)

_CLIP_RE = re.compile(
    r"\s+(?:and|but|so|because|which|although|though|while|when|since|whereas|who|if|"
    r"until|unless|as well|plus)\s+(?:i|we|it|my|the|that|they|he|she|you|this|there)\b.*$"
    r"|\s+(?:but|because|although|though|whereas|unless)\b.*$"
    r"|,\s*(?:and|but|so|or|then|which|while)\b.*$|,\s*(?:I|we|please)\b.*$|:.*$"
    r"|\s+[-–—]\s.*$|\s*\(.*$",
    re.IGNORECASE,
)


def cut_dates(text: str) -> str:
    """Drop a trailing date expression: 'an engineering manager last week' → '… manager'."""
    found = [d for d in find_dates(text, None) if d.start > 0]
    return text[: found[0].start].rstrip(" ,") if found else text


def clip_clause(text: str) -> str:
    """Cut an object phrase at the next clause boundary; trim punctuation and fillers."""
    s = cut_dates(_CLIP_RE.sub("", text.strip()))
    s = re.sub(r"\s+(?:too|as well|though|anyway|haha|lol)$", "", s, flags=re.IGNORECASE)
    return s.strip(" ,;:.!?\"'")


def role_kind(phrase: str) -> str:
    """'role' for job titles, 'identity' for other noun phrases, '' for adjectival phrases."""
    ws = [w for w in re.findall(r"[A-Za-z][\w-]*", phrase.lower()) if w not in {"a", "an", "the"}]
    if not ws:
        return ""
    head = ws[-1]
    if any(w in NON_NOUN_HEADS for w in ws[:1]) or head in NON_NOUN_HEADS:
        return ""
    if head in NOT_ROLES:
        return "identity"
    if head in ROLE_HEADS:
        return "role"
    if head.endswith(ROLE_SUFFIXES) and len(head) > 4 and not head.endswith(("ment", "ther")):
        return "role"
    if head.endswith(ADJECTIVE_SUFFIXES) and head not in {"person", "family"}:
        return ""
    return "identity"
