"""Skills: one usage guide per distinct tool/skill in `tools`.

`best_for` comes from the most salient words of the successful calls' inputs and outputs
(plus one example input); `common_failures` from the distinct `error` strings of failed calls
(numbers normalised so "allocate 2.50 GiB" and "allocate 1.20 GiB" count as one failure).
`source_refs` are the calls' `message_id`s when given, otherwise the messages that name the
tool or share the most words with its inputs.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from ctxpipe.core.text import STOPWORDS, normalize_space, stem, tokenize
from ctxpipe.providers.rules.inputs import Msg, Tool
from ctxpipe.providers.rules.text import is_breaker, truncate_words

NOISE = frozenset("select from where null none true false output input result results done".split())
_NUMBER_RE = re.compile(r"[\d.,:%/-]+\w{0,3}")  # 2.50, 30%, 12ms


def _keywords(texts: list[str], k: int = 6) -> list[str]:
    """The `k` most frequent words (ties: the first seen), numbers and function words aside."""
    counts = Counter(
        t
        for text in texts
        for t in (tok.strip("-") for tok in tokenize(text))
        if len(t) >= 3 and not is_breaker(t) and t not in NOISE and not _NUMBER_RE.fullmatch(t)
    )
    return [t for t, _ in counts.most_common(k)]


def _failures(calls: list[Tool]) -> list[tuple[str, int]]:
    """(the first error, how many) per error with its numbers left out."""
    groups: dict[str, list[str]] = {}
    for c in calls:
        if not c.success:
            err = normalize_space(c.error or "failed without an error message")
            groups.setdefault(re.sub(r"\d+(?:\.\d+)?", "N", err.lower()), []).append(err)
    return [(errs[0], len(errs)) for errs in groups.values()]


def _words(text: str) -> set[str]:
    return {stem(w) for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOPWORDS}


def _refs(name: str, calls: list[Tool], messages: list[Msg]) -> list[str]:
    """Explicit message ids; else messages naming the tool; else the best lexical match per
    call; else the first user message (the request the session's tool use served)."""
    explicit = [c.message_id for c in calls if c.message_id]
    if explicit:
        return list(dict.fromkeys(explicit))
    pattern = re.compile(rf"\b{re.escape(name)}\b", re.I)
    named = [m.id for m in messages if pattern.search(m.content)]
    if named:
        return named
    refs: list[str] = []
    for c in calls:
        want = _words(c.input)
        best, best_overlap = None, 1
        for m in messages:
            overlap = len(want & _words(m.content))
            if overlap > best_overlap:
                best, best_overlap = m.id, overlap
        if best and best not in refs:
            refs.append(best)
    if not refs:
        refs = [m.id for m in messages if m.is_user][:1]
    return refs


def extract_skills(messages: list[Msg], tools: list[Tool]) -> list[dict[str, Any]]:
    by_name: dict[str, list[Tool]] = {}
    for t in tools:
        by_name.setdefault(t.name, []).append(t)
    memories: list[dict[str, Any]] = []
    for name, calls in by_name.items():
        ok = [c for c in calls if c.success]
        kind = calls[0].kind
        keywords = _keywords([c.input for c in ok] + [c.output for c in ok])
        example = truncate_words(normalize_space(ok[0].input), 12) if ok and ok[0].input else ""
        best_for = ", ".join(keywords)
        if example:
            best_for = f'{best_for} (e.g. "{example}")' if best_for else f'e.g. "{example}"'
        failures = _failures(calls)
        common_failures = "; ".join(f"{err} ({n}x)" for err, n in failures)
        avg = sum(c.duration_ms for c in calls) // max(1, len(calls))
        tokens = sum(c.tokens for c in calls)
        usage = (
            f"{len(calls)} call{'s' if len(calls) != 1 else ''}, {len(ok)} succeeded, "
            f"avg {avg} ms, {tokens} tokens"
        )
        overview = [f"- usage: {usage}"]
        if best_for:
            overview.append(f"- best for: {best_for}")
        if common_failures:
            overview.append(f"- common failures: {common_failures}")
        content = []
        for c in calls:
            if c.success:
                content.append(
                    f"- ok: {truncate_words(normalize_space(c.input), 25)} → "
                    f"{truncate_words(normalize_space(c.output), 25)}"
                )
            else:
                content.append(
                    f"- failed: {truncate_words(normalize_space(c.input), 25)} → "
                    f"{normalize_space(c.error)}"
                )
        abstract = f"{name} ({kind}): {usage}"
        if keywords:
            abstract += f"; best for {', '.join(keywords[:3])}"
        if failures:
            abstract += f"; fails with {truncate_words(failures[0][0], 10)}"
        memories.append(
            {
                "category": "skills",
                "routing_key": name,
                "abstract": abstract,
                "overview": "\n".join(overview),
                "content": "\n".join(content),
                "confidence": round(min(0.9, 0.6 + 0.1 * min(len(calls), 3)), 2),
                "source_refs": _refs(name, calls, messages),
                "tool_name": name,
                "skill_name": name if kind == "skill" else "",
                "best_for": best_for,
                "common_failures": common_failures,
            }
        )
    return memories
