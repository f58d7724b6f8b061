"""PgVectorIndex against the real embedded PostgreSQL + pgvector, with real embeddings."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import numpy as np
import pytest
from psycopg.types.json import Jsonb

from ctxpipe.core.errors import StorageError
from ctxpipe.core.models import ChunkRecord
from ctxpipe.providers.base import VectorIndex
from ctxpipe.providers.embedder import PACKAGED_MODEL, SentenceTransformerEmbedder
from ctxpipe.providers.pgvector_index import PgVectorIndex
from ctxpipe.storage.db import Database

# (account, owner_space, category, slug, L0 text, [L2 chunks])
NODES: list[tuple[str, str, str, str, str, list[str]]] = [
    (
        "acme",
        "users/u1",
        "preferences",
        "indentation",
        "The user prefers tabs over spaces for indentation in Python code.",
        ["Always indent Python with tabs.", "Spaces annoy the user in code reviews."],
    ),
    (
        "acme",
        "users/u1",
        "preferences",
        "editor-theme",
        "The user likes a dark colour theme in the code editor.",
        [],
    ),
    (
        "acme",
        "users/u1",
        "entities",
        "project-atlas",
        "Project Atlas is the team's data lake built on PostgreSQL.",
        ["Atlas ingests click events.", "Atlas runs on PostgreSQL 18.", "Atlas has 3 engineers."],
    ),
    (
        "acme",
        "users/u2",
        "preferences",
        "indentation",
        "This user wants tabs, not spaces, when indenting Python.",
        [],
    ),
    ("acme", "agents/bot", "skills", "grep", "grep is best for finding text in files quickly.", []),
    (
        "globex",
        "users/u1",
        "preferences",
        "indentation",
        "The user prefers tabs over spaces for indentation in Python code.",
        [],
    ),
]
QUERY = "Which indentation style does the user like for Python?"


def uri_of(account: str, owner: str, category: str, slug: str) -> str:
    return f"ctx://{account}/{owner}/memories/{category}/{slug}"


@pytest.fixture(scope="module")
def embedder() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder(PACKAGED_MODEL, device="cpu")


@pytest.fixture
def index(
    clean_db: str, database: Database, embedder: SentenceTransformerEmbedder
) -> PgVectorIndex:
    with database.connection() as conn:
        for account, owner, category, slug, abstract, chunks in NODES:
            uri = uri_of(account, owner, category, slug)
            parent = uri.rsplit("/", 1)[0]
            conn.execute(
                "INSERT INTO ctx.context_nodes (uri, account_id, parent_uri, context_type, "
                "category, owner_space, abstract_text, version, metadata) "
                "VALUES (%s, %s, %s, 'memory', %s, %s, %s, 3, %s)",
                (uri, account, parent, category, owner, abstract, Jsonb({"slug": slug})),
            )
            texts = [(0, 0, abstract)] + [(2, i, t) for i, t in enumerate(chunks)]
            vectors = embedder.encode([t for _, _, t in texts])
            for (level, idx, text), vec in zip(texts, vectors, strict=True):
                conn.execute(
                    "INSERT INTO ctx.context_chunks (chunk_id, uri, account_id, parent_uri, "
                    "level, chunk_index, text_content, embedding, context_type, category, "
                    "owner_space, source_refs, metadata, node_version) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, 'memory', %s, %s, %s, %s, 3)",
                    (
                        ChunkRecord.make_id(uri, level, idx),
                        uri,
                        account,
                        parent,
                        level,
                        idx,
                        text,
                        np.array(vec, dtype=np.float32),
                        category,
                        owner,
                        Jsonb(["m-1"]),
                        Jsonb({"lang": "en"}),
                    ),
                )
        # a chunk without an embedding yet (written, not embedded) never shows up
        uri = uri_of("acme", "users/u1", "preferences", "editor-theme")
        conn.execute(
            "INSERT INTO ctx.context_chunks (chunk_id, uri, account_id, level, chunk_index, "
            "text_content, embedding, category, owner_space) "
            "VALUES ('pending', %s, 'acme', 0, 1, 'pending', NULL, 'preferences', 'users/u1')",
            (uri,),
        )
    return PgVectorIndex(database, schema="ctx")


def search(index: PgVectorIndex, vector: list[float], **kw: Any) -> list[Any]:
    filters = kw.pop("filters")
    return asyncio.run(index.search(vector, filters, **kw))


def test_protocol(database: Database) -> None:
    assert isinstance(PgVectorIndex(database), VectorIndex)


def test_top_k_order_and_scores(
    index: PgVectorIndex, embedder: SentenceTransformerEmbedder
) -> None:
    q = embedder.encode([QUERY])[0]
    hits = search(index, q, filters={"account_id": "acme", "owner_space": "users/u1"}, top_k=3)
    assert [h.uri for h in hits] == [
        uri_of("acme", "users/u1", "preferences", "indentation"),
        uri_of("acme", "users/u1", "preferences", "editor-theme"),
        uri_of("acme", "users/u1", "entities", "project-atlas"),
    ]
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    assert scores[0] > 0.6 and scores[0] - scores[2] > 0.3
    top = hits[0]
    assert top.level == 0 and top.category == "preferences" and top.owner_space == "users/u1"
    assert top.abstract.startswith("The user prefers tabs")
    assert top.metadata["source_refs"] == ["m-1"]
    assert top.metadata["lang"] == "en" and top.metadata["version"] == 3
    assert top.metadata["text"] == top.abstract
    # the exact text scores ~1
    exact = embedder.encode([NODES[0][4]])[0]
    (best,) = search(
        index, exact, filters={"account_id": "acme", "owner_space": "users/u1"}, top_k=1
    )
    assert best.score == pytest.approx(1.0, abs=1e-4)


def test_filters_isolate(index: PgVectorIndex, embedder: SentenceTransformerEmbedder) -> None:
    q = embedder.encode([QUERY])[0]
    everything = search(index, q, filters={"account_id": "acme"}, top_k=50)
    assert {h.uri.split("/")[2] for h in everything} == {"acme"}
    assert len(everything) == 5  # the globex copy never leaks; the NULL-embedding chunk is skipped
    globex = search(index, q, filters={"account_id": "globex"}, top_k=50)
    assert [h.uri for h in globex] == [uri_of("globex", "users/u1", "preferences", "indentation")]

    u2 = search(index, q, filters={"account_id": "acme", "owner_space": "users/u2"}, top_k=10)
    assert [h.owner_space for h in u2] == ["users/u2"]

    prefs = search(
        index,
        q,
        filters={"account_id": "acme", "owner_space": "users/u1", "category": "preferences"},
        top_k=10,
    )
    assert {h.category for h in prefs} == {"preferences"} and len(prefs) == 2

    several = search(
        index, q, filters={"account_id": "acme", "category": ["skills", "entities"]}, top_k=10
    )
    assert sorted(h.category for h in several) == ["entities", "skills"]

    prefix = search(
        index, q, filters={"account_id": "acme", "uri_prefix": "ctx://acme/agents/"}, top_k=10
    )
    assert [h.owner_space for h in prefix] == ["agents/bot"]
    # LIKE wildcards in the prefix are literal
    assert (
        search(index, q, filters={"account_id": "acme", "uri_prefix": "ctx://acme/%"}, top_k=10)
        == []
    )
    assert search(index, q, filters={"account_id": "nobody"}, top_k=10) == []
    assert search(index, q, filters={"account_id": "acme", "category": []}, top_k=10) == []


def test_levels_one_hit_per_uri(
    index: PgVectorIndex, embedder: SentenceTransformerEmbedder
) -> None:
    q = embedder.encode(["What database does Atlas run on?"])[0]
    hits = search(index, q, filters={"account_id": "acme"}, top_k=10, level=2)
    assert [h.uri for h in hits] == [
        uri_of("acme", "users/u1", "entities", "project-atlas"),
        uri_of("acme", "users/u1", "preferences", "indentation"),
    ]  # 3 Atlas chunks collapse into one hit: the best one
    assert hits[0].level == 2 and hits[0].metadata["text"] == "Atlas runs on PostgreSQL 18."
    any_level = search(index, q, filters={"account_id": "acme", "level": None}, top_k=10)
    assert len(any_level) == 5 and any_level[0].uri == hits[0].uri
    via_filter = search(index, q, filters={"account_id": "acme", "level": 2}, top_k=10)
    assert [h.uri for h in via_filter] == [h.uri for h in hits]
    assert index.search_sync(q, {"account_id": "acme"}, top_k=2, level=2)[0].uri == hits[0].uri


def test_bad_input(index: PgVectorIndex) -> None:
    q = [0.1] * 384
    with pytest.raises(ValueError, match="account_id"):
        search(index, q, filters={"owner_space": "users/u1"})
    with pytest.raises(ValueError, match="unknown vector search filter"):
        search(index, q, filters={"account_id": "acme", "owner": "users/u1"})
    with pytest.raises(ValueError, match="NaN"):
        search(index, [float("nan")] * 384, filters={"account_id": "acme"})
    with pytest.raises(StorageError, match="dimensions"):
        search(index, [0.1, 0.2, 0.3], filters={"account_id": "acme"})
    assert search(index, q, filters={"account_id": "acme"}, top_k=0) == []


def test_invalid_schema_name(database: Database) -> None:
    for bad in ("ctx; DROP TABLE x", "Ctx", "a-b", ""):
        with pytest.raises(StorageError, match="invalid schema"):
            PgVectorIndex(database, schema=bad)


def test_injection_in_values_is_inert(index: PgVectorIndex) -> None:
    evil = "acme' OR '1'='1"
    assert search(index, [0.1] * 384, filters={"account_id": evil}, top_k=10) == []
    assert json.dumps(index.__repr__())  # repr never raises


def test_unindexed_lists_the_nodes_whose_upsert_is_still_in_the_outbox(
    index: PgVectorIndex, database: Database
) -> None:
    prefs = "ctx://acme/users/u1/memories/preferences/"
    with database.connection() as conn:
        for event_id, uri, account, status, kind in (
            ("e1", prefs + "coffee", "acme", "pending", "UPSERT_CONTEXT"),
            ("e2", prefs + "tea", "acme", "claimed", "UPSERT_CONTEXT"),
            ("e3", prefs + "done", "acme", "done", "UPSERT_CONTEXT"),  # indexed already
            ("e4", prefs + "gone", "acme", "pending", "DELETE_CONTEXT"),
            ("e5", "ctx://acme/users/u2/memories/preferences/coffee", "acme", "pending",
             "UPSERT_CONTEXT"),  # another owner
            ("e6", prefs + "coffee", "globex", "pending", "UPSERT_CONTEXT"),  # another account
            ("e7", prefs + "coffee", "acme", "failed", "UPSERT_CONTEXT"),  # to retry: the same
        ):  # fmt: skip
            conn.execute(
                "INSERT INTO ctx.outbox_events (event_id, event_type, uri, account_id, status) "
                "VALUES (%s, %s, %s, %s, %s)",
                (event_id, kind, uri, account, status),
            )
    found = asyncio.run(index.unindexed("acme", prefs))
    assert found == [prefs + "coffee", prefs + "tea"]
    assert asyncio.run(index.unindexed("acme", prefs + "%")) == []  # a prefix, not a pattern
