"""`compression.archive_summary`: an extractive summary of the session.

- summary: the highest-scoring sentences (tf-idf over the session's messages, normalised by
  length, boosted for user statements, problems and decisions), in conversation order, within
  a word budget derived from `max_tokens`; plus one line about tool use.
- key_topics: RAKE-style noun phrases (runs of non-stopwords) ranked by frequency × tf-idf
  weight of their words, near-duplicates folded; exception names count as topics.
- key_decisions: sentences with decision cues ("decided", "let's", "going with") that are not
  questions or conditionals.
- unresolved: user questions no later reply shares enough words with, assistant questions the
  user never replied to, open items ("I still need to…", "not sure yet"), and problems with no
  later reply.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any

from ctxpipe.core.text import content_tokens, normalize_space, stem
from ctxpipe.providers.rules.cases import EXCEPTION_RE, REJECT_RE, problem_sentences
from ctxpipe.providers.rules.inputs import Msg, load_messages, load_tools
from ctxpipe.providers.rules.text import CHITCHAT, is_chitchat, is_question, phrases, truncate_words

DECISION_RE = re.compile(
    r"\b(?:decided|decide to|let's|let us|we'll|we will|agreed|agree to|going to|chose|choose "
    r"to|settled on|(?:will|'ll) go with|go with|going with|opted|the plan is|the decision)\b",
    re.I,
)
CONDITIONAL_RE = re.compile(r"^\s*(?:if|whether|unless|should|shall|could|would)\b|\bif we\b", re.I)
OPEN_RE = re.compile(
    r"\b(?:still need to|need to figure out|have to figure out|not sure (?:yet|how|whether|if)|"
    r"haven't decided|to be decided|tbd|todo|open question|will look into|remains to be seen|"
    r"need to follow up|no idea (?:how|whether|if)|still (?:unclear|open|undecided))\b",
    re.I,
)
GENERIC_Q = frozenset(
    "how what when where why which who do does did can could should would is "
    "are will get make know tell way also right now".split()
)


def _weights(messages: list[Msg]) -> dict[str, float]:
    df: Counter[str] = Counter()
    tf: Counter[str] = Counter()
    for m in messages:
        toks = content_tokens(m.content)
        tf.update(toks)
        df.update(set(toks))
    n = max(1, len(messages))
    return {w: (1 + math.log(tf[w])) * math.log(1 + n / df[w]) for w in tf}


def _score(msg: Msg, sentence: str, weights: dict[str, float], problems: set[str]) -> float:
    toks = set(content_tokens(sentence))
    if not toks or is_chitchat(sentence):
        return 0.0
    # fsum: exact whatever the order of the set, so equal sentences tie in every process
    score = math.fsum(weights.get(t, 0.0) for t in toks) / math.sqrt(len(toks) + 1)
    if msg.is_user:
        score *= 1.15
    if DECISION_RE.search(sentence) and not is_question(sentence):
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
            s = truncate_words(s, budget_words)  # a single over-long sentence is cut
        chosen.append((mi, si, m, s))
        used += n
    parts: list[str] = []
    last_role = ""
    for _, _, m, s in sorted(chosen, key=lambda x: (x[0], x[1])):
        prefix = f"{m.role.capitalize()}: " if m.role != last_role else ""
        parts.append(prefix + normalize_space(s))
        last_role = m.role
    return " ".join(parts)


def key_topics(messages: list[Msg], weights: dict[str, float], k: int = 6) -> list[str]:
    counts: Counter[tuple[str, ...]] = Counter()
    surface: dict[tuple[str, ...], str] = {}
    for m in messages:
        for s in m.sentences:
            for exc in EXCEPTION_RE.finditer(s):
                key = (stem(exc.group(1)),)
                counts[key] += 2
                surface.setdefault(key, exc.group(1))
            for p in phrases(s):
                toks = tuple(content_tokens(p))
                if not toks or all(t in CHITCHAT for t in toks) or len(toks) > 4:
                    continue
                if len(toks) == 1 and len(toks[0]) < 4 and not re.search(r"\d|[A-Z]", p):
                    continue
                counts[toks] += 1
                surface.setdefault(toks, p)

    def rank(t: tuple[str, ...]) -> float:
        return counts[t] * sum(weights.get(w, 0.1) for w in t) / len(t) * (1 + 0.35 * (len(t) - 1))

    chosen: list[tuple[str, ...]] = []
    for t in sorted(counts, key=lambda t: -rank(t)):
        if any(set(t) <= set(c) or set(c) <= set(t) for c in chosen):
            continue
        chosen.append(t)
        if len(chosen) >= k:
            break
    return [surface[t] for t in chosen]


def key_decisions(messages: list[Msg]) -> list[str]:
    out = [
        normalize_space(s)
        for m in messages
        if m.role in ("user", "assistant")
        for s in m.sentences
        if DECISION_RE.search(s) and not is_question(s) and not CONDITIONAL_RE.search(s)
    ]
    return list(dict.fromkeys(out))[:6]


def _answered(q_msg: Msg, question: str, later: list[Msg]) -> bool:
    others = [m for m in later if m.role != q_msg.role and m.role in ("user", "assistant")]
    if q_msg.is_assistant:
        return bool(others)  # the user replied
    want = {t for t in content_tokens(question) if t not in GENERIC_Q}
    if len(want) < 3:  # "How do I get around it?": the previous sentence says what "it" is
        idx = q_msg.sentences.index(question) if question in q_msg.sentences else 0
        if idx > 0:
            want |= {t for t in content_tokens(q_msg.sentences[idx - 1]) if t not in GENERIC_Q}
    if not want:
        return bool(others)
    need = min(2, len(want)) if len(want) < 5 else max(2, math.ceil(0.3 * len(want)))
    # compound tokens ("max_connections") also match their parts
    parts = {stem(p) for t in want for p in re.split(r"[_\-.]", t) if len(p) > 2}
    got: set[str] = set()
    for m in others[:2]:  # an answer may take the next two replies
        got |= set(content_tokens(m.content))
        if len(want & got) >= need or (parts and len(parts & got) >= need):
            return True
    return False


def unresolved(messages: list[Msg]) -> list[str]:
    out: list[str] = []
    for pos, m in enumerate(messages):
        later = messages[pos + 1 :]
        for s in m.sentences:
            if is_question(s) and not is_chitchat(s) and not _answered(m, s, later):
                out.append(normalize_space(s))
            elif m.is_user and OPEN_RE.search(s):
                out.append(normalize_space(s))
        if m.is_user and not any(x.is_assistant for x in later):
            for s in problem_sentences(m):
                if not is_question(s) or REJECT_RE.search(s):
                    out.append(normalize_space(s))
    return list(dict.fromkeys(out))[:6]


def _tools_line(variables: dict[str, Any]) -> str:
    tools = load_tools(variables.get("tools"))
    if not tools:
        return ""
    failed = Counter(t.name for t in tools if not t.success)
    parts = [
        f"{name} ({n} call{'s' if n != 1 else ''}"
        + (f", {failed[name]} failed)" if failed[name] else ")")
        for name, n in Counter(t.name for t in tools).items()
    ]
    return "Tools used: " + ", ".join(parts) + "."


def archive_summary(variables: dict[str, Any]) -> dict[str, Any]:
    messages = load_messages(variables.get("messages"))
    max_tokens = int(variables.get("max_tokens") or 500)
    cap = max(8, max_tokens)  # words ≈ tokens: the summary never exceeds max_tokens words
    budget = max(6, min(int(cap * 0.75), 110))
    weights = _weights(messages)
    text = summary_text(messages, weights, budget)
    tools = _tools_line(variables)
    if tools and len(text.split()) + len(tools.split()) <= cap:
        text = f"{text} {tools}".strip()
    if not text:
        text = "Empty session." if not messages else "Small talk; nothing substantive."
    return {
        "summary": text,
        "key_topics": key_topics(messages, weights),
        "key_decisions": key_decisions(messages),
        "unresolved": unresolved(messages),
    }
