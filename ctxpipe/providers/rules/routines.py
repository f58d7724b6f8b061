"""Patterns: procedures stated as routine or laid out as step lists.

Recognised: routine cues (`ROUTINE_RE`) and step lists ("first … then … finally", numbered or
bulleted lines, ≥ 2 steps), titled by the last noun phrase of their lead-in ("My usual routine
for a new experiment:" → experiment). The user's routine weighs more than a list the assistant
proposes. A tool-call pair that repeats (A→B … A→B) is a pattern when its messages are known.
"""

from __future__ import annotations

import re
from collections import Counter
from itertools import pairwise
from typing import Any

from ctxpipe.core.session import ToolUse
from ctxpipe.core.text import normalize_space
from ctxpipe.providers.rules.inputs import Msg
from ctxpipe.providers.rules.lines import memory
from ctxpipe.providers.rules.speech import rewrite
from ctxpipe.providers.rules.text import lead_in, phrases, slugify, strip_code, truncate_words

ROUTINE_RE = re.compile(
    r"(?i)\b(?:every time|each time|whenever|usually|typically|normally|as a rule|"
    r"my (?:usual |normal |standard |daily )?(?:workflow|routine|process|procedure|habit)|"
    r"our (?:usual |normal |standard )?(?:workflow|routine|process|procedure)|"
    r"standard procedure|i always start by|the way i (?:always )?do it)\b"
)
STEP_SPLIT = re.compile(
    r"(?i)(?:^|[,;:.]\s*|\s+)(?:and\s+)?(?:first(?:ly)?|then|next|after that|afterwards|"
    r"finally|lastly|and then|second(?:ly)?|third(?:ly)?)\b,?\s*"
)
BULLET_RE = re.compile(r"^\s*(?:[-*•]|\d{1,2}[.)])\s+")


def _steps(msg: Msg) -> tuple[str, list[str]]:
    """(lead-in title, steps) of the first step list in a message ('', []) when none."""
    lines = [ln for ln in strip_code(msg.content).splitlines() if ln.strip()]
    bullets = [BULLET_RE.sub("", ln).strip() for ln in lines if BULLET_RE.match(ln)]
    if len(bullets) >= 2:
        lead = next((ln.strip().rstrip(":") for ln in lines if not BULLET_RE.match(ln)), "")
        return lead, bullets
    for s in msg.sentences:
        if not re.search(r"\bfirst\b", s, re.I) or len(STEP_SPLIT.findall(s)) < 2:
            continue
        lead, body = lead_in(s)
        steps = [p.strip(" ,;.") for p in STEP_SPLIT.split(body)]
        steps = [p for p in steps if len(p.split()) >= 2]
        if len(steps) >= 2:
            if not lead and not re.match(r"^\s*(?:first|then)\b", steps[0], re.I):
                lead, steps = steps[0], steps[1:]
            return lead, steps
    return "", []


def _title(lead: str, steps: list[str]) -> str:
    """The last noun phrase of the lead-in, else the first of the first step."""
    return ([*phrases(lead)[-1:], *phrases(steps[0])[:1]] or ["procedure"])[0].lower()


def extract_patterns(messages: list[Msg], tools: list[ToolUse]) -> list[dict[str, Any]]:
    memories: list[dict[str, Any]] = []
    seen: set[str] = set()
    for msg in (m for m in messages if m.role in ("user", "assistant")):
        lead, steps = _steps(msg)
        routine = next((s for s in msg.sentences if ROUTINE_RE.search(s)), "")
        steps = steps or ([routine] if routine and msg.is_user else [])  # its one step
        if not steps:
            continue
        title = _title(lead or routine, steps)
        key = slugify(title, max_words=4)
        if key in seen:
            continue
        seen.add(key)
        told = [
            rewrite(normalize_space(s), "the user").text if msg.is_user else normalize_space(s)
            for s in steps
        ]
        stated, conf = ("user routine", 0.85) if routine else ("user procedure", 0.7)
        if not msg.is_user:
            stated, conf = "assistant-proposed procedure", 0.6
        steps_told = (f"- step {i}: {s} [{msg.id}]" for i, s in enumerate(told, 1))
        overview = "\n".join([f"- kind: {stated}", *steps_told])
        arrow = " → ".join(truncate_words(s, 8) for s in told)
        content = "\n".join(f"- {normalize_space(s)} [{msg.id}]" for s in msg.sentences)
        abstract = f"{title.capitalize()}: {arrow}"
        memories.append(memory("patterns", key, abstract, overview, content, conf, refs=[msg.id]))
    memories.extend(_tool_sequences(tools))
    return memories


def _tool_sequences(tools: list[ToolUse]) -> list[dict[str, Any]]:
    pairs = Counter((a, b) for a, b in pairwise(t.name for t in tools) if a != b)
    out = []
    for (a, b), n in pairs.items():
        refs = [t.message_id for t in tools if t.name in (a, b) and t.message_id]
        if n < 2 or not refs:
            continue
        overview = f"- step 1: call {a}\n- step 2: call {b}\n- repeated: {n} times"
        content = f"The session called {a} and then {b} {n} times."
        abstract = f"Tool sequence used {n} times: {a} → {b}"
        key = slugify(f"{a} then {b}")
        out.append(memory("patterns", key, abstract, overview, content, 0.6, refs=refs))
    return out
