"""`FindRequest`: one find as every edge passes it to the read path — validated where it is
built (a blank query, a bad `as_of`, a negative `top_k` are refused)."""

from __future__ import annotations

from datetime import date, datetime

import pytest
from pydantic import ValidationError

from ctxpipe.client import _calls as calls
from ctxpipe.client.find_request import find_request
from ctxpipe.client.models import FindIn
from ctxpipe.retrieval import FindRequest
from ctxpipe.retrieval.read_path import as_find_request


def test_the_defaults_leave_top_k_to_the_server() -> None:
    req = FindRequest(query="where does Ann live")
    assert req.top_k is None and req.budget_tokens is None and req.as_of is None
    assert req.min_score == 0.0


@pytest.mark.parametrize(
    "fields",
    [
        {"query": ""},
        {"query": "   "},
        {"query": "q", "top_k": 0},
        {"query": "q", "top_k": -3},
        {"query": "q", "top_k": 201},
        {"query": "q", "budget_tokens": 0},
        {"query": "q", "min_score": 2.0},
        {"query": "q", "as_of": "2023-13-01"},
        {"query": "q", "as_of": "yesterday"},
        {"query": "q", "unknown": 1},
    ],
)
def test_a_bad_request_is_refused(fields: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        FindRequest.model_validate(fields)


def test_as_of_takes_a_date_a_day_or_a_datetime() -> None:
    day = date(2023, 6, 1)
    assert FindRequest(query="q", as_of=day).as_of == day
    assert FindRequest.model_validate({"query": "q", "as_of": "2023-06-01"}).as_of == day
    assert FindRequest.model_validate({"query": "q", "as_of": datetime(2023, 6, 1, 9)}).as_of == day
    assert FindRequest.model_validate({"query": "q", "as_of": ""}).as_of is None


def test_the_api_body_is_the_request_and_who_asks() -> None:
    body = FindIn.model_validate(
        {"query": "q", "user_id": "ann", "top_k": 3, "tags": ["x"], "as_of": "2023-06-01"}
    )
    req = body.request()
    assert type(req) is FindRequest
    assert (req.top_k, req.tags, req.as_of) == (3, ["x"], date(2023, 6, 1))
    with pytest.raises(ValidationError):
        FindIn.model_validate({"query": "q", "top_k": -1})


def test_the_client_builds_the_request_before_sending() -> None:
    req = find_request("q", 5, "2023-06-01", categories=["profile"], tags=None)
    body = calls.find({"user_id": "ann"}, req).body
    assert body == {
        "user_id": "ann",
        "query": "q",
        "top_k": 5,
        "categories": ["profile"],
        "min_score": 0.0,
        "as_of": "2023-06-01",
    }
    assert find_request(req, None, None) is req
    with pytest.raises(ValidationError):
        find_request("q", 0, None)


def test_the_read_path_takes_a_request_or_a_bare_query() -> None:
    req = FindRequest(query="q", top_k=4)
    assert as_find_request(req) is req
    assert as_find_request(req, 7).top_k == 7
    with pytest.raises(ValidationError):
        as_find_request(req, budget_tokens=-1)
    built = as_find_request("q", 3, categories=["profile"], budget_tokens=50)
    assert (built.top_k, built.categories, built.budget_tokens) == (3, ["profile"], 50)
    with pytest.raises(ValidationError, match="the query is empty"):
        as_find_request(" ")
