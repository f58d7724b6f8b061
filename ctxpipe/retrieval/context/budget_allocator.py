"""Token budgets: allocation by profile, the long-conversation adjustment, and
priority ranking with truncation.

Allocation of a total budget ``T``:

- the system prompt gets what it needs, at most ``system_prompt_tokens`` (500);
- user preferences get ``user_prefs_ratio`` (10 %) of the rest;
- what remains is split by the profile into short-term conversation, long-term memory and
  retrieval (default 40 / 15 / 45). Without retrieval, a third of the retrieval share goes to
  the conversation and the rest to long-term memory (default 55 / 45: "no RAG → STM 55 %");
- past ``history_length_threshold`` turns (20) the conversation share shrinks by
  ``short_term_reduction_ratio`` (0.375: 40 % → 25 %); long-term memory grows by
  ``long_term_increase_ratio`` of itself (15 % → 20 %) and retrieval takes the rest (45 % →
  55 %). The adjustment is applied once (a cap against over-compression).

Every allocation sums to at most ``T``; `PriorityRanker` never returns more than its budget.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from enum import IntEnum

from pydantic import BaseModel, Field, model_validator

from ctxpipe.client.results import TokenBudget
from ctxpipe.retrieval.config import ContextConfig
from ctxpipe.retrieval.tokens import TokenCounter


class BudgetProfile(BaseModel):
    """Ratios for the budget left after the system prompt and user preferences."""

    name: str
    description: str = ""
    short_term_ratio: float = Field(ge=0.0, le=1.0)
    long_term_ratio: float = Field(ge=0.0, le=1.0)
    retrieval_ratio: float = Field(ge=0.0, le=1.0)
    user_prefs_ratio: float = Field(0.10, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _sums_to_one(self) -> BudgetProfile:
        total = self.short_term_ratio + self.long_term_ratio + self.retrieval_ratio
        if total > 0 and abs(total - 1.0) > 1e-6:
            raise ValueError(
                f"profile {self.name!r}: short/long/retrieval ratios must sum to 1.0, not {total}"
            )
        return self

    @property
    def disabled(self) -> bool:
        return (
            self.short_term_ratio + self.long_term_ratio + self.retrieval_ratio == 0
            and self.user_prefs_ratio == 0
        )


def _p(name: str, desc: str, st: float, lt: float, rt: float, up: float = 0.10) -> BudgetProfile:
    return BudgetProfile(
        name=name,
        description=desc,
        short_term_ratio=st,
        long_term_ratio=lt,
        retrieval_ratio=rt,
        user_prefs_ratio=up,
    )


# The budget profiles, named for what they are used for (the original names are aliases).
DEFAULT_PROFILES: dict[str, BudgetProfile] = {
    p.name: p
    for p in (
        _p("default", "balanced allocation (fallback)", 0.40, 0.15, 0.45),
        _p("search", "lookups: prioritise retrieval results", 0.30, 0.10, 0.60),
        _p("task", "doing a task: more conversation, little retrieval", 0.55, 0.25, 0.20),
        _p("recall", "questions about the past: long-term memory first", 0.20, 0.50, 0.30),
        _p("external", "the caller manages context itself: nothing but the system prompt",
           0.0, 0.0, 0.0, 0.0),
    )
}  # fmt: skip
PROFILE_ALIASES = {
    "memo_search": "search",
    "schedule_create": "task",
    "schedule_query": "task",
    "amazing": "default",
    "geek": "external",
    "evolution": "external",
}


class ProfileRegistry:
    """Profiles by name, with overrides; unknown names fall back to ``default``."""

    def __init__(self, profiles: dict[str, BudgetProfile] | None = None) -> None:
        self._profiles = dict(DEFAULT_PROFILES if profiles is None else profiles)
        if "default" not in self._profiles:
            self._profiles["default"] = DEFAULT_PROFILES["default"]

    def names(self) -> list[str]:
        return sorted(self._profiles)

    def set(self, profile: BudgetProfile) -> None:
        self._profiles[profile.name] = profile

    def get(self, name: str | None) -> tuple[BudgetProfile, bool]:
        """(profile, found) — `found` is False when the default was used as a fallback."""
        key = (name or "default").strip().lower()
        key = PROFILE_ALIASES.get(key, key)
        if key in self._profiles:
            return self._profiles[key], True
        return self._profiles["default"], False


SECTIONS = ("system_prompt", "user_prefs", "short_term", "long_term", "retrieval")


class BudgetAllocator:
    def __init__(
        self, config: ContextConfig | None = None, registry: ProfileRegistry | None = None
    ) -> None:
        self.config = config or ContextConfig()
        self.registry = registry or ProfileRegistry()

    def allocate(
        self,
        total: int,
        *,
        has_retrieval: bool = True,
        profile: str | None = None,
        history_length: int = 0,
        system_tokens: int | None = None,
    ) -> TokenBudget:
        cfg = self.config
        total = int(total) if total and total > 0 else cfg.default_budget
        prof, _ = self.registry.get(profile)
        reserve = cfg.system_prompt_tokens
        if system_tokens is not None:
            reserve = min(reserve, max(0, system_tokens))
        system = min(reserve, total)
        remaining = total - system
        if prof.disabled:
            return TokenBudget(total=total, system_prompt=system, profile=prof.name)
        prefs = int(remaining * prof.user_prefs_ratio)
        remaining -= prefs
        st, lt, rt = prof.short_term_ratio, prof.long_term_ratio, prof.retrieval_ratio
        if not has_retrieval:
            st, lt, rt = st + rt / 3.0, lt + rt * 2.0 / 3.0, 0.0
        long_conv = history_length > cfg.history_length_threshold
        if long_conv:
            freed = st * cfg.short_term_reduction_ratio
            st -= freed
            lt_gain = min(freed, lt * cfg.long_term_increase_ratio)
            if rt > 0:
                lt, rt = lt + lt_gain, rt + (freed - lt_gain)
            else:
                lt += freed
        short, long_, retr = int(remaining * st), int(remaining * lt), int(remaining * rt)
        short, long_, retr = _ensure_minimums([short, long_, retr], cfg.min_segment_tokens)
        budget = TokenBudget(
            total=total,
            system_prompt=system,
            user_prefs=prefs,
            short_term=short,
            long_term=long_,
            retrieval=retr,
            profile=prof.name,
            long_conversation=long_conv,
        )
        assert budget.allocated <= total
        return budget


def _ensure_minimums(values: list[int], minimum: int) -> tuple[int, int, int]:
    """Raise small non-zero shares to `minimum` by taking from the largest one (never total)."""
    vals = list(values)
    for i, v in enumerate(vals):
        if 0 < v < minimum:
            big = max(range(len(vals)), key=lambda j: vals[j])
            need = minimum - v
            if big != i and vals[big] - need >= minimum:
                vals[big] -= need
                vals[i] = minimum
    return vals[0], vals[1], vals[2]


class ContextPriority(IntEnum):
    """Priorities (higher first)."""

    SYSTEM = 100
    USER_QUERY = 90
    RECENT_TURNS = 80
    RETRIEVAL = 70
    EPISODIC = 60
    PREFERENCES = 50
    OLDER_TURNS = 40


class ContextSegment(BaseModel):
    """One piece of context: a message, a memory line, a retrieved chunk, a header…"""

    key: str
    content: str
    section: str
    priority: int
    score: float = 0.0
    order: int = 0
    tokens: int = -1
    truncatable: bool = True
    truncated: bool = False
    source_refs: list[str] = Field(default_factory=list)
    uri: str = ""
    level: int | None = None


def rank_segments(segments: Iterable[ContextSegment]) -> list[ContextSegment]:
    """Priority first, then score, then the order they were given in."""
    return sorted(segments, key=lambda s: (-s.priority, -s.score, s.order))


class PriorityRanker:
    """Sort by priority, keep what fits, truncate what partly fits."""

    def __init__(self, counter: TokenCounter, min_truncated_tokens: int = 12) -> None:
        self.counter = counter
        self.min_truncated_tokens = min_truncated_tokens

    def cost(self, seg: ContextSegment) -> int:
        if seg.tokens < 0:
            seg.tokens = self.counter.count(seg.content)
        return seg.tokens

    def rank_and_truncate(
        self,
        segments: Iterable[ContextSegment],
        budget: int,
        *,
        keep: Callable[[ContextSegment], bool] | None = None,
    ) -> list[ContextSegment]:
        """Segments that fit in `budget` tokens, highest priority first.

        A segment that does not fit is truncated to the tokens left when at least
        `min_truncated_tokens` remain and it is truncatable; otherwise it is dropped and the
        next (lower priority, maybe smaller) one is tried. `keep` may veto segments."""
        chosen: list[ContextSegment] = []
        used = 0
        for seg in rank_segments(segments):
            if keep is not None and not keep(seg):
                continue
            cost = self.cost(seg)
            left = budget - used
            if cost <= left:
                chosen.append(seg)
                used += cost
                continue
            if seg.truncatable and left >= self.min_truncated_tokens:
                text = self.counter.truncate(seg.content, left)
                n = self.counter.count(text)
                if text and n <= left:
                    chosen.append(
                        seg.model_copy(update={"content": text, "tokens": n, "truncated": True})
                    )
                    used += n
        return chosen


__all__ = [
    "DEFAULT_PROFILES",
    "SECTIONS",
    "BudgetAllocator",
    "BudgetProfile",
    "ContextPriority",
    "ContextSegment",
    "PriorityRanker",
    "ProfileRegistry",
    "TokenBudget",
    "rank_segments",
]
