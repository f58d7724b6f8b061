"""Patterns: procedures stated as routine or laid out as step lists.

Recognised: routine cues ("every time", "whenever", "usually I", "my workflow/routine/process
is", "as a rule") and step lists ("first … then … finally", numbered or bulleted lines, ≥ 2
steps). A routine stated by the USER is stronger than a step list proposed by the assistant.
A tool-call sequence that repeats (A→B … A→B) is also a pattern when its messages are known.
"""

from __future__ import annotations

import re
from collections import Counter
from itertools import pairwise
from typing import Any

from ctxpipe.core.text import STOPWORDS, normalize_space, tokenize
from ctxpipe.providers.rules.inputs import Msg, Tool
from ctxpipe.providers.rules.speech import rewrite
from ctxpipe.providers.rules.text import slugify, strip_code, truncate_words

ROUTINE_RE = re.compile(
    r"\b(?:every time|each time|whenever|usually|typically|normally|as a rule|"
    r"my (?:usual |normal |standard |daily )?(?:workflow|routine|process|procedure|habit)|"
    r"our (?:usual |normal |standard )?(?:workflow|routine|process|procedure)|"
    r"standard procedure|i always start by|the way i (?:always )?do it)\b",
    re.I,
)
STEP_SPLIT = re.compile(
    r"(?:^|[,;:.]\s*|\s+)(?:and\s+)?(?:first(?:ly)?|then|next|after that|afterwards|"
    r"finally|lastly|and then|second(?:ly)?|third(?:ly)?)\b,?\s*",
    re.I,
)
BULLET_RE = re.compile(r"^\s*(?:[-*•]|\d{1,2}[.)])\s+")
LEAD_IN = re.compile(r"^(?P<lead>[^:]{3,80}):\s+(?P<rest>.+)$")
TITLE_NOISE = frozenset(
    "my our usual normal standard daily routine workflow process plan "
    "procedure steps here's here is for a an the new".split()
)


def _steps(msg: Msg) -> tuple[str, list[str]]:
    """(lead-in title, steps) of the first step list in a message ('', []) when none."""
    lines = [ln for ln in strip_code(msg.content).splitlines() if ln.strip()]
    bullets = [BULLET_RE.sub("", ln).strip() for ln in lines if BULLET_RE.match(ln)]
    if len(bullets) >= 2:
        lead = next((ln.strip().rstrip(":") for ln in lines if not BULLET_RE.match(ln)), "")
        return lead, bullets
    for s in msg.sentences:
        if not re.search(r"\bfirst\b", s, re.I) or not re.search(
            r"\b(?:then|next|finally|after that)\b", s, re.I
        ):
            continue
        m = LEAD_IN.match(s)
        lead, body = (m.group("lead"), m.group("rest")) if m else ("", s)
        steps = [p.strip(" ,;.") for p in STEP_SPLIT.split(body)]
        steps = [p for p in steps if len(p.split()) >= 2]
        if len(steps) >= 2:
            if not lead and not re.match(r"^\s*(?:first|then)\b", steps[0], re.I):
                lead, steps = steps[0], steps[1:]
            return lead, steps
    return "", []


def _title(lead: str, steps: list[str]) -> str:
    toks = [t for t in tokenize(lead) if t not in STOPWORDS and t not in TITLE_NOISE]
    if toks:
        return " ".join(toks[:4])
    first = [t for t in tokenize(steps[0]) if t not in STOPWORDS and t not in {"i", "we"}]
    return " ".join(first[:3]) or "procedure"


def extract_patterns(messages: list[Msg], tools: list[Tool]) -> list[dict[str, Any]]:
    memories: list[dict[str, Any]] = []
    seen: set[str] = set()
    for msg in messages:
        if msg.role not in ("user", "assistant"):
            continue
        lead, steps = _steps(msg)
        routine = next((s for s in msg.sentences if ROUTINE_RE.search(s)), "")
        if not steps and not (routine and msg.is_user):
            continue
        if not steps:
            steps = [routine]
        title = _title(lead or routine, steps)
        key = slugify(title, max_words=4)
        if key in seen:
            continue
        seen.add(key)
        told = [
            rewrite(normalize_space(s), "the user").text if msg.is_user else normalize_space(s)
            for s in steps
        ]
        if msg.is_user:
            stated, conf = ("user routine", 0.85) if routine else ("user procedure", 0.7)
        else:
            stated, conf = "assistant-proposed procedure", 0.6
        overview = [f"- kind: {stated}"] + [
            f"- step {i}: {s} [{msg.id}]" for i, s in enumerate(told, 1)
        ]
        arrow = " → ".join(truncate_words(s, 8) for s in told)
        memories.append(
            {
                "category": "patterns",
                "routing_key": key,
                "abstract": f"{title.capitalize()}: {arrow}",
                "overview": "\n".join(overview),
                "content": "\n".join(
                    [f"- {normalize_space(s)} [{msg.id}]" for s in msg.sentences if s.strip()]
                ),
                "confidence": conf,
                "source_refs": [msg.id],
            }
        )
    memories.extend(_tool_sequences(tools))
    return memories


def _tool_sequences(tools: list[Tool]) -> list[dict[str, Any]]:
    pairs = Counter((a, b) for a, b in pairwise(t.name for t in tools) if a != b)
    out = []
    for (a, b), n in pairs.items():
        refs = [t.message_id for t in tools if t.name in (a, b) and t.message_id]
        if n < 2 or not refs:
            continue
        out.append(
            {
                "category": "patterns",
                "routing_key": slugify(f"{a} then {b}"),
                "abstract": f"Tool sequence used {n} times: {a} → {b}",
                "overview": f"- step 1: call {a}\n- step 2: call {b}\n- repeated: {n} times",
                "content": f"The session called {a} and then {b} {n} times.",
                "confidence": 0.6,
                "source_refs": list(dict.fromkeys(refs)),
            }
        )
    return out
