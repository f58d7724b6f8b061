"""The one WHERE builder over the replica's chunks (find and the dedup prefilter share it) and
the thread-safe cache wrapper. No servers."""

from __future__ import annotations

import numpy as np
import pytest
from pgvector import Vector

from ctxpipe.core.caches import LockedCache
from ctxpipe.storage.chunk_sql import ChunkScope, chunk_where, like_prefix, vector_param, vectors_of


def _sql(scope: ChunkScope, **kw: bool) -> tuple[str, dict[str, object]]:
    where, params = chunk_where(scope, **kw)
    return where.as_string(None), params


def test_the_account_always_applies() -> None:
    text, params = _sql(ChunkScope(account_id="acme"))
    assert text == "c.account_id = %(account)s" and params == {"account": "acme"}


def test_owner_spaces_exact_and_whole_scopes() -> None:
    text, params = _sql(ChunkScope(account_id="a", owner_spaces=["users/u1", "resources"]))
    assert "c.owner_space = ANY(%(spaces)s)" in text
    assert "c.owner_space LIKE ANY(%(space_like)s)" in text
    assert params["spaces"] == ["users/u1"] and params["space_like"] == ["resources/%"]
    text, _ = _sql(ChunkScope(account_id="a", owner_spaces=[]))
    assert text.endswith("AND false")  # no space at all: nothing


def test_narrowing_fields_and_scope_only() -> None:
    scope = ChunkScope(
        account_id="a",
        categories=["events"],
        levels=[0, 2],
        uri_prefixes=["ctx://a/users/u_1/"],
        uris=[],
    )
    text, params = _sql(scope)
    assert '"category" = ANY(%(categories)s)' in text and "c.level = ANY(%(levels)s)" in text
    assert params["uri_like"] == ["ctx://a/users/u\\_1/%"]  # LIKE wildcards escaped
    assert params["uris"] == []  # an empty list matches nothing
    text, params = _sql(scope, scope_only=True)
    assert text == "c.account_id = %(account)s" and set(params) == {"account"}


def test_like_prefix_and_vector_param() -> None:
    assert like_prefix("50%_a\\b") == "50\\%\\_a\\\\b%"
    vec = vector_param([1, 0.5])
    assert vec.dtype == np.float32 and vec.tolist() == [1.0, 0.5]
    for bad in ([], [float("nan")], [float("inf")]):
        with pytest.raises(ValueError, match="not finite"):
            vector_param(bad)


def test_vectors_in_pgvectors_binary_form_are_decoded_together() -> None:
    rng = np.random.default_rng(1)
    rows = rng.normal(size=(5, 7)).astype(np.float32)
    blobs = [bytes(Vector(r).to_binary()) for r in rows]
    got = vectors_of(blobs)
    assert got.dtype == np.float32 and got.shape == (5, 7)
    assert np.array_equal(got, rows)  # bit for bit
    assert vectors_of([]).shape == (0, 0)
    with pytest.raises(ValueError, match="different dimensions"):
        vectors_of([*blobs, bytes(Vector(rows[0, :3]).to_binary())])
    with pytest.raises(ValueError, match="binary form"):
        vectors_of([b"\x00"])


def test_locked_cache_bounds_and_expiry() -> None:
    lru: LockedCache[int] = LockedCache.lru(2)
    for i in range(3):
        lru.put(i, i)
    assert len(lru) == 2 and lru.get(0) is None and lru.get(2) == 2
    gone: LockedCache[int] = LockedCache.ttl(10, 0.0)  # expires at once
    gone.put("k", 1)
    assert gone.get("k") is None
