"""`policy.merge_bundle`: fold new lines into a memory; a change closes the line it replaces.

Every old line is kept. A new line that restates a valid one (`same_statement`) adds its
message ids to it; otherwise it is added and, in a profile or preference memory, closes each
valid line it contradicts or replaces (`supersedes`; the pair is reported in `conflicts`).
Merging the same bundle twice yields the same texts as merging it once (`merge_lines`).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from ctxpipe.core.text import containment, jaccard, stem, token_set
from ctxpipe.core.validity import TEMPORAL_CATEGORIES
from ctxpipe.providers.rules import topics
from ctxpipe.providers.rules.lines import Line, parse_lines, render_lines, synthesize
from ctxpipe.providers.rules.speech import is_negated, split_words, verb_lemma
from ctxpipe.providers.rules.text import lead_in

NEAR_JACCARD = 0.8


_KEY_RE = re.compile(r"^([a-z][a-z ]{0,30}):\s")


@dataclass(frozen=True)
class _Features:
    """What a line's text says (computed once per distinct text)."""

    text: str
    tokens: frozenset[str]
    topic: frozenset[str]
    slots: tuple[str, ...]  # the single-valued attributes it sets, the one it is about first
    negated: bool
    change: bool
    key: str | None


@lru_cache(maxsize=16384)
def _features(text: str) -> _Features:
    verb = topics.main_verb(text)
    # a negation, or a verb that negates by its prefix ("dislikes" against "likes")
    reversed_verb = verb[:3] == "dis" and verb_lemma(verb[3:]) == verb[3:]
    key = _KEY_RE.match(text)
    return _Features(
        text,
        frozenset(token_set(text)),
        frozenset(topics.topic_words(text)),
        topics.slots_of(text),
        is_negated(text) != reversed_verb,
        topics.is_change(text),
        key.group(1) if key else None,
    )


def same_statement(old: _Features, new: _Features) -> bool:
    """Same polarity, and token Jaccard ≥ 0.8 or no content word the old line lacks."""
    if old.negated != new.negated:
        return False
    if not old.tokens or not new.tokens:
        return old.text.lower() == new.text.lower()
    return (
        jaccard(old.tokens, new.tokens) >= NEAR_JACCARD or containment(new.tokens, old.tokens) == 1
    )


def same_topic(old: _Features, new: _Features, owner: frozenset[str] = frozenset()) -> bool:
    """Do their topic words (the memory owner's name aside) overlap by half or more (Dice)?
    One common word ("keep", "feel", "work") between two lines is not a topic."""
    a, b = old.topic - owner, new.topic - owner
    return bool(a & b) and 4 * len(a & b) >= len(a) + len(b)


def supersedes(old: _Features, new: _Features, owner: frozenset[str] = frozenset()) -> bool:
    """Does `new` contradict or replace `old` (valid lines of one owner and category)? It sets
    the single-valued attribute the old line states to a value the old line lacks, or it is
    on the same topic with a reversal: the polarity flips or it says it is a change."""
    if old.slots and old.slots[0] in new.slots:
        return bool(new.topic - old.topic) or old.negated != new.negated
    if not same_topic(old, new, owner):
        return False
    return old.negated != new.negated or new.change


def collapse(lines: list[Line]) -> list[Line]:
    """One bundle's lines with each statement once, where it was said last (the state the
    bundle ends in), carrying the refs of all its repeats."""
    last: dict[tuple[str, bool], Line] = {}
    for ln in lines:
        key = (ln.text, ln.bullet)
        last[key] = last.pop(key) if key in last else replace(ln, refs=[])  # moved to the end
        last[key].add_refs(ln.refs)
    return list(last.values())


def merge_lines(
    old: list[Line], new: list[Line], temporal: bool, owner: str = ""
) -> tuple[list[Line], list[str], int, int]:
    """(merged lines, conflicts "old -> new", lines added, lines folded into old ones).

    The bundle is settled first (`collapse`, then its own lines in order: the later line wins),
    so merging it twice changes nothing. A new line is compared once with each distinct valid
    text; a closed line stays, valid until its successor's ``valid from``.
    `owner` is whom the memory is about (its name is no topic of its own)."""
    new = collapse(new)
    if old:
        new = merge_lines([], new, temporal, owner)[0]
    owner_words = frozenset(
        stem(topics.lemma(w.lower().removesuffix("'s"))) for w in split_words(owner)
    )
    lines = list(old)
    valid: dict[str, list[Line]] = {}
    for ln in lines:
        if ln.active and ln.bullet:
            valid.setdefault(ln.text, []).append(ln)
    # the bundle's valid lines folded into each valid old text: the bundle restated them
    restated: dict[str, list[Line]] = {}
    conflicts: list[str] = []
    added = folded = 0
    # a "key: value" line said once in the bundle is the key's value ("usage:", "status:");
    # a key said several times is a list ("step:", "ok:")
    keys = Counter(k.group(1) for ln in new if (k := _KEY_RE.match(ln.text)))
    for ln in new:
        line, n = replace(ln, refs=list(ln.refs)), _features(ln.text)
        if not ln.bullet:
            if all(f.text != ln.text for f in lines):
                lines.append(line)
                added += 1
            continue
        if line.active:
            same = (g[0] for text, g in valid.items() if same_statement(_features(text), n))
            twin = next(same, None)
        else:  # closed in the bundle: the same valid line, else the same closed one (closed
            # by this line's successor, else by another: the memory already holds the fact)
            same = (f for f in lines if f.bullet and f.text == line.text)
            twin = min(
                same, key=lambda f: (not f.active, f.render() != line.render()), default=None
            )
        if twin is not None:
            twin.add_refs(line.refs)
            folded += 1
            if line.active and twin.active:
                restated.setdefault(twin.text, []).append(line)
            continue
        if line.active:
            for text, group in list(valid.items()):
                f = _features(text)
                keyed = n.key is not None and n.key == f.key and keys[n.key] == 1
                if keyed or (temporal and n.key is None and supersedes(f, n, owner_words)):
                    for g in group:
                        g.close(line)
                    del valid[text]
                    conflicts.append(f"{text} -> {line.text}")
                    # what the bundle restated of the closed line, earlier than this line,
                    # survived this line in the bundle (it was settled first): it stays valid
                    # as a line of its own
                    for kept in restated.pop(text, []):
                        lines.append(kept)
                        valid.setdefault(kept.text, []).append(kept)
                        folded, added = folded - 1, added + 1
            valid.setdefault(line.text, []).append(line)
        lines.append(line)
        added += 1
    return lines, conflicts, added, folded


def headline(lines: list[Line]) -> list[Line]:
    """The valid lines in the order an abstract states them: the single-valued attributes
    (who the user is now: name, work, home, the replies they want) first, then the newest."""
    valid = [ln for ln in lines if ln.active]
    return sorted(reversed(valid), key=lambda ln: topics.slot_of(ln.text) is None)


def merge_bundle(variables: dict[str, Any]) -> dict[str, Any]:
    var = {name: str(value or "") for name, value in variables.items()}
    temporal = var.get("category") in TEMPORAL_CATEGORIES
    old_abs, new_abs = var.get("existing_abstract", ""), var.get("new_abstract", "")
    subject = lead_in(new_abs)[0] or lead_in(old_abs)[0]  # whom the abstract is about
    # a memory without overview lines has its abstract as its one line
    old = parse_lines(var.get("existing_overview", "")) or parse_lines(old_abs and f"- {old_abs}")
    new = parse_lines(var.get("new_overview", "")) or parse_lines(new_abs and f"- {new_abs}")
    overview, conflicts, added, folded = merge_lines(old, new, temporal, subject)
    old_content = parse_lines(var.get("existing_content", ""))
    new_content = parse_lines(var.get("new_content", ""))
    content, more, _, _ = merge_lines(old_content, new_content, temporal, subject)
    conflicts = list(dict.fromkeys(conflicts + more))
    body = overview or content
    abstract = synthesize(subject, headline(body)) if body else (new_abs or old_abs or "(empty)")
    reason = (
        f"kept all {len(old)} existing line(s); added {added} new; folded {folded} duplicate(s)"
    )
    if conflicts:
        reason += f"; {len(conflicts)} line(s) closed as replaced by the new information"
    if not added and not conflicts:
        reason += "; nothing new (already merged)"
    return {
        "abstract": abstract,
        "overview": render_lines(overview),
        "content": render_lines(content),
        "reason": reason,
        "conflicts": conflicts,
    }
