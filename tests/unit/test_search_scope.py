"""A typed query's own scope never widens the caller's --scope."""

from __future__ import annotations

from ctxpipe.core.llm_schemas import TypedQuery
from ctxpipe.retrieval.models import FindFilters
from ctxpipe.retrieval.search.search_engine import scope_filters

SKILL = TypedQuery(query="how do I use sql_runner", context_type="skill")


def test_no_caller_scope_uses_the_type_scope() -> None:
    f = scope_filters(FindFilters(account_id="acme"), SKILL, "helper")
    assert f.uri_prefixes == ["ctx://acme/skills/", "ctx://acme/agents/helper/"]


def test_caller_scope_inside_the_type_scope_is_kept() -> None:
    cases = "ctx://acme/agents/helper/memories/cases/"
    f = scope_filters(FindFilters(account_id="acme", uri_prefixes=[cases]), SKILL, "helper")
    assert f.uri_prefixes == [cases]


def test_caller_scope_outside_the_type_scope_is_not_replaced() -> None:
    mine = "ctx://acme/users/alice/"
    f = scope_filters(FindFilters(account_id="acme", uri_prefixes=[mine]), SKILL, "helper")
    assert f.uri_prefixes == [mine]
