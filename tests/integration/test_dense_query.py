"""The text find's vector arm embeds: a query word that most of the scope's chunks hold (the
name of the person a memory is about) is left out of it, so that the question's embedding is
near what answers it and not near every short line that names that person."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from ctxpipe.providers.embedder import PACKAGED_MODEL, SentenceTransformerEmbedder
from ctxpipe.retrieval.config import FindConfig
from ctxpipe.retrieval.find.common_words import COMMON_MIN_ROWS
from ctxpipe.retrieval.find.hybrid_finder import HybridFinder
from ctxpipe.retrieval.models import FindFilters
from ctxpipe.retrieval.tokens import counter_for_model
from ctxpipe.retrieval.units.lexical import query_terms
from ctxpipe.storage.db import Database
from ctxpipe.storage.migrations import migrate

SCHEMA = "rt_dense_query"
ACCOUNT, OWNER = "acme", "users/ann"
# what a memory written in the third person looks like: the subject's name in every line
CHATTER = [
    "Ann: Ann would love to check them out",
    "Ann: Ann had a busy week since they last talked",
    "Ann: Ann wishes Ann had known you back then!",
    "Ann: If you ever do it, let Ann know, Ann would love to help",
    "Ann: Ann thinks that sounds like so much fun",
    "Ann: Ann is so glad you liked it",
    "Ann: Ann can't wait to see what you do next",
    "Ann: Ann bets the kids loved that",
    "Ann: Ann is always here for you",
    "Ann: Ann agrees, it was a great day",
    "Ann: Ann wants to hear all about it",
    "Ann: Ann says thanks for the kind words",
    "Ann: Ann will send a photo later",
    "Ann: Ann was just thinking the same thing",
    "Ann: Ann hopes you have a good weekend",
    "Ann: Ann finds that really inspiring",
    "Ann: Ann is happy to talk any time",
    "Ann: Ann loved the picture you sent",
    "Ann: Ann said it was nice catching up",
    "Ann: Ann has been keeping busy lately",
    "Ann: Ann thought about it all day",
    "Ann: Ann is proud of how far they have come",
]
# the line that answers, as its speaker said it: no name in it
ANSWER = "It'll be tough as a single parent since the breakup, but I'm up for the challenge."
QUESTION = "What is Ann's relationship status?"


@pytest.fixture(scope="module")
def finder(pg_url: str) -> Iterator[HybridFinder]:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
    migrate(pg_url, schema=SCHEMA, embedding_dim=384)
    embedder = SentenceTransformerEmbedder(PACKAGED_MODEL, device="cpu")
    texts = [*CHATTER, ANSWER]
    vectors = embedder.encode(texts)
    with psycopg.connect(pg_url) as conn, conn.cursor() as cur:
        with cur.copy(
            f"COPY {SCHEMA}.context_nodes (uri, account_id, owner_space, version) FROM STDIN"
        ) as cp:
            for i in range(len(texts)):
                cp.write_row((f"ctx://acme/users/ann/memories/n{i}", ACCOUNT, OWNER, 1))
        with cur.copy(
            f"COPY {SCHEMA}.context_chunks (chunk_id, uri, account_id, level, text_content, "
            "embedding, context_type, owner_space) FROM STDIN"
        ) as cp:
            for i, (text, vec) in enumerate(zip(texts, vectors, strict=True)):
                literal = "[" + ",".join(f"{float(x):.6f}" for x in vec) + "]"
                uri = f"ctx://acme/users/ann/memories/n{i}"
                cp.write_row((f"c{i}", uri, ACCOUNT, 0, text, literal, "memory", OWNER))
    db = Database(pg_url, min_size=1, max_size=2)
    yield HybridFinder(
        db,
        embedder,
        counter_for_model(PACKAGED_MODEL),
        schema=SCHEMA,
        config=FindConfig(record_recalls=False),
    )
    db.close()


SCOPE = FindFilters(account_id=ACCOUNT, owner_spaces=[OWNER])


def test_a_word_most_chunks_hold_is_left_out_of_the_embedded_query(finder: HybridFinder) -> None:
    assert len(CHATTER) + 1 >= COMMON_MIN_ROWS  # enough rows to tell
    assert finder.store.common_lexemes(SCOPE) == {"ann"}
    assert finder.dense_query(QUESTION, SCOPE) == "What is relationship status?"
    # a word few chunks hold stays, and so does a query of nothing but common words
    assert finder.dense_query("When did Ann go camping?", SCOPE) == "When did go camping?"
    assert finder.dense_query("What is the breakup about?", SCOPE) == "What is the breakup about?"
    assert finder.dense_query("Ann?", SCOPE) == "Ann?"
    off = HybridFinder(
        finder.db,
        finder.embedder,
        finder.counter,
        schema=SCHEMA,
        config=FindConfig(common_word_ratio=0, record_recalls=False),
    )
    assert off.dense_query(QUESTION, SCOPE) == QUESTION
    # another owner's scope (no rows) says nothing about this one's words
    empty = FindFilters(account_id=ACCOUNT, owner_spaces=["users/bob"])
    assert finder.dense_query(QUESTION, empty) == QUESTION


def test_the_answering_line_ranks_first_not_the_lines_that_name_the_person(
    finder: HybridFinder,
) -> None:
    hits = finder.find(QUESTION, SCOPE, 5, record=False).hits
    assert hits[0].text == ANSWER
    # the question as asked, embedded whole: the name pulls the chatter above the answer
    vec = finder.embed(QUESTION)
    asked = finder.find(QUESTION, SCOPE, 5, query_vector=vec, record=False).hits
    assert ANSWER not in [h.text for h in asked[:1]]


def test_the_text_arm_does_not_match_on_a_common_word_cold_or_warm(finder: HybridFinder) -> None:
    store = finder.store
    store.invalidate()  # a scope not seen lately: one statement counts it and ranks
    terms = query_terms("Is Ann single after the breakup?")
    common = store.common_terms(SCOPE, terms)
    cold = store.text_arm("Is Ann single after the breakup?", SCOPE, 40, common=common)
    store.invalidate()
    assert store.common_lexemes(SCOPE) == {"ann"}  # counted once for the scope
    assert store.common_terms(SCOPE, terms) == {"ann"}
    warm = store.text_arm("Is Ann single after the breakup?", SCOPE, 40, common=common)
    for arm in (cold, warm):
        assert set(arm.idf) == {"single", "breakup"}
        assert arm.ids == ["c22"]  # the answer alone: no chunk ranks for naming Ann
    assert cold.scores == pytest.approx(warm.scores, rel=1e-12)
    # a query of nothing but the common word still matches on it
    store.invalidate()
    assert store.common_terms(SCOPE, ["ann"]) == set()
    assert set(store.text_arm("Ann?", SCOPE, 40).idf) == {"ann"}


def test_a_scope_is_counted_again_in_the_background_while_finds_go_on(
    finder: HybridFinder,
) -> None:
    store = finder.store
    store.invalidate()
    assert store.common_lexemes(SCOPE) == {"ann"}  # the first find of the scope counts it
    key = store._scope_key(SCOPE)
    store.common.counted.put(key, frozenset({"stale"}))  # what an earlier count found
    assert store.common_lexemes(SCOPE) == {"stale"}  # still fresh: not counted again
    store.common.fresh.clear()  # COMMON_REFRESH_S later
    assert store.common_lexemes(SCOPE) == {"stale"}  # served at once...
    store.common.recounter().submit(lambda: None).result()  # ...while it is counted again
    assert store.common_lexemes(SCOPE) == {"ann"}
