"""Profile and preference facts carry their validity through the commit path: a later session
closes the fact it replaces (valid until that session, superseded by the new fact)."""

from __future__ import annotations

from typing import Any

from conftest import commit, request

from ctxpipe.core.enums import CommitStatus
from ctxpipe.core.validity import line_holds, parse_as_of
from ctxpipe.providers.base import run_sync
from ctxpipe.providers.rules import RulesLLM
from ctxpipe.providers.rules.facts import parse_lines

PROFILE = "ctx://acme/users/alice/memories/profile"

BERLIN = [
    {
        "id": "m1",
        "role": "user",
        "created_at": "2023-05-01T10:00:00Z",
        "content": "Hi! I live in Berlin and I work as a nurse.",
    },
    {"id": "m2", "role": "assistant", "content": "Nice to meet you."},
]
LISBON = [
    {
        "id": "n1",
        "role": "user",
        "created_at": "2023-07-01T09:00:00Z",
        "content": "Big news: I moved to Lisbon last week.",
    },
    {"id": "n2", "role": "assistant", "content": "Congratulations on the move!"},
]


def test_a_replaced_fact_is_closed_with_the_session_dates(make_components):
    comp = make_components()
    assert commit(comp, request(BERLIN, commit_id="c1")).status is CommitStatus.SUCCESS
    first = comp.fs.read_node(PROFILE)
    assert all(f.valid_from == "2023-05-01" for f in parse_lines(first.overview))
    assert commit(comp, request(LISBON, session="s2", commit_id="c2")).status is (
        CommitStatus.SUCCESS
    )
    profile = comp.fs.read_node(PROFILE)
    for text in (profile.overview, profile.content):
        facts = {f.text: f for f in parse_lines(text)}
        berlin, lisbon = facts["lives in Berlin"], facts["lives in Lisbon"]
        assert (berlin.valid_from, berlin.valid_to, berlin.superseded) == (
            "2023-05-01",
            "2023-07-01",
            "lives in Lisbon",
        )
        assert (lisbon.valid_from, lisbon.valid_to, lisbon.superseded) == ("2023-07-01", "", "")
        assert not berlin.active and lisbon.active
        assert facts["works as a nurse"].active  # untouched facts keep their first date
        assert facts["works as a nurse"].valid_from == "2023-05-01"
    line = next(ln for ln in profile.overview.splitlines() if "Berlin" in ln)
    assert line.endswith("(valid from 2023-05-01 until 2023-07-01) (superseded: lives in Lisbon)")
    assert not line_holds(line) and line_holds(line, parse_as_of("2023-06-01"))
    assert "Lisbon" in profile.abstract and "Berlin" not in profile.abstract


def test_a_replayed_merge_changes_nothing(make_components):
    comp = make_components()
    commit(comp, request(BERLIN, commit_id="c1"))
    commit(comp, request(LISBON, session="s2", commit_id="c2"))
    before = comp.fs.read_node(PROFILE)
    commit(comp, request(LISBON, session="s2", commit_id="c3"))  # the same session again
    after = comp.fs.read_node(PROFILE)
    assert (after.overview, after.content) == (before.overview, before.content)


class CarelessMergeLLM:
    """The rules LLM, except that its merges read like a model's: the dates of the lines it
    copies are dropped and the replaced fact is only marked superseded."""

    name = "careless"

    def __init__(self) -> None:
        self._inner = RulesLLM()

    async def complete_json(self, prompt_id, variables, schema, ctx=None, usage=None):  # type: ignore[no-untyped-def]
        if prompt_id != "policy.merge_bundle" or variables["category"] != "profile":
            return await self._inner.complete_json(prompt_id, variables, schema, ctx, usage)
        lines = (
            "- works as a nurse [s1:m1]\n"
            "- lives in Berlin [s1:m1] (superseded: lives in Lisbon)\n"
            "- lives in Lisbon [n1]"
        )
        return schema.model_validate(
            {
                "abstract": "User: works as a nurse; lives in Lisbon",
                "overview": lines,
                "content": lines,
                "reason": "moved",
                "conflicts": ["lives in Berlin -> lives in Lisbon"],
            }
        )

    def complete_json_sync(self, *a: Any, **k: Any) -> Any:
        return run_sync(self.complete_json(*a, **k))


def test_a_models_merge_is_dated_like_the_rules_one(make_components):
    comp = make_components(llm=CarelessMergeLLM())
    commit(comp, request(BERLIN, commit_id="c1"))
    commit(comp, request(LISBON, session="s2", commit_id="c2"))
    facts = {f.text: f for f in parse_lines(comp.fs.read_node(PROFILE).overview)}
    berlin, lisbon = facts["lives in Berlin"], facts["lives in Lisbon"]
    assert (berlin.valid_from, berlin.valid_to) == ("2023-05-01", "2023-07-01")
    assert berlin.superseded == "lives in Lisbon"
    assert (lisbon.valid_from, lisbon.valid_to) == ("2023-07-01", "")
    assert facts["works as a nurse"].valid_from == "2023-05-01"
