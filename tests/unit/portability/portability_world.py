"""Helpers of the export / import tests: a small ContextFS of two accounts, users, an agent,
sessions with their owners, relations and multi-version histories."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from ctxpipe.core.models import ContextNode, RelationEdge
from ctxpipe.core.session import RequestContext
from ctxpipe.fs import ContextFS, FSRelationStore, LocalOwnerLock
from ctxpipe.fs.history import NodeChange
from ctxpipe.fs.session_owner import SessionOwners

ANN = "ctx://acme/users/ann/memories"
NODES = [
    f"{ANN}/entities/biscuit",
    f"{ANN}/entities/lisbon",
    f"{ANN}/preferences/ramen",
    "ctx://acme/users/bob/memories/profile",
    "ctx://acme/agents/bot/memories/patterns/retry",
    "ctx://acme/sessions/s1/archives/1",
    "ctx://acme/sessions/s2/archives/1",
    "ctx://globex/users/ann/memories/profile",
]


def put(fs: ContextFS, uri: str, text: str, **fields: object) -> ContextNode:
    node = ContextNode(
        uri=uri,
        category=uri.split("/")[-2],
        abstract=f"{text}.",
        overview=f"- {text} [m1]",
        content=f"- {text}, said twice [m1]\n",
        source_refs=["s1:m1"],
        metadata={"confidence": 0.7, "tags": ["a", "b"], "nested": {"x": [1, 2.5, None]}},
        **fields,  # type: ignore[arg-type]
    )
    return fs.write_node(node, change=NodeChange(action="create", commit_id="c1"))


def populate(fs: ContextFS) -> ContextFS:
    for uri in NODES:
        put(fs, uri, f"about {uri.rsplit('/', 1)[-1]}")
    put(fs, f"{ANN}/entities/biscuit", "Biscuit is a golden retriever")  # version 2
    rel = FSRelationStore(fs)
    rel.append_edges(
        f"{ANN}/entities/biscuit",
        [
            RelationEdge(from_uri="", to_uri=f"{ANN}/entities/lisbon"),
            RelationEdge(
                from_uri="",
                to_uri="ctx://acme/sessions/s1/archives/1",
                relation_type="derived_from",
            ),
        ],
    )
    lock = LocalOwnerLock(fs.fs_root)
    owners = SessionOwners(fs)
    owners.claim(
        RequestContext(account_id="acme", user_id="ann", agent_id="bot", session_id="s1"), lock
    )
    owners.claim(
        RequestContext(account_id="acme", user_id="bob", agent_id="bot", session_id="s2"), lock
    )
    return fs


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Every node file under `root` (not locks, not commit journals): relative path → bytes."""
    out: dict[str, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in (".locks", ".commits")]
        for name in filenames:
            if name == ".lock":
                continue
            path = Path(dirpath) / name
            out[str(path.relative_to(root))] = path.read_bytes()
    return out


TreeBytes = Callable[[Path], dict[str, bytes]]
