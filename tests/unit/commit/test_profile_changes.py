"""A user's home and job change between sessions: the profile follows, history is kept."""

from __future__ import annotations

from conftest import commit, request

from ctxpipe.core.enums import CommitStatus
from ctxpipe.providers.rules.lines import parse_lines

PROFILE = "ctx://acme/users/alice/memories/profile"

FIRST = [
    {
        "id": "m1",
        "role": "user",
        "created_at": "2026-03-14T10:00:00Z",
        "content": "Hi! I'm a data engineer at Acme Corp and I live in Berlin.",
    },
    {"id": "m2", "role": "assistant", "content": "Nice to meet you. How can I help today?"},
]
SECOND = [
    {
        "id": "n1",
        "role": "user",
        "created_at": "2026-06-02T09:00:00Z",
        "content": "Big news: I left Berlin and moved to Munich, where I now lead a team of "
        "six engineers at Initech.",
    },
    {"id": "n2", "role": "assistant", "content": "Congratulations on the move and the new role!"},
]


def test_a_later_session_supersedes_home_and_job_and_keeps_the_old_ones(make_components):
    comp = make_components()
    assert commit(comp, request(FIRST, commit_id="c1")).status is CommitStatus.SUCCESS
    result = commit(comp, request(SECOND, session="s2", commit_id="c2"))
    assert result.status is CommitStatus.SUCCESS, result.reason

    profile = comp.fs.read_node(PROFILE)
    facts = parse_lines(profile.overview)
    current = [f.text for f in facts if f.active]
    old = {f.text: f.validity.superseded for f in facts if not f.active}
    moved = next(t for t in current if "Munich" in t)
    leads = next(t for t in current if "Initech" in t)
    # home and employer are single-valued: each new value closes the old one and names it
    assert old == {
        "The user lives in Berlin.": moved,
        "The user is a data engineer at Acme Corp": leads,
    }
    assert "Munich" in profile.abstract and "Initech" in profile.abstract
    assert "Acme" not in profile.abstract and "lives in Berlin" not in profile.abstract
    # the history stays in the full text too, with the turn it came from
    assert "The user lives in Berlin. [s1:m1" in profile.content
    assert f"(superseded: {moved})" in profile.content

    # the places and organisations are entities, each citing only the turns that name it
    entities = {
        c.name: comp.fs.read_node(c.uri)
        for c in comp.fs.list_children("ctx://acme/users/alice/memories/entities/")
    }
    munich = next(n for name, n in entities.items() if name.startswith("munich"))
    initech = next(n for name, n in entities.items() if name.startswith("initech"))
    assert "moved to Munich" in munich.content and munich.source_refs == ["s2:n1"]
    assert "now leads a team of six engineers at Initech" in initech.content
