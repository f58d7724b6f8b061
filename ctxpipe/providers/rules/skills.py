"""Skills: one usage guide per distinct tool/skill in `tools`.

`best_for`: the key phrases of the successful calls' inputs and outputs (`text.key_phrases`)
and one example input; `common_failures`: the distinct errors of the failed calls, numbers
aside ("allocate 2.50 GiB" and "allocate 1.20 GiB" are one failure); `source_refs`: the
calls' `message_id`s, else the messages that name the tool or share most words with its input.
"""

from __future__ import annotations

import re
from typing import Any

from ctxpipe.core.session import ToolUse
from ctxpipe.core.text import STOPWORDS, normalize_space, stem, words
from ctxpipe.providers.rules.inputs import Msg
from ctxpipe.providers.rules.lines import memory
from ctxpipe.providers.rules.text import key_phrases, phrases, tf_idf, truncate_words


def _keywords(calls: list[ToolUse]) -> list[str]:
    """The key phrases of the calls' inputs and outputs (`text.key_phrases`)."""
    texts = [t for c in calls for t in (c.input, c.output) if t]
    return key_phrases([(p, 1) for t in texts for p in phrases(t)], tf_idf(texts))


def _failures(calls: list[ToolUse]) -> list[tuple[str, int]]:
    """(the first error, how many) per error with its numbers left out."""
    groups: dict[str, list[str]] = {}
    for c in (c for c in calls if not c.success):
        err = normalize_space(c.error or "failed without an error message")
        groups.setdefault(re.sub(r"\d+(?:\.\d+)?", "N", err.lower()), []).append(err)
    return [(errs[0], len(errs)) for errs in groups.values()]


def _stems(text: str) -> set[str]:
    """The stems of the words of `text` (compound tokens such as "batch-size" in parts)."""
    return {stem(w) for w in words(text) if w not in STOPWORDS}


def _refs(name: str, calls: list[ToolUse], messages: list[Msg]) -> list[str]:
    """Explicit message ids; else messages naming the tool; else the best lexical match per
    call; else the first user message (the request the session's tool use served)."""
    explicit = [c.message_id for c in calls if c.message_id]
    pattern = re.compile(rf"\b{re.escape(name)}\b", re.I)
    named = [m.id for m in messages if pattern.search(m.content)]
    lexical: list[str] = []
    for c in calls:  # the first message sharing most (at least two) of the call's words
        want = _stems(c.input or "")
        best = max(messages, key=lambda m: len(want & _stems(m.content)), default=None)
        if best and len(want & _stems(best.content)) > 1:
            lexical.append(best.id)
    first_user = [m.id for m in messages if m.is_user][:1]
    return list(dict.fromkeys(explicit or named or lexical or first_user))


def extract_skills(messages: list[Msg], tools: list[ToolUse]) -> list[dict[str, Any]]:
    by_name = {t.name: [c for c in tools if c.name == t.name] for t in tools}
    memories: list[dict[str, Any]] = []
    for name, calls in by_name.items():
        ok = [c for c in calls if c.success]
        kind = calls[0].kind
        keywords = _keywords(ok)
        example = f'e.g. "{truncate_words(ok[0].input, 12)}"' if ok and ok[0].input else ""
        best_for = f"{', '.join(keywords)} ({example})" if keywords and example else ""
        best_for = best_for or ", ".join(keywords) or example
        failures = _failures(calls)
        common_failures = "; ".join(f"{err} ({n}x)" for err, n in failures)
        avg = sum(c.duration_ms for c in calls) // max(1, len(calls))
        tokens = sum(c.tokens for c in calls)
        usage = (
            f"{len(calls)} call{'s' if len(calls) != 1 else ''}, {len(ok)} succeeded, "
            f"avg {avg} ms, {tokens} tokens"
        )
        fields = {"usage": usage, "best for": best_for, "common failures": common_failures}
        overview = [f"- {field}: {value}" for field, value in fields.items() if value]
        content = [  # each call: what went in, and what came out or the error
            f"- {'ok' if c.success else 'failed'}: {truncate_words(c.input or '', 25)} → "
            + (truncate_words(c.output or "", 25) if c.success else normalize_space(c.error or ""))
            for c in calls
        ]
        abstract = f"{name} ({kind}): {usage}"
        if keywords:
            abstract += f"; best for {', '.join(keywords[:3])}"
        if failures:
            abstract += f"; fails with {truncate_words(failures[0][0], 10)}"
        conf = round(min(0.9, 0.6 + 0.1 * min(len(calls), 3)), 2)
        guide = {"tool_name": name, "skill_name": name if kind == "skill" else ""}
        guide |= {"best_for": best_for, "common_failures": common_failures}
        texts = ("\n".join(overview), "\n".join(content))
        refs = _refs(name, calls, messages)
        memories.append(memory("skills", name, abstract, *texts, conf, refs=refs, **guide))
    return memories
