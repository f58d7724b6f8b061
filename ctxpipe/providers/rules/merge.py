"""`policy.merge_bundle`: fold new L0/L1/L2 text into an existing memory, line by line.

Every old line is kept. A new line that is near-identical to an active old line (same polarity
and token Jaccard ≥ 0.8, or adding no new content tokens) only contributes its message refs.
A new line that contradicts an active old line wins: the old line stays, closed — marked
``(superseded: <new fact>)`` and, when the new line is dated, valid until the new line's
``valid from``, the session that replaced it — and the pair is reported in `conflicts`.
Contradiction means same single-valued attribute with a different value ("works as …",
"lives in …", "key: …"; a fact that ends one, "no longer works at Acme", replaces the facts
naming its object), opposite polarity on the same object ("likes X" / "dislikes X"), or a
different choice of the same kind ("prefers X" / "prefers Y" sharing a word, or both short
names). The abstract is re-synthesised from the merged active facts, so merging the same new
bundle twice yields exactly the same abstract/overview/content as merging it once.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import re
from collections.abc import Iterator
from typing import Any

from ctxpipe.providers.rules.facts import (
    ENDS,
    Fact,
    attribute_conflict,
    attribute_of,
    fact_tokens,
    object_tokens,
    parse_lines,
    polarity,
    render_lines,
    synthesize,
)
from ctxpipe.providers.rules.profile import profile_abstract
from ctxpipe.providers.rules.text import containment, jaccard

CHOICE_PREDICATES = frozenset({"prefers", "would rather"})
REPLACE_KEYS = frozenset({"usage:"})  # counters: the newest value simply replaces the old one
NEAR_JACCARD = 0.8  # two lines sharing this much of their words say the same thing


def near_identical(old: Fact, new: Fact) -> bool:
    if polarity(old.predicate) != polarity(new.predicate):
        return False
    if old.predicate.endswith(":") and old.predicate != new.predicate:
        return False
    if (old.predicate in ENDS) != (new.predicate in ENDS):  # "no longer works at X" ≠ "works at X"
        return False
    a, b = fact_tokens(old), fact_tokens(new)
    if not a or not b:
        return old.text.strip().lower() == new.text.strip().lower()
    return jaccard(a, b) >= NEAR_JACCARD or containment(b, a) == 1.0


def _short_name(text: str) -> bool:
    return len(text.split()) <= 3 and bool(re.search(r"[A-Z]", text))


def conflicts_with(old: Fact, new: Fact) -> bool:
    """Does `new` contradict the (active, not near-identical) `old`?"""
    if not old.bullet or not new.bullet:
        return False
    po, pn = old.predicate, new.predicate
    if attribute_of(po) is not None and attribute_of(po) == attribute_of(pn):
        return attribute_conflict(old, new)
    oa, ob = object_tokens(old), object_tokens(new)
    if polarity(po) * polarity(pn) == -1:
        return bool(oa and ob) and (
            jaccard(oa, ob) >= 0.5 or containment(oa, ob) >= 0.8 or containment(ob, oa) >= 0.8
        )
    if po in CHOICE_PREDICATES and pn in CHOICE_PREDICATES:
        return bool(oa & ob) or (_short_name(old.obj) and _short_name(new.obj))
    return False


def _describe(old: Fact, new: Fact) -> str:
    pred = old.predicate.rstrip(":") or "fact"
    old_v = old.obj if old.predicate else old.text
    new_v = new.obj if new.predicate == old.predicate and new.predicate else new.text
    return f'{pred}: "{old_v}" → "{new_v}"'


def _copy(f: Fact) -> Fact:
    return dataclasses.replace(f, refs=list(f.refs))


class _FactIndex:
    """Where the lines that can match a new line are, so that a merge compares a new line only
    with the old lines sharing a word, an attribute group or an exact text with it — not with
    every old line (a node of a thousand lines merges in linear time, not quadratic)."""

    def __init__(self, facts: list[Fact]) -> None:
        self.facts = facts
        self.by_token: dict[str, list[int]] = {}
        self.by_obj_token: dict[str, list[int]] = {}
        self.by_text: dict[str, list[int]] = {}
        self.by_group: dict[str, list[int]] = {}
        self.choices: list[int] = []
        for i, f in enumerate(facts):
            self._add(i, f)

    def _add(self, i: int, f: Fact) -> None:
        for t in fact_tokens(f):
            self.by_token.setdefault(t, []).append(i)
        pol = polarity(f.predicate)
        if pol:  # only opposite polarities conflict by their objects' words
            for t in object_tokens(f):
                self.by_obj_token.setdefault(f"{pol}:{t}", []).append(i)
        self.by_text.setdefault(f.text.strip().lower(), []).append(i)
        group = attribute_of(f.predicate)
        if group is not None:
            self.by_group.setdefault(group, []).append(i)
        if f.predicate in CHOICE_PREDICATES:
            self.choices.append(i)

    def append(self, f: Fact) -> None:
        self.facts.append(f)
        self._add(len(self.facts) - 1, f)

    def near(self, n: Fact) -> Iterator[Fact]:
        """The lines `near_identical` could hold true for, in order, lazily (a caller that
        wants the first match stops there)."""
        tokens = sorted(fact_tokens(n), key=lambda t: (len(self.by_token.get(t, ())), t))
        # prefix filter: a line sharing >= 80% of n's words (Jaccard >= 0.8 implies it) or all
        # of them holds at least one of n's `len - ceil(0.8 len) + 1` rarest words
        keep = len(tokens) - math.ceil(NEAR_JACCARD * len(tokens)) + 1
        lists = [self.by_token.get(t, []) for t in tokens[:keep]]
        lists.append(self.by_text.get(n.text.strip().lower(), []))  # a line without words
        last = -1
        for i in heapq.merge(*lists):  # each list is in index order
            if i != last:
                last = i
                yield self.facts[i]

    def conflicting(self, n: Fact) -> list[int]:
        """Indexes of the lines `conflicts_with` could hold true for, in order."""
        found: set[int] = set()
        group = attribute_of(n.predicate)
        if group is not None:
            found.update(self.by_group.get(group, ()))
        pol = polarity(n.predicate)
        if pol:
            for t in object_tokens(n):
                found.update(self.by_obj_token.get(f"{-pol}:{t}", ()))
        if n.predicate in CHOICE_PREDICATES:
            found.update(self.choices)
        return sorted(found)


def merge_facts(old: list[Fact], new: list[Fact]) -> tuple[list[Fact], list[str], int, int]:
    """(merged lines, conflicts, lines added, duplicates folded)."""
    index = _FactIndex([_copy(f) for f in old])
    conflicts: list[str] = []
    added = folded = 0
    incoming_texts = {f.text.lower() for f in new}
    for incoming in _settle(new):
        n = _copy(incoming)
        if not n.text:
            continue
        if n.superseded:  # history carried by the new bundle: keep once
            if any(r.superseded and near_identical(r, n) for r in index.near(n)):
                continue
            same = next((r for r in index.near(n) if r.active and near_identical(r, n)), None)
            if same is not None:
                same.refs.extend(r for r in n.refs if r not in same.refs)
            else:
                index.append(n)
            continue
        dup = next((r for r in index.near(n) if r.active and near_identical(r, n)), None)
        if dup is None:  # old news: what superseded this line arrives in the same bundle
            dup = next(
                (
                    r
                    for r in index.near(n)
                    if r.superseded and _superseder(r) in incoming_texts and near_identical(r, n)
                ),
                None,
            )
        if dup is not None:
            dup.refs.extend(r for r in n.refs if r not in dup.refs)
            dup.evidence = dup.evidence or n.evidence
            folded += 1
            continue
        if n.predicate in REPLACE_KEYS:
            kept = [r for r in index.facts if r.predicate != n.predicate]
            index = _FactIndex([*kept, n])
            added += 1
            continue
        for i in index.conflicting(n):
            r = index.facts[i]
            if r.active and conflicts_with(r, n):
                _close(r, n)
                conflicts.append(_describe(r, n))
        index.append(n)
        added += 1
    return index.facts, conflicts, added, folded


def _close(old: Fact, new: Fact) -> None:
    """`old` is replaced by `new`: superseded by it, valid until it became true."""
    old.superseded = new.text
    old.valid_to = old.valid_to or new.valid_from


def _superseder(fact: Fact) -> str:
    return re.sub(r"^later in the session:\s*", "", fact.superseded).lower()


def _settle(facts: list[Fact]) -> list[Fact]:
    """Resolve contradictions inside one bundle first: the later line wins."""
    out = [_copy(f) for f in facts]
    index = _FactIndex(out)
    for i, f in enumerate(out):
        if not f.active:
            continue
        for j in index.conflicting(f):  # g conflicts with f only if f could conflict with g
            g = out[j]
            if j > i and g.active and not near_identical(f, g) and conflicts_with(f, g):
                _close(f, g)
                break
    return out


def _label(abstract: str) -> str:
    head, sep, _ = abstract.partition(": ")
    return head.strip() if sep and 0 < len(head.split()) <= 8 else ""


def merged_abstract(category: str, facts: list[Fact], old_abs: str, new_abs: str) -> str:
    if not facts:
        return new_abs.strip() or old_abs.strip() or "(empty)"
    if category == "profile":
        return profile_abstract(facts)
    label = _label(new_abs) or _label(old_abs)
    body = [f for f in facts if not f.predicate.endswith(":")]
    return synthesize(label, body or facts)


def merge_bundle(variables: dict[str, Any]) -> dict[str, Any]:
    category = str(variables.get("category") or "")
    old_abs = str(variables.get("existing_abstract") or "")
    new_abs = str(variables.get("new_abstract") or "")
    old_ov = parse_lines(str(variables.get("existing_overview") or "")) or (
        parse_lines(f"- {old_abs}") if old_abs else []
    )
    new_ov = parse_lines(str(variables.get("new_overview") or "")) or (
        parse_lines(f"- {new_abs}") if new_abs else []
    )
    overview, conflicts, added, folded = merge_facts(old_ov, new_ov)
    content, c_conflicts, _, _ = merge_facts(
        parse_lines(str(variables.get("existing_content") or "")),
        parse_lines(str(variables.get("new_content") or "")),
    )
    for c in c_conflicts:
        if c not in conflicts and not any(_same_conflict(c, x) for x in conflicts):
            conflicts.append(c)
    abstract = merged_abstract(category, overview or content, old_abs, new_abs)
    kept = len(old_ov)
    reason = (
        f"kept all {kept} existing line(s); added {added} new; folded {folded} near-duplicate(s)"
    )
    if conflicts:
        reason += f"; {len(conflicts)} conflict(s) resolved in favour of the new information"
    if not added and not conflicts:
        reason += "; nothing new (already merged)"
    return {
        "abstract": abstract,
        "overview": render_lines(overview),
        "content": render_lines(content),
        "reason": reason,
        "conflicts": conflicts,
    }


def _same_conflict(a: str, b: str) -> bool:
    return a.split(":", 1)[0] == b.split(":", 1)[0] and a.split("→")[-1] == b.split("→")[-1]
