"""A user's home and job change between sessions: the profile follows, history is kept."""

from __future__ import annotations

from conftest import commit, request

from ctxpipe.core.enums import CommitStatus
from ctxpipe.providers.rules.facts import parse_lines

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
    current = {f.text for f in facts if f.active}
    old = {f.text: f.superseded for f in facts if not f.active}
    assert {"lives in Munich", "leads a team of six engineers at Initech"} <= current
    assert old == {
        "lives in Berlin": "lives in Munich",
        "works as a data engineer at Acme Corp": "leads a team of six engineers at Initech",
    }
    assert "Munich" in profile.abstract and "Berlin" not in profile.abstract
    assert "leads a team of six engineers at Initech" in profile.abstract
    # the history stays in the full text too
    assert "lives in Berlin [s1:m1" in profile.content and "(superseded: lives in Munich)" in (
        profile.content
    )

    entities = {
        c.name: comp.fs.read_node(c.uri)
        for c in comp.fs.list_children("ctx://acme/users/alice/memories/entities/")
    }
    for city in ("berlin", "munich"):
        node = next(n for name, n in entities.items() if name.startswith(city))
        assert node.overview.splitlines()[0] == "- type: place", node.overview
    assert not any(n.overview.startswith("- type: organisation") for n in cities(entities))
    munich = next(n for name, n in entities.items() if name.startswith("munich"))
    assert "the user now leads a team of six engineers at Initech" in munich.content


def cities(entities):  # type: ignore[no-untyped-def]
    return [n for name, n in entities.items() if name.startswith(("berlin", "munich"))]
