"""Forgetting: TTL, capacity and value policies with an injected clock; a
forgotten node leaves the FS with a tombstone in its history and a DELETE_CONTEXT event."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from conftest import ctx
from outbox_twin import MemoryOutbox

from ctxpipe.core.config import ForgettingConfig
from ctxpipe.core.enums import MemoryCategory, WriteAction
from ctxpipe.core.models import WritePlan
from ctxpipe.fs import LocalOwnerLock
from ctxpipe.maintenance.forgetting import Forgetter, Recall

EVENTS = "ctx://acme/users/alice/memories/events"
ENTITIES = "ctx://acme/users/alice/memories/entities"


def write(comp, uri: str, text: str, category: MemoryCategory) -> None:  # type: ignore[no-untyped-def]
    from ctxpipe.commit.context_writer import ContextWriter

    plan = WritePlan(
        action=WriteAction.CREATE,
        target_uri=uri,
        category=category,
        node_patch={"abstract": text, "overview": text, "content": text},
        expected_version=0,
    )
    ContextWriter(comp.fs).apply_plan(ctx(), plan, "c-" + uri.rsplit("/", 1)[-1])


def forgetter(comp, cfg: ForgettingConfig, days: float, recall=None, outbox=None):  # type: ignore[no-untyped-def]
    now = datetime.now().astimezone() + timedelta(days=days)
    return Forgetter(
        comp.fs,
        LocalOwnerLock(comp.settings.fs_root),
        cfg,
        outbox=outbox,
        recall=recall,
        clock=lambda: now,
    )


def test_nothing_is_forgotten_by_default(make_components):
    comp = make_components()
    write(comp, f"{EVENTS}/trip", "Went to Porto", MemoryCategory.EVENTS)
    assert forgetter(comp, ForgettingConfig(), days=10_000).plan() == []


def test_ttl_forgets_what_stayed_untouched_and_keeps_recently_recalled(make_components):
    comp = make_components()
    write(comp, f"{EVENTS}/trip", "Went to Porto", MemoryCategory.EVENTS)
    write(comp, f"{EVENTS}/talk", "Gave a talk in Lyon", MemoryCategory.EVENTS)
    write(comp, f"{ENTITIES}/maria", "Maria is a colleague", MemoryCategory.ENTITIES)
    cfg = ForgettingConfig(ttl_days={"events": 30})
    assert forgetter(comp, cfg, days=20).plan() == []  # not yet
    later = datetime.now().astimezone() + timedelta(days=35)

    def recall(account, uris):  # type: ignore[no-untyped-def]
        return {f"{EVENTS}/talk": Recall(count=3, avg_score=0.8, last_at=later)}

    doomed = forgetter(comp, cfg, days=40, recall=recall).plan()
    assert [(d.uri, d.policy) for d in doomed] == [(f"{EVENTS}/trip", "ttl")]
    assert "ttl 30 days" in doomed[0].reason


def test_capacity_drops_the_least_valuable_first(make_components):
    comp = make_components()
    for name in ("a", "b", "c", "d"):
        write(comp, f"{ENTITIES}/{name}", f"Entity {name} facts", MemoryCategory.ENTITIES)
    now = datetime.now().astimezone()

    def recall(account, uris):  # type: ignore[no-untyped-def]
        return {
            f"{ENTITIES}/a": Recall(count=10, avg_score=0.9, last_at=now),
            f"{ENTITIES}/c": Recall(count=2, avg_score=0.6, last_at=now),
        }

    cfg = ForgettingConfig(capacity={"entities": 2})
    doomed = forgetter(comp, cfg, days=1, recall=recall).plan()
    assert sorted(d.uri.rsplit("/", 1)[-1] for d in doomed) == ["b", "d"]
    assert all(d.policy == "capacity" and "cap of 2" in d.reason for d in doomed)


def test_value_threshold(make_components):
    comp = make_components()
    write(comp, f"{ENTITIES}/old", "Old acquaintance", MemoryCategory.ENTITIES)
    cfg = ForgettingConfig(min_value=0.05)
    assert forgetter(comp, cfg, days=0).plan() == []  # fresh: recency 1 * 0.2
    doomed = forgetter(comp, cfg, days=100).plan()  # 0.2 / 101 < 0.05
    assert [d.policy for d in doomed] == ["value"] and doomed[0].value < 0.05


def test_run_removes_with_tombstone_and_event_dry_run_changes_nothing(make_components):
    comp = make_components()
    uri = f"{EVENTS}/trip"
    write(comp, uri, "Went to Porto", MemoryCategory.EVENTS)
    outbox = MemoryOutbox()
    f = forgetter(comp, ForgettingConfig(ttl_days={"events": 1}), days=5, outbox=outbox)
    dry = f.run(dry_run=True)
    assert [d["uri"] for d in dry["forgotten"]] == [uri]
    assert comp.fs.exists(uri) and not outbox.events
    result = f.run()
    assert [d["uri"] for d in result["forgotten"]] == [uri]
    assert not comp.fs.exists(uri)
    assert [e.event_type for e in outbox.events.values()] == ["DELETE_CONTEXT"]
    history = comp.fs.history(uri)  # the tombstone
    assert [e.action for e in history] == ["create", "forget"]
    assert "ttl" in history[-1].reason and history[-1].content_hash == ""
    assert comp.fs.list_children("ctx://acme/users/alice/memories/events/") == []
    assert f.run()["forgotten"] == []  # idempotent


def test_forget_cli(make_components, unit_settings):
    from typer.testing import CliRunner

    from ctxpipe.cli import app

    comp = make_components()
    write(comp, f"{EVENTS}/trip", "Went to Porto", MemoryCategory.EVENTS)
    env = {
        "CTXPIPE_FS_ROOT": str(unit_settings.fs_root),
        "CTXPIPE_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none",
        "CTXPIPE_FORGETTING__CAPACITY": json.dumps({"events": 0}),
    }
    runner = CliRunner()
    out = runner.invoke(app, ["forget", "--dry-run", "--json"], env=env)
    assert out.exit_code == 0, out.output
    assert [d["policy"] for d in json.loads(out.stdout)["forgotten"]] == ["capacity"]
    out = runner.invoke(app, ["forget"], env=env, input="n\n")
    assert comp.fs.exists(f"{EVENTS}/trip")  # not confirmed
    out = runner.invoke(app, ["forget", "--yes"], env=env)
    assert out.exit_code == 0 and "forgot 1 memories" in out.stdout
    assert not comp.fs.exists(f"{EVENTS}/trip")
