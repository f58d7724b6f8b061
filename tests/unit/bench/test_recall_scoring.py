"""The build_context row of bench/locomo_recall.py: the answer is looked for in the context
built at each budget, grounded evidence in the largest one."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

from _grounding import TurnContent  # noqa: E402
from _recall_scoring import Built, Item, score_context, score_items  # noqa: E402

TURN = "I moved to Lisbon in May and I work at the harbour museum now."
OTHER = "We adopted a grey kitten from the shelter on Friday and named her Pixel."
TURNS = {"D1:3": TurnContent.of(TURN), "D2:7": TurnContent.of(OTHER)}


def test_each_budget_is_judged_on_its_own_context_and_evidence_on_the_largest() -> None:
    small = Built("## Conversation\nuser: where does Ann live?", frozenset(), 12)
    large = Built(f"Ann (8 May 2023): {TURN}", frozenset({"D1:3"}), 30)
    row = score_context({200: small, 1000: large}, {"D1:3"}, TURNS, "Lisbon")
    assert row["aic@200"] == 0.0 and row["aic@1000"] == 1.0
    assert row["any@10"] == row["all@10"] == row["loose@10"] == 1.0
    assert row["tokens@10"] == 30 and row["turns@10"] == 1


def test_citing_the_turn_without_its_words_is_not_grounded() -> None:
    cited_only = Built("Ann moved.", frozenset({"D1:3"}), 5)
    row = score_context({1000: cited_only}, {"D1:3"}, TURNS, "Lisbon")
    assert row["loose@10"] == 1.0 and row["any@10"] == 0.0 and row["aic@1000"] == 0.0


def test_held_counts_only_the_cited_turns_whose_words_the_citing_text_carries() -> None:
    # a context citing two turns and holding one of them (a summary line citing both)
    built = Built(f"Ann (8 May 2023): {TURN}\nAnn: has a pet", frozenset({"D1:3", "D2:7"}), 40)
    row = score_context({1000: built}, {"D1:3"}, TURNS, "Lisbon")
    assert row["turns@10"] == 2 and row["held@10"] == 1
    # ranked items: each item is judged on its own text, not on its neighbours'
    items = [
        Item("Ann has a pet.", frozenset({"D2:7"}), 5, "memory L0"),
        Item(f"Ann (8 May 2023): {TURN}", frozenset({"D1:3"}), 30, "archive turn"),
        Item(OTHER, frozenset(), 20, "archive turn"),
    ]
    row = score_items(items, {"D1:3"}, TURNS, "Lisbon", lambda t: len(t.split()))
    assert row["turns@10"] == 2 and row["held@10"] == 1


def test_find_over_the_bare_query_is_taken_question_by_question() -> None:
    from _recall_latency import pair_ratios

    # one slow bare query (a tail of the baseline) does not make find look fast: the slowest
    # of each is 30 against 60 ms, while find took twice the bare query on every other question
    find = [20.0] * 19 + [30.0]
    bare = [10.0] * 19 + [60.0]
    got = pair_ratios(find, bare)
    assert got == {"p50": 2.0, "p95": 2.0}
    assert pair_ratios([], []) == {}
    assert pair_ratios([12.0, 30.0], [10.0, 10.0]) == {"p50": 2.1, "p95": 2.91}
