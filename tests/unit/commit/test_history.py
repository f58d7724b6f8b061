"""The history of a memory: every change appended next to the node, in the same atomic write,
with the commit, the source messages and a diff; shown by `ctxpipe history`."""

from __future__ import annotations

import json

from conftest import SESSION_1, SESSION_2, commit, request

from ctxpipe.core.errors import VersionConflictError
from ctxpipe.core.models import ContextNode
from ctxpipe.fs.history import NodeChange

PROFILE = "ctx://acme/users/alice/memories/profile"

SESSION_3 = [
    {
        "id": "k1",
        "role": "user",
        "created_at": "2026-07-01T09:00:00Z",
        "content": "I have a dog named Pixel and I speak Portuguese.",
    },
    {"id": "k2", "role": "assistant", "content": "Pixel is a lovely name."},
]
SESSION_4 = [
    {
        "id": "j1",
        "role": "user",
        "created_at": "2026-08-01T09:00:00Z",
        "content": "I'm learning to play the cello and I run every morning.",
    },
    {"id": "j2", "role": "assistant", "content": "Cello and running, nice."},
]


def test_a_profile_merged_three_times_keeps_every_change(make_components):
    comp = make_components()
    sessions = [("s1", SESSION_1), ("s2", SESSION_2), ("s3", SESSION_3), ("s4", SESSION_4)]
    for i, (sid, msgs) in enumerate(sessions, 1):
        commit(comp, request(msgs, session=sid, commit_id=f"c{i}"))
    node = comp.fs.read_node(PROFILE)
    history = comp.fs.history(PROFILE)
    assert node.version == 4 == len(history)
    assert [e.version for e in history] == [1, 2, 3, 4]
    assert [e.action for e in history] == ["create", "merge", "merge", "merge"]
    assert [e.commit_id for e in history] == ["c1", "c2", "c3", "c4"]
    # each change names the source messages it added, all from its own session
    for e, (sid, _) in zip(history, sessions, strict=True):
        assert e.source_refs and all(r.startswith(f"{sid}:") for r in e.source_refs)
    # hashes chain: each entry starts where the previous one ended
    assert history[0].previous_hash == ""
    for prev, cur in zip(history, history[1:], strict=False):
        assert cur.previous_hash == prev.content_hash
    assert history[-1].content_hash == node.content_hash
    # a merge can be inspected as a diff: the second session's new job is an added line
    added = [
        line[1:]
        for line in history[1].diff["content"].splitlines()
        if line.startswith("+") and not line.startswith("+++")
    ]
    assert any("Globex" in line for line in added)
    assert "Pixel" in history[2].diff["content"] and "cello" in history[3].diff["content"]


def test_no_change_no_entry_and_refused_writes_leave_no_trace(make_components):
    comp = make_components()
    commit(comp, request(SESSION_1, commit_id="c1"))
    before = comp.fs.history(PROFILE)
    commit(comp, request(SESSION_1, commit_id="c1"))  # a re-run of the same commit
    node = comp.fs.read_node(PROFILE)
    comp.fs.write_node(node)  # an identical write is a no-op
    try:
        comp.fs.write_node(
            node.model_copy(update={"content": "other"}),
            expected_version=99,
            change=NodeChange(action="merge", commit_id="late"),
        )
    except VersionConflictError:
        pass
    assert comp.fs.history(PROFILE) == before


def test_writes_without_a_reason_are_still_recorded(make_components):
    comp = make_components()
    uri = "ctx://acme/resources/guides/setup"
    comp.fs.write_node(ContextNode(uri=uri, abstract="setup", content="step one"))
    comp.fs.write_level(uri, 2, "step one\nstep two")
    entries = comp.fs.history(uri)
    assert [(e.action, e.version) for e in entries] == [("create", 1), ("update", 2)]
    assert "+step two" in entries[1].diff["content"]
    assert "abstract" not in entries[1].diff  # only what changed


def test_history_cli(make_components, unit_settings):
    from typer.testing import CliRunner

    from ctxpipe.cli import app

    comp = make_components()
    commit(comp, request(SESSION_1, commit_id="c1"))
    commit(comp, request(SESSION_2, session="s2", commit_id="c2"))
    env = {"CTXPIPE_FS_ROOT": str(unit_settings.fs_root), "COLUMNS": "200"}
    runner = CliRunner()
    out = runner.invoke(app, ["history", PROFILE, "--diff"], env=env)
    assert out.exit_code == 0, out.output
    assert "v1" in out.stdout and "v2" in out.stdout and "commit c2" in out.stdout
    assert "Globex" in out.stdout
    out = runner.invoke(app, ["history", PROFILE, "--json", "--version", "2"], env=env)
    data = json.loads(out.stdout)
    assert [e["version"] for e in data] == [2] and data[0]["action"] == "merge"
    out = runner.invoke(app, ["history", "ctx://acme/users/alice/memories/nothing"], env=env)
    assert out.exit_code == 2
