"""What the memory browser's pages make of the service's answers: which fact lines hold now
and which were superseded, and the phases of a commit in order with their durations."""

from __future__ import annotations

from ctxpipe.api.ui.views import fact_lines, phase_times, roots, tags_of
from ctxpipe.core.session import RequestContext

PROFILE = "\n".join(
    (
        "- The user lives in Berlin [s1:m3] (valid from 2023-05-01 until 2023-07-01)"
        " (superseded: The user lives in Lisbon)",
        "- The user lives in Lisbon [s2:m9] (valid from 2023-07-01)",
        "not a fact line",
        "- The user works at Initech [s1:m1]",
    )
)


def test_fact_lines_tell_current_from_superseded_facts() -> None:
    lines = fact_lines(PROFILE, "profile")
    assert [(f.text, f.current) for f in lines] == [
        ("The user lives in Berlin [s1:m3]", False),
        ("The user lives in Lisbon [s2:m9]", True),
        ("The user works at Initech [s1:m1]", True),
    ]
    berlin = lines[0].validity
    assert (berlin.valid_from, berlin.valid_to) == ("2023-05-01", "2023-07-01")
    assert berlin.superseded == "The user lives in Lisbon"
    assert all(f.temporal for f in lines)
    assert not any(f.temporal for f in fact_lines(PROFILE, "events"))


def test_phase_times_in_pipeline_order_with_each_extractor() -> None:
    timings = {
        "write_ms": 30,
        "archive_ms": 12,
        "extract_profile_ms": 5,
        "extract_entity_event_ms": 7,
        "written_at": 1_700_000_000.0,
        "total_ms": 80,
    }
    got = [(p.phase, p.ms) for p in phase_times(timings)]
    assert got == [
        ("archive", 12.0),
        ("extract_entity_event", 7.0),
        ("extract_profile", 5.0),
        ("plan", None),  # not run (yet)
        ("write", 30.0),
        ("register", None),
        ("total", 80.0),
    ]


def test_roots_are_the_spaces_the_key_acts_in() -> None:
    ctx = RequestContext(account_id="acme", user_id="alice", agent_id="helper", session_id="x")
    assert [r.uri for r in roots(ctx)] == [
        "ctx://acme/users/alice",
        "ctx://acme/agents/helper",
        "ctx://acme/sessions",
        "ctx://acme/resources",
        "ctx://acme/skills",
    ]
    assert tags_of({"tags": ["lisbon", "home"]}) == ["lisbon", "home"]
    assert tags_of({"tags": "not-a-list"}) == []
