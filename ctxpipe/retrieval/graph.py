"""Relations as a graph: breadth-first traversal to a depth (graph distance).

`ReadPath.graph` feeds it: a node's outgoing edges are read from the FS (`.relations.json`,
the truth); its incoming edges from the replica's `relation_edges` (the FS has no reverse
index), when the replica is reachable.
Every neighbour reached at distance d scores ``1 / (1 + d)``; it is reported once, at its
shortest distance, with the edge it was first reached by. Nodes the request may not read are
neither reported nor traversed through.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Literal

from pydantic import BaseModel

from ctxpipe.core.models import RelationEdge

MAX_DEPTH = 5
MAX_NODES = 1000  # a traversal stops growing past this many neighbours


class GraphNeighbour(BaseModel):
    uri: str
    distance: int
    score: float
    via: str  # the node it was reached from
    relation_type: str
    direction: Literal["out", "in"]


def graph_distance_score(distance: int) -> float:
    """Graph distance: 1 at the node itself, 1/2 for a neighbour, 1/3 two hops away."""
    return 1.0 / (1.0 + distance)


def traverse(
    start: str,
    depth: int,
    outgoing: Callable[[str], Iterable[RelationEdge]],
    incoming: Callable[[list[str]], Iterable[RelationEdge]] | None = None,
    visible: Callable[[str], bool] = lambda _uri: True,
    max_nodes: int = MAX_NODES,
) -> list[GraphNeighbour]:
    """Neighbours of `start` within `depth` hops, nearest first (then by URI)."""
    if not 1 <= depth <= MAX_DEPTH:
        raise ValueError(f"depth must be between 1 and {MAX_DEPTH}, got {depth}")
    seen = {start}
    found: list[GraphNeighbour] = []
    frontier = [start]
    for distance in range(1, depth + 1):
        reached: dict[str, GraphNeighbour] = {}
        steps: list[tuple[str, str, RelationEdge, Literal["out", "in"]]] = []
        for uri in frontier:
            steps += [(uri, e.to_uri, e, "out") for e in outgoing(uri)]
        if incoming is not None and frontier:
            at = set(frontier)
            steps += [(e.to_uri, e.from_uri, e, "in") for e in incoming(frontier) if e.to_uri in at]
        for via, other, edge, direction in steps:
            if other in seen or other in reached or not visible(other):
                continue
            reached[other] = GraphNeighbour(
                uri=other,
                distance=distance,
                score=graph_distance_score(distance),
                via=via,
                relation_type=edge.relation_type,
                direction=direction,
            )
        ordered = sorted(reached.values(), key=lambda n: n.uri)
        room = max_nodes - len(found)
        found += ordered[:room]
        seen.update(n.uri for n in ordered)
        frontier = [n.uri for n in ordered[:room]]
        if not frontier or len(found) >= max_nodes:
            break
    return found


__all__ = ["MAX_DEPTH", "GraphNeighbour", "graph_distance_score", "traverse"]
