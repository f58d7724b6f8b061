"""`compression.archive_summary`: an extractive summary of the session.

- summary: the best sentences by tf-idf (normalised by length; user statements, problems and
  decisions weigh more), in conversation order, within a word budget from `max_tokens`; plus
  one line about tool use;
- key_topics: noun phrases ranked by frequency × tf-idf (`text.key_phrases`), exception names
  counting twice;
- key_decisions: sentences with decision cues ("decided", "let's", "going with") that are not
  questions or conditionals;
- unresolved: questions the other party never took up (`_answered`), open items of the user
  ("I still need to…", "not sure yet") and problems with no later reply.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from itertools import groupby
from typing import Any

from ctxpipe.core.text import content_tokens, normalize_space, stem, words
from ctxpipe.providers.rules import text
from ctxpipe.providers.rules.cases import EXCEPTION_RE, REJECT_RE, problem_sentences
from ctxpipe.providers.rules.inputs import Msg, load_messages, load_tools

DECISION_RE = re.compile(
    r"(?i)\b(?:decided|decide to|let's|let us|we'll|we will|agreed|agree to|going to|chose|choose "
    r"to|settled on|(?:will|'ll) go with|go with|going with|opted|the plan is|the decision)\b"
)
CONDITIONAL_RE = re.compile(r"^\s*(?:if|whether|unless|should|shall|could|would)\b|\bif we\b", re.I)
OPEN_RE = re.compile(
    r"(?i)\b(?:still need to|need to figure out|have to figure out|not sure (?:yet|how|whether|if)|"
    r"haven't decided|to be decided|tbd|todo|open question|will look into|remains to be seen|"
    r"need to follow up|no idea (?:how|whether|if)|still (?:unclear|open|undecided))\b"
)
ASKING = frozenset({"know", "tell", "make"})  # words of a question that say it asks, not what


def is_decision(sentence: str) -> bool:
    """A decision cue in a statement that is neither a question nor a conditional."""
    cue, conditional = DECISION_RE.search(sentence), CONDITIONAL_RE.search(sentence)
    return bool(cue) and not conditional and not text.is_question(sentence)


def _score(msg: Msg, sentence: str, weights: dict[str, float], problems: set[str]) -> float:
    toks = set(content_tokens(sentence))
    if not toks or text.is_chitchat(sentence):
        return 0.0
    # fsum: exact whatever the order of the set, so equal sentences tie in every process
    score = math.fsum(weights.get(t, 0.0) for t in toks) / math.sqrt(len(toks) + 1)
    # the user's sentences, decisions and problems weigh more; a sentence of few words less
    if msg.is_user:
        score *= 1.15
    if is_decision(sentence):
        score *= 1.2
    if EXCEPTION_RE.search(sentence) or sentence in problems:
        score *= 1.2
    if len(toks) < 3:
        score *= 0.4
    return score


def summary_text(messages: list[Msg], weights: dict[str, float], budget_words: int) -> str:
    talk = [m for m in messages if m.role in ("user", "assistant")]
    problems = {m.index: set(problem_sentences(m)) for m in talk}  # once per message
    scored = [
        (_score(m, s, weights, problems[m.index]), m.index, i, m, s)
        for m in talk
        for i, s in enumerate(m.sentences)
    ]
    chosen: list[tuple[int, int, Msg, str]] = []
    used = 0
    for score, mi, si, m, s in sorted(scored, key=lambda x: (-x[0], x[1], x[2])):
        n = len(s.split())
        if score <= 0 or len(chosen) >= 4:
            break
        if used + n > budget_words:
            if chosen:
                continue
            s = text.truncate_words(s, budget_words)  # a single over-long sentence is cut
        chosen.append((mi, si, m, s))
        used += n
    in_order = sorted(chosen, key=lambda x: (x[0], x[1]))
    turns = groupby(in_order, key=lambda x: x[2].role)  # "User: … Assistant: …"
    parts = [f"{r.capitalize()}: " + " ".join(normalize_space(x[3]) for x in g) for r, g in turns]
    return " ".join(parts)


def key_topics(messages: list[Msg], weights: dict[str, float]) -> list[str]:
    terms: list[tuple[str, int]] = []
    for s in (s for m in messages for s in m.sentences):
        terms += [(e.group(1), 2) for e in EXCEPTION_RE.finditer(s)]
        terms += [(p, 1) for p in text.phrases(s)]
    return text.key_phrases(terms, weights)


def key_decisions(messages: list[Msg]) -> list[str]:
    said = (s for m in messages if m.role in ("user", "assistant") for s in m.sentences)
    return list(dict.fromkeys(normalize_space(s) for s in said if is_decision(s)))[:6]


def _answered(q_msg: Msg, question: str, later: list[Msg]) -> bool:
    """Did the other party take a question up? An assistant's question by any reply of the
    user; a user's by one of the next two replies carrying two of its words (three in ten of a
    long one), a compound word ("max_connections") by its parts too, a question that names
    little ("How do I get around it?") with the sentence before it."""
    others = [m for m in later if m.role != q_msg.role and m.role in ("user", "assistant")][:2]
    want = set(content_tokens(question)) - ASKING
    i = q_msg.sentences.index(question) if question in q_msg.sentences else 0
    if len(want) < 3 and i > 0:
        want |= set(content_tokens(q_msg.sentences[i - 1])) - ASKING
    if q_msg.role == "assistant" or not want:
        return bool(others)
    need = min(2, len(want)) if len(want) < 5 else max(2, math.ceil(0.3 * len(want)))
    got = set(content_tokens(" ".join(m.content for m in others)))
    parts = {stem(p) for t in want for p in words(t) if len(p) > 2}
    return len(want & got) >= need or len(parts & got) >= need


def unresolved(messages: list[Msg]) -> list[str]:
    out: list[str] = []
    for pos, m in enumerate(messages):
        later = messages[pos + 1 :]
        for s in m.sentences:
            asked = text.is_question(s) and not text.is_chitchat(s)
            if (asked and not _answered(m, s, later)) or (m.is_user and OPEN_RE.search(s)):
                out.append(normalize_space(s))
        if m.is_user and all(x.role != "assistant" for x in later):  # a problem left unanswered
            told = (
                s for s in problem_sentences(m) if not text.is_question(s) or REJECT_RE.search(s)
            )
            out.extend(map(normalize_space, told))
    return list(dict.fromkeys(out))[:6]


def _tools_line(variables: dict[str, Any]) -> str:
    tools = load_tools(variables.get("tools"))
    failed = Counter(t.name for t in tools if not t.success)
    parts = [
        f"{name} ({n} call{'s' if n != 1 else ''}"
        + (f", {failed[name]} failed)" if failed[name] else ")")
        for name, n in Counter(t.name for t in tools).items()
    ]
    return f"Tools used: {', '.join(parts)}." if tools else ""


def archive_summary(variables: dict[str, Any]) -> dict[str, Any]:
    messages = load_messages(variables.get("messages"))
    cap = max(8, int(variables.get("max_tokens") or 500))  # words ≈ tokens: never more words
    budget = max(6, min(int(cap * 0.75), 110))
    weights = text.tf_idf([m.content for m in messages])
    summary = summary_text(messages, weights, budget)
    tools = _tools_line(variables)
    if tools and len(summary.split()) + len(tools.split()) <= cap:
        summary = f"{summary} {tools}".strip()
    if not summary:
        summary = "Empty session." if not messages else "Small talk; nothing substantive."
    return {
        "summary": summary,
        "key_topics": key_topics(messages, weights),
        "key_decisions": key_decisions(messages),
        "unresolved": unresolved(messages),
    }
