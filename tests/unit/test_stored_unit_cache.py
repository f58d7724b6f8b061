"""The per-chunk cache of index-time unit vectors that find keeps between queries: it fetches
only chunks it has not seen at their current node version, and stays within its bound."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ctxpipe.retrieval.models import CandidateRow
from ctxpipe.retrieval.units.unit_vectors import StoredUnitCache
from ctxpipe.storage.pipelined import Pending


class Replica:
    """Unit vectors by chunk, as the `retrieval_unit_vectors` query returns them."""

    def __init__(self) -> None:
        self.units: dict[str, dict[str, list[float]]] = {}
        self.asked: list[list[str]] = []
        self.sent: list[list[str]] = []

    def fetch(self, ids: Sequence[str]) -> Mapping[str, Mapping[str, Any]]:
        self.asked.append(sorted(ids))
        return {c: dict(self.units.get(c, {})) for c in ids}

    def send(self, ids: Sequence[str]) -> Pending[Mapping[str, Mapping[str, Any]]]:
        self.sent.append(sorted(ids))
        return Pending(lambda: self.fetch(ids))


def _row(cid: str, version: int) -> CandidateRow:
    return CandidateRow(chunk_id=cid, uri=f"ctx://a/{cid}", level=2, chunk_index=0,
                        node_version=version)  # fmt: skip


def test_fetches_only_what_it_has_not_seen_at_this_version() -> None:
    db = Replica()
    db.units = {"c1": {"k1": [1.0, 0.0]}, "c2": {"k2": [0.0, 1.0], "k3": [1.0, 1.0]}}
    cache = StoredUnitCache(db.fetch)
    got = cache.get([_row("c1", 1), _row("c2", 1)], (2,))
    assert {c: set(v) for c, v in got.items()} == {"c1": {"k1"}, "c2": {"k2", "k3"}}
    k3 = got["c2"]["k3"]
    assert np.allclose(k3, [1.0, 1.0]) and k3.dtype == np.float32
    assert cache.get([_row("c2", 1), _row("c1", 1)], (2,)).keys() == got.keys()
    assert db.asked == [["c1", "c2"]]  # the second query asked nothing
    db.units["c2"] = {"k4": [0.5, 0.5]}  # the node changed: new version, new units
    got = cache.get([_row("c1", 1), _row("c2", 2)], (2,))
    assert {c: set(v) for c, v in got.items()} == {"c1": {"k1"}, "c2": {"k4"}}
    assert db.asked[-1] == ["c2"]


def test_vectors_of_another_shape_are_left_out() -> None:
    db = Replica()
    db.units = {"c1": {"k1": [1.0, 0.0, 0.0], "k2": [1.0, 0.0]}}
    assert set(StoredUnitCache(db.fetch).get([_row("c1", 1)], (2,))["c1"]) == {"k2"}


def test_stays_within_its_bound_dropping_the_least_recently_used() -> None:
    db = Replica()
    db.units = {f"c{i}": {f"k{i}-{j}": [float(i), float(j)] for j in range(10)} for i in range(5)}
    cache = StoredUnitCache(db.fetch, max_units=30)
    for i in range(5):
        cache.get([_row(f"c{i}", 1)], (2,))
    assert 0 < cache.units_held <= 30
    db.asked.clear()
    cache.get([_row("c4", 1)], (2,))  # recent: still held
    assert db.asked == []
    cache.get([_row("c0", 1)], (2,))  # the oldest went first
    assert db.asked == [["c0"]]


def test_chunks_sent_for_ahead_are_held_once_read_and_not_fetched_again() -> None:
    """find sends for the text arm's chunks beside its fused statement: only those not held
    at their version go out, they are held once the statement is read, and the ranking's
    fetch after it asks only for the others."""
    db = Replica()
    db.units = {f"c{i}": {f"k{i}": [float(i), 1.0]} for i in range(4)}
    cache = StoredUnitCache(db.fetch, send=db.send)
    cache.get([_row("c0", 1)], (2,))
    pending = cache.send_missing({"c0": 1, "c1": 1, "c2": 1}, (2,))
    assert pending is not None and db.sent == [["c1", "c2"]]
    assert db.asked == [["c0"]]  # sent, not read yet
    pending.result()
    db.asked.clear()
    got = cache.get([_row(f"c{i}", 1) for i in range(4)], (2,))
    assert db.asked == [["c3"]]  # only the chunk nobody sent for
    assert {c: set(v) for c, v in got.items()} == {f"c{i}": {f"k{i}"} for i in range(4)}
    assert np.allclose(got["c2"]["k2"], [2.0, 1.0])
    assert cache.send_missing({"c1": 1, "c3": 1}, (2,)) is None  # all held: nothing sent
    assert cache.send_missing({"c1": 2}, (2,)) is not None  # a newer version is sent for
    assert StoredUnitCache(db.fetch).send_missing({"c9": 1}, (2,)) is None  # cannot send


def test_held_answers_without_fetching_only_when_every_chunk_is_held() -> None:
    """find ranks straight away, with no fetch handed to a thread, when every dense chunk's
    units are held at their version."""
    db = Replica()
    db.units = {"c1": {"k1": [1.0, 0.0]}, "c2": {"k2": [0.0, 1.0]}}
    cache = StoredUnitCache(db.fetch)
    assert cache.held([_row("c1", 1)]) is None  # not seen yet
    cache.get([_row("c1", 1), _row("c2", 1)], (2,))
    held = cache.held([_row("c2", 1), _row("c1", 1)])
    assert held is not None and {c: set(v) for c, v in held.items()} == {"c1": {"k1"}, "c2": {"k2"}}
    assert cache.held([_row("c1", 1), _row("c2", 2)]) is None  # c2 changed since
    assert db.asked == [["c1", "c2"]]  # held never fetches
