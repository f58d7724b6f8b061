"""Poison: an outbox event that always fails goes `dead` after its tries, is visible in
`ctxpipe status` and `ctxpipe outbox list --dead`, can be requeued, and never holds back the
events around it — with the real index worker, the real model and a really broken node."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from outbox_twin import upsert_event
from typer.testing import CliRunner

from ctxpipe.core.models import ContextNode, OutboxEvent
from ctxpipe.index.wiring import make_outbox, make_worker
from ctxpipe.runtime import Runtime

BASE = "ctx://acme/users/alice/memories/preferences"
TRIES = 3


@pytest.fixture
def rt(make_settings: Any, clean_db: str) -> Iterator[Runtime]:
    runtime = Runtime(make_settings(outbox_backoff_base_s=0.01, outbox_backoff_max_s=0.05))
    yield runtime
    runtime.close()


def put(rt: Runtime, name: str, text: str) -> ContextNode:
    return rt.fs.write_node(
        ContextNode(
            uri=f"{BASE}/{name}",
            abstract=f"Alice {text}.",
            overview=f"- {text} [m1]",
            content=f"- {text} [m1]",
            category="preferences",
            source_refs=["s1:m1"],
        )
    )


def event(node: ContextNode) -> OutboxEvent:
    return upsert_event(node).model_copy(update={"max_retries": TRIES})


def rows(rt: Runtime, query: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(rt.settings.database_url) as conn:
        return conn.execute(query, params).fetchall()


def cli(rt: Runtime, *args: str) -> Any:
    from ctxpipe.cli import app

    env = {
        "CTXPIPE_DATABASE_URL": rt.settings.database_url,
        "CTXPIPE_FS_ROOT": str(rt.settings.fs_root),
        "CTXPIPE_REDIS_URL": rt.settings.redis_url,
    }
    out = CliRunner().invoke(app, list(args), env=env)
    assert out.exit_code == 0, out.output
    return out


def test_a_poison_event_dies_after_its_tries_is_visible_requeueable_and_blocks_nothing(rt):  # type: ignore[no-untyped-def]
    poison = put(rt, "broken", "likes green tea")
    meta = rt.fs.resolve_path(poison.uri) / ".meta.json"
    good_meta = meta.read_bytes()
    meta.write_text("{ this is not json", encoding="utf-8")  # every read of it fails
    good = [put(rt, f"n{i}", text) for i, text in enumerate(("likes jazz", "hikes", "reads"))]
    outbox = make_outbox(rt)
    outbox.append_batch([event(poison), *(event(n) for n in good)])  # the poison comes first

    worker = make_worker(rt, worker_id="t")
    first = worker.run_once()
    assert first.claimed == 4 and first.succeeded == 3  # the others went through at once
    indexed = {r[0] for r in rows(rt, "SELECT uri FROM ctx.context_nodes")}
    assert indexed == {n.uri for n in good}

    dead, deadline = 0, time.monotonic() + 60
    while not dead and time.monotonic() < deadline:  # the beat's drains, retrying with backoff
        dead += worker.run_once().dead
        time.sleep(0.05)
    assert dead == 1
    status, attempts, error = rows(
        rt,
        "SELECT status, retry_count, error_message FROM ctx.outbox_events WHERE event_id = %s",
        event(poison).event_id,
    )[0]
    assert status == "dead" and attempts == TRIES
    assert poison.uri.rsplit("/", 1)[1] in error or "json" in error.lower(), error
    assert worker.drain(max_seconds=5).claimed == 0  # a dead event is never claimed again

    st = json.loads(cli(rt, "status", "--json").stdout)
    assert st["outbox"]["dead"] == 1, st["outbox"]
    listed = json.loads(cli(rt, "outbox", "list", "--dead", "--json").stdout)
    assert [e["event_id"] for e in listed] == [event(poison).event_id]

    meta.write_bytes(good_meta)  # the operator fixes the node, then requeues the event
    cli(rt, "outbox", "requeue", event(poison).event_id)
    assert worker.drain(max_seconds=60).succeeded == 1
    indexed = {r[0] for r in rows(rt, "SELECT uri FROM ctx.context_nodes")}
    assert indexed == {poison.uri, *(n.uri for n in good)}
    assert json.loads(cli(rt, "status", "--json").stdout)["outbox"]["dead"] == 0
