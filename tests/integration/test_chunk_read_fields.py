"""What `find` reads of a chunk's node and units is on the chunk's row: the index worker
writes it with the chunk (the node's L0 line and dates, the chunk's refs as text, how many unit
vectors it has), and a row written before those columns existed is read from the node and the
units as before, with the same hits. Real PostgreSQL/pgvector and the real model."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from ctxpipe.core.enums import ContextType, OutboxEventType
from ctxpipe.core.models import ContextNode, OutboxEvent
from ctxpipe.index.wiring import make_outbox, make_worker
from ctxpipe.retrieval.config import FindConfig
from ctxpipe.retrieval.find.hybrid_finder import HybridFinder
from ctxpipe.retrieval.models import FindFilters
from ctxpipe.retrieval.tokens import counter_for_model
from ctxpipe.runtime import Runtime

TURNS = [
    ("m1", "user", "I adopted a golden retriever puppy named Biscuit. He chews my shoes."),
    ("m2", "assistant", "Congratulations! Try a bitter apple spray on the shoes."),
    ("m3", "user", "I am training for the Lisbon half marathon in May. It starts at nine."),
    ("m4", "user", "My sister Clara visits from Porto next Friday. We will hike in Sintra."),
]
FILTERS = FindFilters(account_id="acme")
QUESTIONS = [
    "What is the name of Alice's dog?",
    "Which race is Alice training for?",
    "Who visits from Porto?",
    "When did Alice run her first marathon?",
    "Which language does Alice prefer for services?",
]


@pytest.fixture
def rt(make_settings: Any, clean_db: str) -> Iterator[Runtime]:
    runtime = Runtime(make_settings(redis=False))
    yield runtime
    runtime.close()


def upsert(node: ContextNode) -> OutboxEvent:
    return OutboxEvent(
        event_id=OutboxEvent.make_id(OutboxEventType.UPSERT_CONTEXT, node.uri, str(node.version)),
        event_type=OutboxEventType.UPSERT_CONTEXT,
        uri=node.uri,
        payload={"version": node.version, "content_hash": node.content_hash},
    )


def index_world(rt: Runtime) -> None:
    """A session archive, an event with a date, a preference with the time it was learned
    (and a JSON value where a date is expected): indexed by the index worker."""
    ids = [m for m, _, _ in TURNS]
    nodes = [
        ContextNode(
            uri="ctx://acme/sessions/s1/archives/1",
            abstract="Alice talked about her dog, a race and her sister.",
            content="\n".join(f"[{m}] {role}: {text}" for m, role, text in TURNS),
            context_type=ContextType.SESSION,
            category="archive",
            source_refs=[f"s1:{m}" for m in ids],
            metadata={"message_ids": ids},
        ),
        ContextNode(
            uri="ctx://acme/users/alice/memories/events/marathon",
            abstract="Alice ran her first marathon in Lisbon.",
            content="- Alice ran her first marathon in Lisbon [m3]",
            category="events",
            source_refs=["s1:m3"],
            metadata={"event_time": "2023-05-14", "observed_at": "2023-05-20T09:00:00+00:00"},
        ),
        ContextNode(
            uri="ctx://acme/users/alice/memories/preferences/go",
            abstract="Alice prefers Go for backend services.",
            content="- prefers Go for services [m3]\n- writes table-driven tests [m4]",
            category="preferences",
            source_refs=["s1:m3", "s1:m4"],
            metadata={"observed_at": {"session": "s1"}},
        ),
    ]
    make_outbox(rt).append_batch([upsert(rt.fs.write_node(n)) for n in nodes])
    assert make_worker(rt, worker_id="fields").run_once().succeeded == len(nodes)


def finder(rt: Runtime) -> HybridFinder:
    return HybridFinder(
        rt.db,
        rt.embedder,
        counter_for_model(rt.embedder.model_name),
        schema=rt.settings.db_schema,
        config=FindConfig(record_recalls=False),
    )


def test_the_index_worker_writes_what_find_reads_on_every_chunk(rt: Runtime) -> None:
    index_world(rt)
    with psycopg.connect(rt.settings.database_url) as conn:
        rows = conn.execute(
            "SELECT c.unit_count,"
            " (SELECT count(*) FROM ctx.chunk_units AS u WHERE u.chunk_id = c.chunk_id),"
            " c.refs, ARRAY(SELECT jsonb_array_elements_text(c.source_refs)),"
            " c.node_abstract, n.abstract_text,"
            " c.event_time, n.metadata ->> 'event_time',"
            " c.observed_at, n.metadata ->> 'observed_at' "
            "FROM ctx.context_chunks AS c JOIN ctx.context_nodes AS n ON n.uri = c.uri"
        ).fetchall()
    assert len(rows) >= 3
    for count, units, refs, json_refs, abstract, l0, event, event_n, seen, seen_n in rows:
        assert (count, refs, abstract, event, seen) == (units, json_refs, l0, event_n, seen_n)
    assert any(r[0] > 0 for r in rows)
    assert {r[6] for r in rows} >= {"2023-05-14", None}
    assert '{"session": "s1"}' in {r[8] for r in rows}  # another JSON value: its JSON text


def test_rows_written_before_the_columns_are_found_the_same(rt: Runtime) -> None:
    index_world(rt)

    def hits() -> list[Any]:
        find = finder(rt)  # its own caches: nothing held from the other reading
        return [
            [(h.uri, h.text, h.abstract, h.date, h.source_refs, h.score) for h in res.hits]
            for res in (find.find(q, FILTERS, 8) for q in QUESTIONS)
        ]

    on_the_rows = hits()
    with psycopg.connect(rt.settings.database_url) as conn:
        conn.execute(
            "UPDATE ctx.context_chunks SET unit_count = NULL, refs = NULL,"
            " node_abstract = NULL, event_time = NULL, observed_at = NULL"
        )
    assert hits() == on_the_rows
    assert any(any(h[2] for h in q) for q in on_the_rows)  # an L0 line came with a hit
    assert any(any(h[3] for h in q) for q in on_the_rows)  # and a date
