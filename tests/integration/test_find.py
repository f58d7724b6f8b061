"""Hybrid find on real PostgreSQL/pgvector with the real model, over sessions committed through
the pipeline and indexed by the index worker's code path: relevance on a small labelled set,
grouping, filters, plan choice, recall statistics, the order of the embedding and the text arm
(owner-filtered recall at scale: `test_find_vector_arm.py`)."""

from __future__ import annotations

import random
import re
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from api_world import fresh_schema

from ctxpipe.commit.coordinator import CommitCoordinator
from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.config import Settings
from ctxpipe.core.session import RequestContext, SessionInput
from ctxpipe.index.reindex import reindex
from ctxpipe.index.wiring import make_indexer
from ctxpipe.retrieval.config import FindConfig, RetrievalConfig
from ctxpipe.retrieval.find.hybrid_finder import HybridFinder
from ctxpipe.retrieval.find.text_arm import TextArm
from ctxpipe.retrieval.read_path import ReadPath
from ctxpipe.retrieval.units import sentence_ranking
from ctxpipe.runtime import Runtime
from ctxpipe.storage.db import Database

SCHEMA = "rt_find"
ACCOUNT, USER, AGENT = "acme", "ann", "bot"
# (session, date, [(message id, role, text)])
SESSIONS = [
    ("ann-s1", "2024-03-01T09:00:00", [
        ("m1", "user", "I adopted a golden retriever puppy named Biscuit last weekend."),
        ("m2", "assistant", "Congratulations! How is Biscuit settling in?"),
        ("m3", "user", "Great, though he chews my running shoes. I am training for the Lisbon "
                       "half marathon in May."),
        ("m4", "assistant", "Try a bitter apple spray on the shoes and keep them out of reach."),
    ]),
    ("ann-s2", "2024-03-10T18:30:00", [
        ("m1", "user", "Work update: I started leading the payments team at Globex."),
        ("m2", "assistant", "That's a big step. What is the team working on?"),
        ("m3", "user", "We are migrating the ledger service from MySQL to PostgreSQL 16."),
        ("m4", "user", "My favourite food is ramen, and I prefer vegetarian options."),
        ("m5", "assistant", "Noted, vegetarian ramen it is."),
    ]),
    ("ann-s3", "2024-04-02T12:00:00", [
        ("m1", "user", "My sister Clara is visiting from Porto next Friday."),
        ("m2", "assistant", "Lovely! Any plans while she is here?"),
        ("m3", "user", "We want to hike in Sintra and visit the Pena Palace on Saturday."),
        ("m4", "assistant", "Start early, the palace gets crowded after ten."),
    ]),
]  # fmt: skip
# question → the turn that answers it (session:message)
LABELLED = [
    ("What is the name of Ann's dog?", "ann-s1:m1"),
    ("Which race is Ann training for?", "ann-s1:m3"),
    ("What database is the ledger service moving to?", "ann-s2:m3"),
    ("What kind of food does Ann like?", "ann-s2:m4"),
    ("Which team does Ann lead at work?", "ann-s2:m1"),
    ("Who is coming to visit Ann?", "ann-s3:m1"),
    ("Where do they plan to go hiking?", "ann-s3:m3"),
]


def session_input(sid: str, date: str, turns: list[tuple[str, str, str]]) -> SessionInput:
    start = datetime.fromisoformat(date)
    return SessionInput(
        account_id=ACCOUNT,
        user_id=USER,
        agent_id=AGENT,
        session_id=sid,
        messages=[
            {"id": m, "role": r, "content": t, "created_at": start + timedelta(minutes=i)}
            for i, (m, r, t) in enumerate(turns)
        ],
    )


@pytest.fixture(scope="module")
def world(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReadPath]:
    fresh_schema(pg_url, SCHEMA)
    root: Path = tmp_path_factory.mktemp("find")
    settings = Settings(
        fs_root=root / "fs",
        var_dir=root / "var",
        database_url=pg_url,
        redis_url="redis://127.0.0.1:1/0",
        db_schema=SCHEMA,
        embedding_dim=384,
    )
    rt = Runtime(settings)
    coord = CommitCoordinator(rt.components())
    for sid, date, turns in SESSIONS:
        coord.commit_sync(CommitRequest.from_session(session_input(sid, date, turns)))
    report = reindex(make_indexer(rt))
    assert not report.errors and report.chunks > 0
    rp = ReadPath.from_runtime(rt)
    yield rp
    rt.close()


@pytest.fixture
def ctx() -> RequestContext:
    return RequestContext(account_id=ACCOUNT, user_id=USER, agent_id=AGENT, session_id="q")


def test_relevance_on_the_labelled_set(world: ReadPath, ctx: RequestContext) -> None:
    ranks = []
    for question, answer in LABELLED:
        res = world.find(question, ctx, 5)
        cited = [r for h in res.hits for r in h.source_refs]
        assert answer in cited, (question, [(h.text, h.source_refs) for h in res.hits])
        ranks.append(next(i for i, h in enumerate(res.hits) if answer in h.source_refs) + 1)
    mrr = float(np.mean([1 / r for r in ranks]))
    assert mrr >= 0.6, ranks
    assert sum(r <= 3 for r in ranks) >= len(LABELLED) - 1, ranks


def test_hits_are_grouped_and_carry_what_they_cite(world: ReadPath, ctx: RequestContext) -> None:
    res = world.find("Biscuit the golden retriever puppy", ctx, 10)
    assert set(res.groups) <= {"memory", "session"} and "session" in res.groups
    for ctype, hits in res.groups.items():
        assert all(h.context_type == ctype for h in hits)
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    for h in res.hits:
        assert h.uri.startswith("ctx://acme/") and h.level in (0, 1, 2)
        assert h.text and h.tokens == world.counter.count(h.returned_text())
        if h.context_type == "session":
            assert h.abstract == ""  # an archive line stands alone
            # an archive line says who said it and when: "user (1 March 2024): …"
            assert len(h.source_refs) == 1
            assert re.match(r"^(ann|user|assistant) \(\d{1,2} [A-Z][a-z]+ \d{4}\): ", h.text)
        assert all(r.split(":", 1)[0].startswith("ann-s") for r in h.source_refs)
    top = res.hits[0]
    assert "ann-s1:m1" in top.source_refs and "Biscuit" in top.returned_text()
    # one hit per turn: nothing after the first hit citing m1 cites only m1 again
    assert sum(h.source_refs == ["ann-s1:m1"] for h in res.hits) <= 1
    assert res.plan == "exact" and res.owner_rows and res.owner_rows > 0
    assert {"embed", "scope", "sql_text", "sql_vector", "rank", "total"} <= set(res.timings_ms)


def test_hits_say_who_and_when(world: ReadPath, ctx: RequestContext) -> None:
    """An archive hit: the speaker's role and the day it was said; a memory hit: the date of
    the event it records or of the session it was learned from."""
    days = {date[:10] for _, date, _ in SESSIONS}
    res = world.find("Where do Ann and her sister Clara want to go hiking?", ctx, 10)
    kinds = set()
    for h in res.hits:
        if h.category == "events":  # the day of the event, not of the session
            assert "marathon" not in h.text or h.date == "2024-05-01", h
        else:
            assert h.date in days, (h.uri, h.text, h.date)
        if h.context_type == "session":
            assert h.role in ("user", "assistant") and h.speaker == h.role
            said = datetime.strptime(h.text.split("(", 1)[1].split(")", 1)[0], "%d %B %Y")
            assert said.strftime("%Y-%m-%d") == h.date
        else:
            assert h.role == "memory" and h.speaker == ""
        kinds.add(h.context_type)
    assert kinds == {"memory", "session"}
    hiking = [h for h in res.hits if "ann-s3:m3" in h.source_refs]
    assert hiking
    for h in hiking:  # said on 2 April 2024; the hike is planned for "Saturday": 6 April
        assert h.date == ("2024-04-06" if h.category == "events" else "2024-04-02"), h


def test_top_k_and_a_token_budget_are_both_honoured(world: ReadPath, ctx: RequestContext) -> None:
    q = "Ann's puppy Biscuit and her running shoes"
    full = world.find(q, ctx, 10)
    assert len(full.hits) > 3 and full.total_tokens > 60
    for budget in (12, 60, 150):
        res = world.find(q, ctx, 10, budget_tokens=budget)
        assert res.hits and res.total_tokens <= budget
        assert len(res.hits) <= 10
        # the budget keeps the best hits, in order; only the last one may be cut
        assert [h.source_refs for h in res.hits[:-1]] == [
            h.source_refs for h in full.hits[: len(res.hits) - 1]
        ]
    roomy = world.find(q, ctx, 3, budget_tokens=10_000)
    assert roomy.total_tokens == world.find(q, ctx, 3).total_tokens
    assert len(world.find(q, ctx, 2, budget_tokens=10_000).hits) == 2
    with pytest.raises(ValueError, match="budget"):
        world.find(q, ctx, 10, budget_tokens=0)


def test_scope_category_and_type_filters(world: ReadPath, ctx: RequestContext) -> None:
    q = "Ann's sister Clara from Porto"
    mem = world.find(q, ctx, 10, scopes=[f"ctx://{ACCOUNT}/users/{USER}/memories/"])
    assert mem.hits and all(h.uri.startswith(f"ctx://{ACCOUNT}/users/{USER}/memories/")
                            for h in mem.hits)  # fmt: skip
    sessions = world.find(q, ctx, 10, context_types=["session"])
    assert sessions.hits and {h.context_type for h in sessions.hits} == {"session"}
    one = world.find(q, ctx, 10, scopes=[f"ctx://{ACCOUNT}/sessions/ann-s3/"])
    assert one.hits and {h.uri.split("/")[4] for h in one.hits} == {"ann-s3"}
    cats = {h.category for h in world.find(q, ctx, 20).hits if h.context_type == "memory"}
    for cat in cats:
        only = world.find(q, ctx, 10, categories=[cat])
        assert only.hits and {h.category for h in only.hits} == {cat}
    assert world.find(q, ctx, 10, categories=["no-such-category"]).hits == []
    strict = world.find(q, ctx, 10, min_score=0.99)
    assert strict.hits == []


def test_recalls_are_recorded(world: ReadPath, ctx: RequestContext) -> None:
    res = world.find("ledger service migration to PostgreSQL", ctx, 3)
    uris = sorted({h.uri for h in res.hits})
    before = world.recall_stats.get(ACCOUNT, uris)
    world.find("ledger service migration to PostgreSQL", ctx, 3)
    after = world.recall_stats.get(ACCOUNT, uris)
    for u in uris:
        assert after[u].recall_count == before[u].recall_count + 1
        assert after[u].last_recalled_at >= before[u].last_recalled_at
        assert 0 < after[u].average_score <= 1
    lowest = world.recall_stats.lowest_value(ACCOUNT, limit=50)
    assert [s.value for s in lowest] == sorted(s.value for s in lowest)  # type: ignore[type-var]


def test_hnsw_plan_agrees_with_the_exact_plan(world: ReadPath, ctx: RequestContext) -> None:
    filters = world.filters_for(ctx)
    for question, answer in LABELLED[:4]:
        exact = world.finder.find(question, filters, 5, plan="exact", record=False)
        hnsw = world.finder.find(question, filters, 5, plan="hnsw", record=False)
        assert exact.plan == "exact" and hnsw.plan == "hnsw"
        assert answer in [r for h in hnsw.hits for r in h.source_refs]


def test_index_time_unit_vectors_rank_as_query_time_encoding(
    world: ReadPath, ctx: RequestContext
) -> None:
    """Committed sessions (archives and memories): the stored line and sentence vectors give
    the hits that encoding them at query time gives."""
    filters = world.filters_for(ctx)
    f = world.finder
    fly = HybridFinder(
        f.db,
        f.embedder,
        f.counter,
        schema=SCHEMA,
        config=FindConfig(stored_units=False, record_recalls=False),
    )
    for question, _ in LABELLED:
        a = f.find(question, filters, 8, record=False).hits
        b = fly.find(question, filters, 8).hits
        got = [(h.uri, h.text, tuple(h.source_refs)) for h in a]
        want = [(h.uri, h.text, tuple(h.source_refs)) for h in b]
        # the same hits; a vector encoded in another batch differs in its last bits, which
        # may swap two near-tied hits (reciprocal ranks) — or which of the units that say the
        # same thing is shown: an entity's L0 line "Clara: The user's sister …", the line it
        # restates, the event memory that tells the same turn — so the order is compared up to
        # that: the top hits cite the same turns in the same order
        assert [r for _, _, r in got[:3]] == [r for _, _, r in want[:3]], question
        assert len(set(got) & set(want)) >= len(want) - 1, question
        assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=2e-3)


def test_the_text_arm_is_sent_before_the_query_is_embedded(
    world: ReadPath, ctx: RequestContext
) -> None:
    """By default the text arm's statement is sent, then the question is embedded in the
    calling thread while PostgreSQL ranks the text; with `send_text_arm_first` off the question
    is embedded first, with `overlap_embedding` on the finder's thread — the same hits each way."""
    filters = world.filters_for(ctx)
    f = world.finder
    order: list[tuple[str, str]] = []

    def finder(**cfg: bool) -> HybridFinder:
        config = FindConfig(record_recalls=False, **cfg)
        out = HybridFinder(f.db, f.embedder, f.counter, schema=SCHEMA, config=config)
        embed, text_arm, send = out.embed, out.store.text_arm, out.store.send_text_arm

        def traced(name: str, call: Any) -> Any:
            def run(*args: Any, **kwargs: Any) -> Any:
                order.append((name, threading.current_thread().name))
                return call(*args, **kwargs)

            return run

        out.embed = traced("embed", embed)  # type: ignore[method-assign]
        out.store.text_arm = traced("text", text_arm)  # type: ignore[method-assign]
        out.store.send_text_arm = traced("send", send)  # type: ignore[method-assign]
        return out

    here = threading.current_thread().name
    question = LABELLED[0][0]
    sent_first = finder().find(question, filters, 8)
    assert order == [("send", here), ("embed", here)]
    order.clear()
    after = finder(send_text_arm_first=False).find(question, filters, 8)
    assert order == [("embed", here), ("text", here), ("send", here)]
    order.clear()
    par = finder(overlap_embedding=True).find(question, filters, 8)
    assert ("text", here) in order and [t for w, t in order if w == "embed"] != [here]
    hits = [(h.uri, h.text) for h in sent_first.hits]
    assert hits and hits == [(h.uri, h.text) for h in after.hits]
    assert hits == [(h.uri, h.text) for h in par.hits]
    assert {"embed", "sql_text", "total"} <= set(sent_first.timings_ms)


def test_the_text_arms_chunks_are_split_while_the_fused_statement_runs(
    world: ReadPath, ctx: RequestContext
) -> None:
    """The text arm brings what its chunks say as the candidates' rows will (its cold
    statement, of a scope not seen lately, as the warm one): `find` splits them into lines
    and sentences while PostgreSQL runs the fused statement, so the ranking step splits only
    the candidates the vector arm alone found."""
    filters = world.filters_for(ctx)
    store = world.finder.store
    for question, _ in LABELLED:
        store.invalidate()
        sentence_ranking._chunk_units.cache_clear()
        cold = store.text_arm(question, filters, 40)
        warm = store.text_arm(question, filters, 40)
        assert cold.ids == warm.ids and cold.sources == warm.sources
        assert len(warm.sources) == len(warm.ids)
        qvec = world.finder.embed(question)
        with store.send_fuse(qvec, filters, warm, 40) as pending:
            sentence_ranking.split_ahead(warm.sources)
            rows = pending.result().rows
        said = {r.chunk_id: (r.text_content, tuple(r.source_refs), r.context_type) for r in rows}
        assert [said[i] for i in warm.ids] == warm.sources, question
        before = sentence_ranking._chunk_units.cache_info().misses
        sentence_ranking.explode(rows)
        split_now = sentence_ranking._chunk_units.cache_info().misses - before
        assert split_now <= sum(r.tr is None for r in rows) < len(rows), question


def test_the_text_arms_unit_vectors_are_fetched_beside_the_fused_statement(
    world: ReadPath, ctx: RequestContext
) -> None:
    """The stored unit vectors of the text arm's best chunks, most of the candidates the
    ranking reads them for, are fetched while PostgreSQL runs the fused statement (a second
    statement on the wire): the ranking then fetches only what the vector arm alone found,
    and a chunk of the text arm comes back from the fused statement without what it says,
    which the arm brought — the same rows, the same hits as fetching everything after."""
    filters = world.filters_for(ctx)
    f = world.finder
    arms: list[TextArm] = []
    sent: list[list[str]] = []
    fetched: list[list[str]] = []

    def finder(ahead: bool) -> HybridFinder:
        out = HybridFinder(f.db, f.embedder, f.counter, schema=SCHEMA,
                           config=FindConfig(record_recalls=False))  # fmt: skip
        send_arm, send = out.store.send_text_arm, out.store.send_unit_vectors
        fetch = out.store.unit_vectors

        def arm(*args: Any, **kwargs: Any) -> Any:
            return send_arm(*args, **kwargs).then(lambda a: arms.append(a) or a)

        out.store.send_text_arm = arm  # type: ignore[method-assign]
        out.stored_units.send = (lambda ids: sent.append(list(ids)) or send(ids)) if ahead else None
        out.stored_units.fetch = lambda ids: fetched.append(list(ids)) or fetch(ids)
        return out

    ahead, after = finder(True), finder(False)
    dense = FindConfig().dense_rows
    for question, _ in LABELLED:
        arms.clear(), sent.clear(), fetched.clear()
        ahead.stored_units.clear()  # a small world: every chunk would be held after a while
        hits = ahead.find(question, filters, 8).hits
        arm = arms[0]
        assert sent and set(sent[0]) <= set(arm.ids[:dense]), question
        assert not {c for ids in fetched for c in ids} & set(sent[0]), question
        sent.clear()
        ahead.find(question, filters, 8)
        assert sent == [], question  # held now: nothing sent again
        assert [(h.uri, h.text, h.score) for h in hits] == [
            (h.uri, h.text, h.score) for h in after.find(question, filters, 8).hits
        ], question
        qvec = f.embed(question)
        with f.store.send_fuse(qvec, filters, arm, 40) as pending:
            rows = pending.result().rows
        with f.db.autocommit() as conn:
            said = {
                cid: (text, refs, ctype)
                for cid, text, refs, ctype in conn.execute(
                    f"SELECT chunk_id, text_content, ARRAY(SELECT jsonb_array_elements_text("
                    f"source_refs)), context_type FROM {SCHEMA}.context_chunks "
                    "WHERE chunk_id = ANY(%s)",
                    ([r.chunk_id for r in rows],),
                )
            }
        assert any(r.tr is not None for r in rows) and any(r.tr is None for r in rows)
        for r in rows:
            assert (r.text_content, r.source_refs, r.context_type) == said[r.chunk_id], question


def test_a_find_holding_the_pools_last_connection_fetches_its_units_after(
    world: ReadPath, ctx: RequestContext
) -> None:
    """With every other connection of the pool in use, the text arm's unit vectors are not
    fetched beside the fused statement (that would wait for a second connection while
    holding one: two finds could wait for each other); the ranking fetches them after, with
    the same hits."""
    filters = world.filters_for(ctx)
    f = world.finder
    one = Database(f.db.conninfo, min_size=1, max_size=1)
    try:
        narrow = HybridFinder(one, f.embedder, f.counter, schema=SCHEMA,
                              config=FindConfig(record_recalls=False))  # fmt: skip
        wide = HybridFinder(f.db, f.embedder, f.counter, schema=SCHEMA,
                            config=FindConfig(record_recalls=False))  # fmt: skip
        for question, _ in LABELLED:
            narrow.stored_units.clear()
            started = time.perf_counter()
            got = narrow.find(question, filters, 8).hits
            assert time.perf_counter() - started < 5.0, question  # not the pool's timeout
            assert [(h.uri, h.text, h.score) for h in got] == [
                (h.uri, h.text, h.score) for h in wide.find(question, filters, 8).hits
            ], question
    finally:
        one.close()


def test_concurrent_finds_on_a_small_pool_all_finish_with_their_own_hits(
    world: ReadPath, ctx: RequestContext
) -> None:
    """Six threads asking at once through a pool of two connections: no find holds one
    connection while it waits for another, so none waits on the others until the pool's
    timeout, and each gets the hits it gets alone."""
    filters = world.filters_for(ctx)
    f = world.finder
    alone = {q: [(h.uri, h.text) for h in f.find(q, filters, 8).hits] for q, _ in LABELLED}
    two = Database(f.db.conninfo, min_size=2, max_size=2)
    try:
        shared = HybridFinder(two, f.embedder, f.counter, schema=SCHEMA,
                              config=FindConfig(record_recalls=False))  # fmt: skip
        asked = [q for q, _ in LABELLED] * 3
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=6) as pool:
            got = list(pool.map(lambda q: shared.find(q, filters, 8).hits, asked))
        assert time.perf_counter() - started < 20.0  # not a wait for the pool's timeout
        for q, hits in zip(asked, got, strict=True):
            assert [(h.uri, h.text) for h in hits] == alone[q], q
    finally:
        two.close()


def test_the_query_dates_are_resolved_while_the_fused_statement_runs(
    world: ReadPath, ctx: RequestContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Resolving the dates a query names (the date parser: milliseconds) is work for the
    ranking, not for the statement: it runs after the fused statement is sent and before its
    rows are read."""
    import ctxpipe.retrieval.find.hybrid_finder as hybrid_finder

    f = world.finder
    order: list[str] = []
    periods, send = hybrid_finder.query_periods, f.store.send_fuse

    def traced_periods(*args: Any, **kwargs: Any) -> Any:
        order.append("dates")
        return periods(*args, **kwargs)

    @contextmanager
    def traced_send(*args: Any, **kwargs: Any) -> Iterator[Any]:
        order.append("sent")
        with send(*args, **kwargs) as pending:
            result = pending.result

            def read() -> Any:
                order.append("rows")
                return result()

            pending.result = read
            yield pending

    monkeypatch.setattr(hybrid_finder, "query_periods", traced_periods)
    monkeypatch.setattr(f.store, "send_fuse", traced_send)
    found = f.find("What did the user say on 3 March 2024?", world.filters_for(ctx), 8)
    assert order == ["sent", "dates", "rows"]
    assert found.hits


def test_config_is_a_plain_model() -> None:
    cfg = RetrievalConfig()
    assert cfg.hierarchical.global_top_k == 5 and cfg.hierarchical.alpha == 0.7
    assert cfg.find.rrf_k == 60 and cfg.context.default_budget == 4096
    random.seed(0)
