"""Breadth-first traversal of the relation graph: depth, scores 1/(1+d), both directions,
shortest distance wins, invisible nodes are neither reported nor traversed through."""

from __future__ import annotations

import pytest

from ctxpipe.core.models import RelationEdge
from ctxpipe.retrieval.graph import graph_distance_score, traverse

EDGES = [
    RelationEdge(from_uri="a", to_uri="b", relation_type="related_to"),
    RelationEdge(from_uri="b", to_uri="c", relation_type="related_to"),
    RelationEdge(from_uri="c", to_uri="d", relation_type="related_to"),
    RelationEdge(from_uri="a", to_uri="x", relation_type="derived_from"),
    RelationEdge(from_uri="y", to_uri="x", relation_type="derived_from"),  # only reachable "in"
    RelationEdge(from_uri="x", to_uri="secret", relation_type="related_to"),
    RelationEdge(from_uri="secret", to_uri="behind", relation_type="related_to"),
]


def out(uri: str) -> list[RelationEdge]:
    return [e for e in EDGES if e.from_uri == uri]


def inc(uris: list[str]) -> list[RelationEdge]:
    return [e for e in EDGES if e.to_uri in uris]


def test_scores_follow_graph_distance():
    assert [graph_distance_score(d) for d in (0, 1, 2, 3)] == [1.0, 0.5, 1 / 3, 0.25]


def test_depth_one_is_the_direct_neighbours():
    found = traverse("a", 1, out, inc)
    assert [(n.uri, n.distance, n.score, n.direction) for n in found] == [
        ("b", 1, 0.5, "out"),
        ("x", 1, 0.5, "out"),
    ]


def test_deeper_walks_both_directions_nearest_first():
    found = {n.uri: n for n in traverse("a", 3, out, inc)}
    assert found["c"].distance == 2 and found["c"].via == "b"
    assert found["d"].distance == 3 and found["d"].score == 0.25
    assert found["y"].distance == 2 and found["y"].direction == "in" and found["y"].via == "x"
    assert "a" not in found  # the start is not its own neighbour
    distances = [n.distance for n in traverse("a", 3, out, inc)]
    assert distances == sorted(distances)


def test_outgoing_only_without_a_replica():
    found = {n.uri for n in traverse("a", 3, out, None)}
    assert "y" not in found and {"b", "c", "d", "x", "secret", "behind"} <= found


def test_shortest_distance_wins():
    edges = [*EDGES, RelationEdge(from_uri="a", to_uri="d")]
    found = {
        n.uri: n for n in traverse("a", 3, lambda u: [e for e in edges if e.from_uri == u], None)
    }
    assert found["d"].distance == 1


def test_invisible_nodes_are_not_reported_nor_walked_through():
    found = {n.uri for n in traverse("a", 5, out, inc, visible=lambda u: u != "secret")}
    assert "secret" not in found and "behind" not in found
    assert {"b", "c", "d", "x", "y"} <= found


def test_bounds():
    with pytest.raises(ValueError, match="depth"):
        traverse("a", 0, out)
    with pytest.raises(ValueError, match="depth"):
        traverse("a", 6, out)
    assert len(traverse("a", 5, out, inc, max_nodes=2)) == 2
