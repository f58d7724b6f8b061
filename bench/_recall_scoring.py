"""Per-query scoring and the tally of bench/locomo_recall.py (metrics in `_grounding`).

Every system's answer to a question is a ranked list of `Item`s — the text the caller reads,
the turn ids it cites, its tokens and the kind of unit it came from. A query is scored on:

- `loose@10`: any evidence turn among the cited ids of the top 10 (the old, too generous
  figure, kept for continuity);
- `any@5`, `any@10`, `all@10`: grounded recall — an item earns only the cited evidence turns
  whose content its text carries;
- `aic@B` for each budget B: the gold answer is in the texts concatenated in rank order up to
  B tokens;
- `tokens@10`, `turns@10` (distinct turns cited by the top 10), `held@10` (those of them whose
  content the text citing them carries: held ÷ cited is how far citations can be trusted),
  `tokens/hit`.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from _grounding import TurnContent, answer_in_context, contains_answer, grounded_turns

BUDGETS = (200, 500, 1000)
GROUNDED = ("any@5", "any@10", "all@10")


@dataclass(frozen=True)
class Item:
    text: str
    cited: frozenset[str]
    tokens: int
    kind: str


def score_items(
    items: Sequence[Item],
    evidence: set[str],
    turns: dict[str, TurnContent],
    answer: object,
    count: Callable[[str], int],
) -> dict[str, float]:
    grounded = [grounded_turns(it.text, it.cited, turns) & evidence for it in items]

    def union(sets: Sequence[set[str] | frozenset[str]]) -> set[str]:
        out: set[str] = set()
        for s in sets:
            out |= s
        return out

    g5, g10 = union(grounded[:5]), union(grounded[:10])
    top = items[:10]
    held = union([grounded_turns(it.text, it.cited, turns) for it in top])
    row = {
        "loose@10": float(bool(union([it.cited for it in top]) & evidence)),
        "any@5": float(bool(g5)),
        "any@10": float(bool(g10)),
        "all@10": float(evidence <= g10),
        "tokens@10": float(sum(it.tokens for it in top)),
        "turns@10": float(len(union([it.cited for it in top]))),
        "held@10": float(len(held)),
        "tokens/hit": float(np.mean([it.tokens for it in top])) if top else 0.0,
    }
    texts = [it.text for it in items]
    for budget in BUDGETS:
        row[f"aic@{budget}"] = float(answer_in_context(texts, answer, budget, count))
    return row


@dataclass(frozen=True)
class Built:
    """A context built at one budget: its text, the turn ids it cites, its tokens."""

    text: str
    cited: frozenset[str]
    tokens: int


def score_context(
    built: dict[int, Built],
    evidence: set[str],
    turns: dict[str, TurnContent],
    answer: object,
) -> dict[str, float]:
    """A context judged as what an agent is given: the answer in the one built at each budget
    (aic@B, whatever the context spent its budget on) and the grounded evidence of the
    largest."""
    row = {f"aic@{b}": float(contains_answer(c.text, answer)) for b, c in built.items()}
    top = built[max(built)]
    grounded = grounded_turns(top.text, top.cited, turns) & evidence
    return row | {
        "loose@10": float(bool(top.cited & evidence)),
        "any@10": float(bool(grounded)),
        "all@10": float(evidence <= grounded),
        "tokens@10": float(top.tokens),
        "turns@10": float(len(top.cited)),
        "held@10": float(len(grounded_turns(top.text, top.cited, turns))),
    }


class Tally:
    """Rows per (system, category, conversation index); means over any subset of them."""

    def __init__(self) -> None:
        self.rows: dict[str, list[tuple[int, int, dict[str, float]]]] = defaultdict(list)
        self.kinds: dict[str, Counter[str]] = defaultdict(Counter)

    def add(
        self,
        system: str,
        category: int,
        conversation: int,
        row: dict[str, float],
        items: Sequence[Item] = (),
    ) -> None:
        self.rows[system].append((category, conversation, row))
        self.kinds[system].update(it.kind for it in items[:10])

    def select(
        self, system: str, category: int | None = None, conversations: set[int] | None = None
    ) -> list[dict[str, float]]:
        return [
            r
            for c, conv, r in self.rows.get(system, [])
            if (category is None or c == category)
            and (conversations is None or conv in conversations)
        ]

    def mean(
        self,
        system: str,
        key: str,
        category: int | None = None,
        conversations: set[int] | None = None,
    ) -> float:
        rows = self.select(system, category, conversations)
        vals = [r[key] for r in rows if key in r]
        return float(np.mean(vals)) if vals else math.nan

    def count(
        self, system: str, category: int | None = None, conversations: set[int] | None = None
    ) -> int:
        return len(self.select(system, category, conversations))

    def kind_shares(self, system: str) -> dict[str, float]:
        kinds = self.kinds.get(system, Counter())
        total = sum(kinds.values())
        return {k: v / total for k, v in kinds.most_common()} if total else {}
