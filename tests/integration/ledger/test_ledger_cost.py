"""What the registered commits cost: the ledger's sums of their LLM usage, in aggregate and per
phase, and the same sums over commits run by the steps."""

from __future__ import annotations

from typing import Any

import pytest
from ledger_world import CTX, MESSAGES, Ledger, MakeComponents, make_req, row_of, run_all

from ctxpipe.commit import steps
from ctxpipe.core.enums import CommitPhase
from ctxpipe.extraction.extractors import EXTRACTOR_NAMES


def test_what_the_registered_commits_cost(ledger: Ledger) -> None:
    def stats(calls: int, prompt: int, by_phase: dict[str, dict[str, int]]) -> dict[str, Any]:
        return {
            "stats": {
                "llm_calls": calls,
                "llm_prompt_tokens": prompt,
                "llm_completion_tokens": calls * 10,
                "llm_by_phase": by_phase,
            }
        }

    empty = ledger.llm_cost()
    assert (empty.commits, empty.messages, empty.llm_calls, empty.by_phase) == (0, 0, 0, {})
    ledger.create("a", CTX, {"messages": [{}, {}, {}]})
    ledger.create("b", CTX, {"messages": [{}]})
    ledger.create("running", CTX, {"messages": [{}]})
    ledger.create("no-result", CTX, {"messages": [{}]})
    archive = {"calls": 1, "prompt_tokens": 100, "completion_tokens": 10, "retries": 1}
    plan = {"calls": 2, "prompt_tokens": 50, "completion_tokens": 20, "retries": 0}
    ledger.advance(
        "a", CommitPhase.REGISTERED, result=stats(3, 150, {"archive": archive, "plan": plan})
    )
    ledger.advance("b", CommitPhase.REGISTERED, result=stats(1, 100, {"archive": archive}))
    ledger.advance("running", CommitPhase.WRITTEN, result=stats(9, 900, {"plan": plan}))
    ledger.advance("no-result", CommitPhase.REGISTERED)
    cost = ledger.llm_cost()
    assert (cost.commits, cost.messages, cost.llm_calls) == (2, 4, 4)
    assert (cost.prompt_tokens, cost.completion_tokens) == (250, 40)
    assert list(cost.by_phase) == ["archive", "plan"]
    # stats written before the structured-output counters read back with them at zero
    zero = {"repaired": 0, "retried": 0, "failed": 0}
    assert cost.by_phase["archive"].model_dump() == {
        "calls": 2,
        "prompt_tokens": 200,
        "completion_tokens": 20,
        "retries": 2,
        **zero,
    }
    assert cost.by_phase["plan"].model_dump() == {**plan, **zero}
    assert cost.calls_per_100_messages == 100.0


def test_the_cost_of_each_commit_per_phase_and_in_aggregate(
    ledger: Ledger, make_components: MakeComponents
) -> None:
    c = make_components()
    for cid, session in (("cost-1", "s1"), ("cost-2", "s2")):
        steps.submit(ledger, make_req(cid, session))
        run_all(c, ledger, cid)
    steps.submit(ledger, make_req("cost-3", session="s3"))  # accepted, not run

    stats = row_of(ledger, "cost-1").result["stats"]
    by_phase = stats["llm_by_phase"]
    # one call for the summary and every extractor (the archive step's), none of their own
    assert by_phase["archive"]["calls"] == 1
    assert not any(by_phase.get(f"extract_{n}", {}).get("calls") for n in EXTRACTOR_NAMES)
    assert sum(p["calls"] for p in by_phase.values()) == stats["llm_calls"] >= 1
    assert sum(p["prompt_tokens"] for p in by_phase.values()) == stats["llm_prompt_tokens"]

    cost = ledger.llm_cost()
    second = row_of(ledger, "cost-2").result["stats"]
    assert cost.commits == 2 and cost.messages == 2 * len(MESSAGES)
    assert cost.llm_calls == stats["llm_calls"] + second["llm_calls"]
    for phase, usage in cost.by_phase.items():  # per phase, summed over both commits
        mine = [s["llm_by_phase"].get(phase, {}) for s in (stats, second)]
        assert usage.calls == sum(m.get("calls", 0) for m in mine)
        assert usage.prompt_tokens == sum(m.get("prompt_tokens", 0) for m in mine)
    assert sum(u.calls for u in cost.by_phase.values()) == cost.llm_calls
    assert cost.calls_per_100_messages == pytest.approx(100 * cost.llm_calls / 6)
    backlog = ledger.backlog()
    assert backlog.in_flight == 1 and backlog.finished_recently == 2
    assert backlog.oldest_age_s is not None and backlog.oldest_age_s >= 0
