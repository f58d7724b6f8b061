"""The LangGraph store on the client, inside a small LangGraph graph: one run remembers what
the user said (a commit through the API), a later run recalls it (find in the user's space)."""

from __future__ import annotations

from typing import TypedDict

import pytest
from api_world import ApiWorld
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore

from ctxpipe.client import CtxClient
from ctxpipe.client.langgraph_store import CtxStore

SCHEMA = "rt_langgraph"  # the world of the module (conftest.py), served at `world_url`


class State(TypedDict, total=False):
    said: str
    question: str
    answer: str


def build_graph(store: BaseStore):  # type: ignore[no-untyped-def]
    ns = ("users", "ann")

    def remember(state: State, *, store: BaseStore) -> State:
        if state.get("said"):
            store.put(ns, "note", {"content": state["said"]})
        return {}

    def recall(state: State, *, store: BaseStore) -> State:
        if not state.get("question"):
            return {}
        items = store.search(ns, query=state["question"], limit=3)
        return {"answer": items[0].value["text"] if items else ""}

    g = StateGraph(State)
    g.add_node("remember", remember)
    g.add_node("recall", recall)
    g.add_edge(START, "remember")
    g.add_edge("remember", "recall")
    g.add_edge("recall", END)
    return g.compile(store=store)


def test_a_graph_remembers_and_recalls_through_the_store(world: ApiWorld, world_url: str) -> None:
    key = world.key("acme", "read,commit", user="ann")
    client = CtxClient(world_url, key)
    store = CtxStore(client)
    assert store.account == "acme" and store.user == "ann"
    assert store.list_namespaces() == [("users", "ann"), ("agents", "default")]

    graph = build_graph(store)
    graph.invoke({"said": "I adopted a golden retriever puppy named Biscuit last weekend."})
    world.reindex()  # the embed workers' job on a deployed stack
    out = graph.invoke({"question": "What is the name of my dog?"})
    assert "Biscuit" in out["answer"]

    hits = store.search(("users", "ann"), query="golden retriever puppy", limit=5)
    memory = next(h for h in hits if "/memories/" in h.key)
    assert memory.key.startswith("ctx://acme/users/ann/") and memory.score
    item = store.get(("users", "ann"), memory.key)
    assert item is not None and "Biscuit" in item.value["text"]
    store.delete(("users", "ann"), memory.key)
    assert store.get(("users", "ann"), memory.key) is None

    # another user's store cannot reach ann's space
    bob = CtxStore(CtxClient(world_url, world.key("acme", "read", user="bob")))
    with pytest.raises(Exception, match="403"):
        bob.search(("users", "ann"), query="Biscuit")
