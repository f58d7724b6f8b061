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

import bisect
import heapq
import math
import re
from collections.abc import Collection, Iterator, Mapping
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


def _filed_under(f: Fact) -> list[str]:
    """The keys an active bullet line is filed under for the lines that may contradict it:
    its attribute (stated or ended), its object's words by polarity, and — for a choice — its
    object's words and whether it is a short name (`conflicts_with`'s three ways)."""
    predicate = f.predicate
    group = attribute_of(predicate)
    keys = [] if group is None else [("end:" if predicate in ENDS else "set:") + group]
    return keys + _object_keys(f, polarity(predicate))


def _looked_up_under(n: Fact) -> list[str]:
    """The keys the lines `n` may contradict are filed under: a superset of those lines, so a
    line is compared only with its possible rivals, not with every line of the memory."""
    predicate = n.predicate
    group = attribute_of(predicate)
    keys = [] if group is None else ["set:" + group]
    if group is not None and predicate not in ENDS:  # two facts ending one never conflict
        keys.append("end:" + group)
    return keys + _object_keys(n, -polarity(predicate))


def _object_keys(f: Fact, pol: int) -> list[str]:
    """`f`'s object words under polarity `pol` (0: none), and as a choice where it is one."""
    keys = [f"{pol}:{t}" for t in object_tokens(f)] if pol else []
    if f.predicate in CHOICE_PREDICATES:
        keys.extend(f"choice:{t}" for t in object_tokens(f))
        if _short_name(f.obj):
            keys.append("choice:short-name")
    return keys


class _FactIndex:
    """Where the lines that can match a new line are, so that a merge compares a new line only
    with the lines sharing a word or an exact text with it, and with the active lines it may
    contradict — not with every old line (a node of thousands of lines merges in linear time,
    not quadratic). Active lines and closed (superseded) ones are filed apart: a merge asks
    for one kind or the other, and lines only ever go from active to closed."""

    def __init__(self, facts: list[Fact]) -> None:
        self.facts = facts
        # active lines, in index order (a dict is an ordered set a closed line leaves)
        self.live_words: dict[str, dict[int, None]] = {}
        self.live_texts: dict[str, dict[int, None]] = {}
        self.rivals: dict[str, dict[int, None]] = {}  # active bullet lines, by `_filed_under`
        # superseded lines, in index order (lines close in any order: kept sorted)
        self.closed_words: dict[str, list[int]] = {}
        self.closed_texts: dict[str, list[int]] = {}
        for i, f in enumerate(facts):
            self._add(i, f)

    def _add(self, i: int, f: Fact) -> None:
        if f.active:
            for t in fact_tokens(f):
                self.live_words.setdefault(t, {})[i] = None
            self.live_texts.setdefault(_text_key(f), {})[i] = None
            if f.bullet:
                for key in _filed_under(f):
                    self.rivals.setdefault(key, {})[i] = None
        elif f.superseded:
            self._add_closed(i, f)

    def _add_closed(self, i: int, f: Fact) -> None:
        for t in fact_tokens(f):
            bisect.insort(self.closed_words.setdefault(t, []), i)
        bisect.insort(self.closed_texts.setdefault(_text_key(f), []), i)

    def append(self, f: Fact) -> None:
        self.facts.append(f)
        self._add(len(self.facts) - 1, f)

    def close(self, i: int, by: Fact) -> None:
        """Active line `i` is replaced by `by`: it is closed, filed with the closed lines, and
        no longer anyone's rival."""
        old = self.facts[i]
        for t in fact_tokens(old):
            self.live_words[t].pop(i, None)
        self.live_texts[_text_key(old)].pop(i, None)
        if old.bullet:
            for key in _filed_under(old):
                self.rivals[key].pop(i, None)
        _close(old, by)
        self._add_closed(i, old)

    def near(self, n: Fact, *, closed: bool = False) -> Iterator[Fact]:
        """The active (or the superseded) lines `near_identical` could hold true for, in
        order, lazily (a caller that wants the first match stops there)."""
        words: Mapping[str, Collection[int]] = self.closed_words if closed else self.live_words
        texts: Mapping[str, Collection[int]] = self.closed_texts if closed else self.live_texts
        tokens = sorted(fact_tokens(n), key=lambda t: (len(words.get(t, ())), t))
        # prefix filter: a line sharing >= 80% of n's words (Jaccard >= 0.8 implies it) or all
        # of them holds at least one of any `len - ceil(0.8 len) + 1` of them: the rarest
        keep = len(tokens) - math.ceil(NEAR_JACCARD * len(tokens)) + 1
        lists = [words.get(t, ()) for t in tokens[:keep]]
        lists.append(texts.get(_text_key(n), ()))  # a line without words
        last = -1
        for i in heapq.merge(*lists):  # each one is in index order
            if i != last:
                last = i
                yield self.facts[i]

    def conflicting(self, n: Fact) -> list[int]:
        """Indexes of the active lines `conflicts_with` could hold true for, in order."""
        if not n.bullet:  # a free-text line never conflicts
            return []
        found: set[int] = set()
        for key in _looked_up_under(n):
            found.update(self.rivals.get(key, ()))
        return sorted(found)


def _text_key(f: Fact) -> str:
    return f.text.strip().lower()


def merge_facts(old: list[Fact], new: list[Fact]) -> tuple[list[Fact], list[str], int, int]:
    """(merged lines, conflicts, lines added, duplicates folded)."""
    index = _FactIndex([f.copy() for f in old])
    conflicts: list[str] = []
    added = folded = 0
    # text → the line the last incoming line of that text went to. While that line is active it
    # is the first active near-identical line for the same text again (lines only ever close,
    # and new ones go last), so a repeated line costs a lookup, not a search.
    went_to: dict[str, Fact] = {}
    settled = _settle(new)  # copies: the caller's lines are not changed
    # the bundle's latest word: a line it closes itself is no news against an old line
    latest = {f.text.lower() for f in settled if f.active}
    described: set[str] = set()
    for n in settled:
        if not n.text:
            continue
        same_text = went_to.get(n.text) if not n.superseded else None
        if same_text is not None and same_text.active:
            same_text.refs.extend(r for r in n.refs if r not in same_text.refs)
            same_text.evidence = same_text.evidence or n.evidence
            folded += 1
            continue
        if n.superseded:  # history carried by the new bundle: kept once, with all its refs
            same = next((r for r in index.near(n, closed=True) if near_identical(r, n)), None)
            if same is None:
                same = next((r for r in index.near(n) if near_identical(r, n)), None)
            if same is not None:
                same.refs.extend(r for r in n.refs if r not in same.refs)
            else:
                index.append(n)
            continue
        dup = next((r for r in index.near(n) if near_identical(r, n)), None)
        if dup is None:  # old news: what superseded this line is the bundle's latest word
            dup = next(
                (
                    r
                    for r in index.near(n, closed=True)
                    if _superseder(r) in latest and near_identical(r, n)
                ),
                None,
            )
        if dup is not None:
            dup.refs.extend(r for r in n.refs if r not in dup.refs)
            dup.evidence = dup.evidence or n.evidence
            went_to[n.text] = dup
            folded += 1
            continue
        went_to[n.text] = n
        if n.predicate in REPLACE_KEYS:
            kept = [r for r in index.facts if r.predicate != n.predicate]
            index = _FactIndex([*kept, n])
            went_to = {n.text: n}  # the lines dropped must not be folded into
            added += 1
            continue
        for i in index.conflicting(n):
            r = index.facts[i]
            if conflicts_with(r, n):
                description = _describe(r, n)
                if description not in described:  # a thousand equal lines: one conflict
                    described.add(description)
                    conflicts.append(description)
                index.close(i, n)
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
    """Resolve contradictions inside one bundle first: a line is closed by the first later
    active line that contradicts it (the later line wins)."""
    out = [f.copy() for f in facts]
    filed: dict[str, list[int]] = {}  # key → the active bullet lines filed under it, in order
    for j, g in enumerate(out):
        if g.bullet and g.active:
            for key in _filed_under(g):
                filed.setdefault(key, []).append(j)
    # what decides a line's rival is its text alone, and the later lines' state does not change
    # here, so the rival found for a text stands for its repeats up to that rival
    rival_of: dict[str, int | None] = {}
    for i, f in enumerate(out):
        if not f.active or not f.bullet:
            continue
        rival = rival_of.get(f.text, -1)
        if rival is not None and rival <= i:  # not looked for yet (-1), or behind this line
            rival = _first_rival(out, filed, f, i)
            rival_of[f.text] = rival
        if rival is not None:
            _close(f, out[rival])
    return out


def _after(lines: list[int], i: int) -> Iterator[int]:
    """The entries of the ordered `lines` greater than `i`, lazily."""
    for k in range(bisect.bisect_right(lines, i), len(lines)):
        yield lines[k]


def _first_rival(out: list[Fact], filed: dict[str, list[int]], f: Fact, i: int) -> int | None:
    """The first line after `i` that contradicts line `i` (`f`), or None."""
    after = [_after(filed.get(key, []), i) for key in _looked_up_under(f)]
    last = -1
    for j in heapq.merge(*after):  # each list is in index order: the first rival comes first
        if j != last:
            last = j
            g = out[j]
            if not near_identical(f, g) and conflicts_with(f, g):
                return j
    return None


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
