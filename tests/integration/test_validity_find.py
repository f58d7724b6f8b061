"""Temporal validity through the whole path, on real PostgreSQL/pgvector with the real model:
a user who lived in Berlin (session of 2023-05-01) and moved to Lisbon (session of 2023-07-01).
`find` and `build_context` return what is valid now — Lisbon — and, asked as of 2023-06-01,
what was valid then — Berlin."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date

import pytest
from service_world import committed_service

from ctxpipe.core.session import RequestContext, SessionInput
from ctxpipe.retrieval.models import FindHit, FindResult
from ctxpipe.service import ContextEngineService

SCHEMA = "rt_validity"
QUERY = "where does the user live"
JUNE = date(2023, 6, 1)
DANA = RequestContext(account_id="acme", user_id="dana", agent_id="helper", session_id="live")


def _session(sid: str, day: str, text: str) -> SessionInput:
    return SessionInput.model_validate(
        {
            "account_id": "acme",
            "user_id": "dana",
            "agent_id": "helper",
            "session_id": sid,
            "messages": [
                {"id": "m1", "role": "user", "content": text, "created_at": f"{day}T10:00:00Z"},
                {
                    "id": "m2",
                    "role": "assistant",
                    "content": "Thanks for telling me.",
                    "created_at": f"{day}T10:00:05Z",
                },
            ],
        }
    )


@pytest.fixture(scope="module")
def service(
    pg_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ContextEngineService]:
    sessions = (
        _session("s1", "2023-05-01", "Hi! I live in Berlin and I work as a nurse."),
        _session("s2", "2023-07-01", "Big news: I moved to Lisbon last week."),
    )
    svc, results = committed_service(pg_url, tmp_path_factory.mktemp("validity"), SCHEMA, sessions)
    for result in results:
        assert result.status.value == "success", result.reason
    yield svc
    svc.close()


def _profile(res: FindResult) -> list[FindHit]:
    return [h for h in res.hits if h.category == "profile"]


def test_the_profile_node_keeps_the_closed_fact(service: ContextEngineService) -> None:
    text = service.read("ctx://acme/users/dana/memories/profile", DANA, level=1)
    assert "lives in Berlin" in text and "(valid from 2023-05-01 until 2023-07-01)" in text
    assert "moved to Lisbon" in text and "(valid from 2023-07-01)" in text


def test_find_returns_what_is_valid_now(service: ContextEngineService) -> None:
    for narrow in ({}, {"categories": ["profile"]}):
        hits = _profile(service.find(QUERY, DANA, 10, **narrow))
        assert any("Lisbon" in h.returned_text() for h in hits), [h.text for h in hits]
        assert not any("Berlin" in h.returned_text() for h in hits), [h.text for h in hits]
        # a line of the profile comes alone: its L0 line is a digest of other facts
        assert all(h.abstract == "" for h in hits if h.level > 0), [h.abstract for h in hits]
    # the closed fact is left out before the cut: the one hit asked for is a valid one
    (best,) = service.find(QUERY, DANA, 1, categories=["profile"]).hits
    assert "Berlin" not in best.returned_text() and best.category == "profile"


def test_find_as_of_a_past_date_returns_what_was_valid_then(
    service: ContextEngineService,
) -> None:
    everything = _profile(service.find(QUERY, DANA, 10, as_of=JUNE))
    assert not any("Lisbon" in h.returned_text() for h in everything)
    hits = _profile(service.find(QUERY, DANA, 10, categories=["profile"], as_of=JUNE))
    assert any("lives in Berlin" in h.returned_text() for h in hits), [h.text for h in hits]
    assert not any("Lisbon" in h.returned_text() for h in hits), [h.returned_text() for h in hits]
    berlin = next(h for h in hits if "lives in Berlin" in h.text)
    assert berlin.date == "2023-05-01"  # when the fact was learned
    (best,) = service.find(QUERY, DANA, 1, categories=["profile"], as_of="2023-06-01").hits
    assert "Berlin" in best.returned_text()
    # before anything was learned: no profile fact at all
    assert not _profile(service.find(QUERY, DANA, 10, as_of=date(2023, 1, 1)))


def test_as_of_a_date_nothing_said_later_is_found(service: ContextEngineService) -> None:
    """As of June, the July session was not said yet: neither its turn (the archive) nor an
    event it recorded is a hit, whatever category is searched."""
    now = service.find("moved to Lisbon", DANA, 10)
    assert any("Lisbon" in h.returned_text() for h in now.hits)
    then = service.find("moved to Lisbon", DANA, 10, as_of=JUNE)
    assert not any("Lisbon" in h.returned_text() for h in then.hits), [
        (h.uri, h.returned_text()) for h in then.hits
    ]
    assert all(not h.date or h.date <= "2023-06-01" for h in then.hits)
    said = service.find("lives in Berlin and works as a nurse", DANA, 10, as_of=JUNE)
    assert any("Berlin" in h.returned_text() for h in said.hits)  # said in May: still found


def _prefs(res) -> str:  # type: ignore[no-untyped-def]
    return "\n".join(i.text for s in res.sections if s.name == "user_prefs" for i in s.items)


def test_build_context_now_and_as_of(service: ContextEngineService) -> None:
    now = service.build_context(QUERY, DANA, budget=2000, incremental=False)
    assert "moved to Lisbon" in _prefs(now) and "lives in Berlin" not in _prefs(now)
    assert "superseded" not in now.text  # no closed fact anywhere in the context
    then = service.build_context(QUERY, DANA, budget=2000, as_of=JUNE)
    assert "lives in Berlin" in _prefs(then) and "Lisbon" not in _prefs(then)
    assert "superseded" not in then.text
    # the session's snapshot of one date is never reused for another
    again = service.build_context(QUERY, DANA, budget=2000)
    assert "moved to Lisbon" in _prefs(again) and "lives in Berlin" not in _prefs(again)
