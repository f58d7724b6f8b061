"""`extraction.preferences`: likes, dislikes and standing instructions from USER messages.

Recognised: "I (really) like/love/enjoy/prefer/adore X", "I hate/dislike/detest/can't stand/
avoid X", "I don't like X", "I'm (not) a fan of X", "I'm allergic to X", "I'd rather X
(than Y)", "I'd prefer X", "my favourite W is X", imperatives "always X", "never X",
"please don't X", "keep answers short". Questions, requests ("I'd like to…", "I'd love
to…") and anaphoric objects ("I like that") are ignored.

Output: one memory per topic (`routing_key` = topic slug). The topic comes from a keyword map
of common domains (code-style, editor, communication, food, music…) and otherwise from the
head noun of the object phrase.
"""

from __future__ import annotations

import re
from typing import Any

from ctxpipe.providers.rules.facts import Fact, render_lines, synthesize
from ctxpipe.providers.rules.inputs import load_messages
from ctxpipe.providers.rules.patterns import IMPERATIVE_VERBS, clip_clause
from ctxpipe.providers.rules.text import (
    PHRASE_BREAKERS,
    is_hedged,
    is_question,
    normalize_space,
    phrases,
    slugify,
    tokenize,
)

TOPICS: dict[str, list[str]] = {
    "communication": (
        "answer answers response responses reply replies explanation explanations emoji emojis "
        "bullet bullets jargon verbose concise brief summary summaries tone formal casual "
        "examples walls tl;dr messages wording short detailed lengthy chatty"
    ).split(),
    "code-style": (
        "indentation indent tabs spaces type hints typing docstring docstrings comments "
        "formatting formatter black ruff lint linting linter camelcase snake_case functions "
        "function variable variables semicolons quotes pep8 imports commas returns "
        "abstractions classes oop naming f-strings style readable readability"
    ).split(),
    "editor": (
        "vim neovim nvim emacs vscode intellij pycharm editor ide sublime keybindings zed helix "
        "jetbrains"
    ).split(),
    "ui": "theme themes font fonts dark-mode mode light-mode colour color scheme ui".split(),
    "food": (
        "food pizza sushi coffee tea spicy meat cuisine restaurant restaurants pasta ramen "
        "chocolate cheese vegetables curry dessert breakfast lunch dinner cooking wine beer "
        "thai indian italian mexican seafood fish tofu cilantro coriander mushrooms peanuts "
        "gluten dairy noodles burgers salad fruit bread eggs vegetarian vegan meals snacks"
    ).split(),
    "music": (
        "music jazz rock pop classical songs song band bands playlist playlists podcasts "
        "podcast album albums concerts hip-hop metal opera"
    ).split(),
    "programming-languages": (
        "python rust go golang java typescript javascript kotlin swift c++ ruby php scala "
        "haskell elixir clojure c# lua"
    ).split(),
    "git": (
        "git push main master commit commits rebase rebasing squash branches branch pull prs pr "
        "review reviews"
    ).split(),
    "testing": "tests test pytest unittest tdd mocks mocking coverage fixtures".split(),
    "tooling": (
        "linux macos mac windows terminal shell zsh bash tmux docker kubernetes cli"
    ).split(),
    "databases": (
        "postgres postgresql mysql sqlite mongodb redis database databases orm sql"
    ).split(),
    "documentation": "docs documentation readme readmes wiki".split(),
    "travel": (
        "travel flights flight hotel hotels trains train seat seats aisle window airbnb "
        "layovers layover trips trip"
    ).split(),
    "schedule": (
        "meetings meeting mornings morning calls schedule evenings weekends early deadlines "
        "standups"
    ).split(),
    "teaching": (
        "lectures lecture workshops workshop lessons lesson classes class teaching students "
        "teenagers homework exams grading"
    ).split(),
    "planning": "plan plans planning itinerary itineraries backup agenda agendas".split(),
    "fitness": "running gym yoga cycling swimming workouts workout hiking climbing".split(),
    "reading": "books book novels reading fiction sci-fi audiobooks".split(),
    "movies": "movies movie films film series tv shows documentaries anime".split(),
}
TOPIC_TITLES = {"ui": "UI", "code-style": "Code style", "programming-languages": "Languages"}

VERBS = {
    "like": "likes",
    "love": "loves",
    "adore": "loves",
    "enjoy": "enjoys",
    "prefer": "prefers",
    "hate": "hates",
    "detest": "hates",
    "loathe": "hates",
    "dislike": "dislikes",
    "don't like": "dislikes",
    "do not like": "dislikes",
    "don't enjoy": "dislikes",
    "can't stand": "can't stand",
    "cannot stand": "can't stand",
    "avoid": "avoids",
    "am a fan of": "likes",
    "'m a fan of": "likes",
    "'m a big fan of": "likes",
    "am not a fan of": "dislikes",
    "'m not a fan of": "dislikes",
    "'m allergic to": "avoids (allergic)",
    "am allergic to": "avoids (allergic)",
}
_VERB_ALT = "|".join(sorted((re.escape(v) for v in VERBS), key=len, reverse=True))
_ADV = (
    r"(?:(?:really|absolutely|generally|usually|do|much|also|definitely|strongly|still|"
    r"totally|kind of|honestly|just|genuinely|personally) )*"
)
OBJ = r"(?P<obj>[^.;!?]+)"

RULES: list[tuple[re.Pattern[str], str | None, float]] = [
    (re.compile(rf"\bI\s?{_ADV}(?P<verb>{_VERB_ALT})\s+{OBJ}", re.I), None, 0.9),
    (re.compile(rf"\bI(?:'d| would) {_ADV}rather\s+{OBJ}", re.I), "would rather", 0.85),
    (re.compile(rf"\bI(?:'d| would) prefer\s+{OBJ}", re.I), "prefers", 0.85),
    (re.compile(r"\b(?:please\s+)?(?:don't|do not|never)\s+ever\s+" + OBJ, re.I), "never", 0.85),
    (re.compile(r"\bplease\s+(?:don't|do not|avoid|stop)\s+" + OBJ, re.I), "never", 0.85),
    (re.compile(r"(?:^|[,;:]\s*|\bI\s+|\bplease\s+)never\s+" + OBJ, re.I), "never", 0.85),
    (re.compile(r"(?:^|[,;:]\s*|\bI\s+|\bplease\s+)always\s+" + OBJ, re.I), "always", 0.85),
    (
        re.compile(
            r"\b(?:please\s+)?keep\s+(?:your\s+|the\s+)?(?:it|them|answers|responses|"
            r"replies|explanations|messages)\s+(?P<obj>short|brief|concise|simple|"
            r"[a-z]+ and [a-z]+)\b",
            re.I,
        ),
        "prefers @ answers",
        0.85,
    ),
]
FAVOURITE = re.compile(
    r"\bmy (?:absolute )?favou?rite (?P<what>[\w-]+(?: [\w-]+)?) (?:is|are) " + OBJ, re.I
)
SKIP_OBJ = re.compile(
    r"^(?:it|this|that|these|those|them|you|your (?:idea|suggestion|approach)|"
    r"the idea|to (?:know|ask|see|check|get|try|learn|understand))\b",
    re.I,
)
REQUEST = re.compile(r"\bI(?:'d| would) (?:like|love|want)\s+(?:to|you|it|some|a|an)\b", re.I)


def _topic(obj: str, sentence: str) -> str:
    def score(text: str) -> dict[str, int]:
        toks = tokenize(text)
        bag = set(toks) | {f"{a}-{b}" for a, b in zip(toks, toks[1:], strict=False)}
        return {t: sum(1 for k in kws if k in bag) for t, kws in TOPICS.items()}

    for text in (obj, sentence):
        scores = score(text)
        best = max(scores.values())
        if best:
            return next(t for t, v in scores.items() if v == best)
    cands = [p for p in phrases(obj) if p.split()[0].lower() not in IMPERATIVE_VERBS]
    cands = cands or phrases(obj) or [obj]
    head = [w for w in tokenize(cands[0]) if w not in PHRASE_BREAKERS]
    return slugify(head[-1] if head else cands[0], max_words=3)


def _title(topic: str) -> str:
    return TOPIC_TITLES.get(topic, topic.replace("-", " ").capitalize())


def _quote(sentence: str) -> str:
    return '"' + normalize_space(sentence).replace('"', "'")[:200] + '"'


CLAUSE_SPLIT = re.compile(
    r",?\s+(?:but|and|although|though|whereas|while|so|plus)\s+(?=(?:also\s+)?(?:I\b|please\b|"
    r"never\b|always\b|don't\b|do not\b))|;\s*|,\s+(?=please\b|I\b)|:\s+",
    re.I,
)


def facts_from_sentence(sentence: str) -> list[tuple[str, float]]:
    s = sentence.replace("’", "'")
    if is_question(s):
        return []
    found: list[tuple[str, float, int]] = []
    clauses = [c for c in CLAUSE_SPLIT.split(s) if c and c.strip()]
    for clause in clauses:
        if REQUEST.search(clause) and not re.search(r"\brather\b", clause):
            continue
        found.extend(_clause_facts(clause))
    fav = FAVOURITE.search(s)
    if fav:
        obj = clip_clause(fav.group("obj"))
        if obj:
            found.append((f"likes {obj} (favourite {fav.group('what').lower()})", 0.9, fav.end()))
    hedge = 0.25 if is_hedged(s) else 0.0
    texts = [t for t, _, _ in found]
    out: list[tuple[str, float]] = []
    for text, conf, _ in found:
        # "always use X" inside "I always use X": keep the longer reading only once
        if any(text != o and text in o for o in texts):
            continue
        out.append((normalize_space(text), round(conf - hedge, 2)))
    return out


def _clause_facts(s: str) -> list[tuple[str, float, int]]:
    found: list[tuple[str, float, int]] = []
    for pattern, pred, conf in RULES:
        for m in pattern.finditer(s):
            if re.search(r"\b(?:how|what|way|when|if|whether|why)\s+$", s[: m.start()], re.I):
                continue  # embedded clause: "how I like to work"
            obj = clip_clause(m.group("obj"))
            if not obj or SKIP_OBJ.match(obj) or len(obj) < 2:
                continue
            verb = pred or VERBS[re.sub(r"\s+", " ", m.group("verb").lower())]
            text = verb.replace("@", obj) if "@" in verb else f"{verb} {obj}"
            if any(m.start() < e and text in t for t, _, e in found):
                continue
            found.append((text, conf, m.end()))
    return found


def extract_preferences(variables: dict[str, Any]) -> dict[str, Any]:
    messages = [m for m in load_messages(variables.get("messages")) if m.is_user]
    topics: dict[str, list[Fact]] = {}
    conf: dict[str, float] = {}
    for msg in messages:
        for sentence in msg.sentences:
            for text, c in facts_from_sentence(sentence):
                obj = text.split(" ", 1)[1] if " " in text else text
                topic = _topic(obj, sentence)
                facts = topics.setdefault(topic, [])
                same = next((f for f in facts if f.text.lower() == text.lower()), None)
                if same:
                    if msg.id not in same.refs:
                        same.refs.append(msg.id)
                    continue
                facts.append(Fact(text, [msg.id], _quote(sentence)))
                conf[topic] = max(conf.get(topic, 0.0), c)
    memories = []
    order = {m.id: m.index for m in messages}
    for topic, facts in topics.items():
        refs = sorted({r for f in facts for r in f.refs}, key=lambda r: order.get(r, 0))
        memories.append(
            {
                "category": "preferences",
                "routing_key": topic,
                "abstract": synthesize(f"{_title(topic)} preferences", facts),
                "overview": render_lines([Fact(f.text, f.refs) for f in facts]),
                "content": render_lines(facts),
                "confidence": min(0.95, max(0.5, conf[topic])),
                "source_refs": refs,
            }
        )
    return {"memories": memories}
