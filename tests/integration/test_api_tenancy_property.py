"""Tenancy at the API boundary, as a property (hypothesis): over random keys (account-wide,
bound to a user or an agent, under-scoped, revoked, forged, missing), random named identities
and every endpoint, no response carries another account's or another owner's data, and wrong
keys get 401/403 and change nothing."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from api_world import ApiWorld, api_world, auth
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SCHEMA = "rt_api_tenancy"
ACCOUNTS, USERS, AGENTS = ("a1", "a2"), ("u1", "u2"), ("g1", "g2")


def marker(account: str, user: str) -> str:
    return f"zorblax{account}{user}"


@dataclass
class Key:
    raw: str | None
    account: str
    user: str | None = None
    agent: str | None = None
    scopes: tuple[str, ...] = ("read", "commit")
    valid: bool = True


@dataclass
class World:
    api: ApiWorld
    keys: list[Key]
    uris: list[str]
    commits: list[tuple[str, str, str]]  # (commit id, account, user)


def _session(account: str, user: str, agent: str) -> dict[str, Any]:
    m = marker(account, user)
    return {
        "user_id": user,
        "agent_id": agent,
        "session_id": f"{account}-{user}",
        "commit_id": f"c-{account}-{user}",
        "messages": [
            {"id": "m1", "role": "user", "content": f"My favourite colour is {m} and I love it."},
            {"id": "m2", "role": "assistant", "content": "Noted."},
            {"id": "m3", "role": "user", "content": f"I live in the town of {m}ville."},
        ],
    }


@pytest.fixture(scope="module")
def world(pg_url: str, redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root: Path = tmp_path_factory.mktemp("api-tenancy")
    with api_world(pg_url, redis_url, root, SCHEMA, api_rate_limit="") as w:
        commits = []
        for i, a in enumerate(ACCOUNTS):
            writer = w.key(a, "commit")
            for j, u in enumerate(USERS):
                body = _session(a, u, AGENTS[(i + j) % 2])
                r = w.client.post("/v1/commits", json=body, headers=auth(writer))
                assert r.status_code == 202, r.text
                commits.append((body["commit_id"], a, u))
        w.reindex()
        keys: list[Key] = []
        for a in ACCOUNTS:
            keys.append(Key(w.key(a, "read,commit"), a))
            keys.append(Key(w.key(a, "read"), a, scopes=("read",)))
            keys.append(Key(w.key(a, "commit"), a, scopes=("commit",)))
            for u in USERS:
                keys.append(Key(w.key(a, "read,commit", user=u), a, user=u))
            for g in AGENTS:
                keys.append(Key(w.key(a, "read", agent=g), a, agent=g, scopes=("read",)))
            revoked = w.key(a, "read,commit", user="u1")
            assert w.store.revoke(revoked.split("_")[1])
            keys.append(Key(revoked, a, valid=False))
            good = w.key(a, "read,commit")
            keys.append(Key(good[:-3] + ("xyz" if not good.endswith("xyz") else "abc"), a,
                            valid=False))  # fmt: skip
        keys.append(Key(None, "a1", valid=False))
        keys.append(Key("not-a-key", "a1", valid=False))
        uris = []
        for a in ACCOUNTS:
            for u in USERS:
                tree = w.service.tree(f"ctx://{a}/users/{u}/", _ctx(a, u), 6)
                uris += [n.uri for n in tree if not n.has_children][:3]
                uris.append(f"ctx://{a}/sessions/{a}-{u}/")
            for g in AGENTS:
                uris.append(f"ctx://{a}/agents/{g}/")
        yield World(w, keys, uris, commits)


def _ctx(a: str, u: str):  # type: ignore[no-untyped-def]
    from ctxpipe.core.session import RequestContext

    return RequestContext(account_id=a, user_id=u, agent_id="default", session_id="t")


def _state(w: World) -> tuple[int, int]:
    """(ledger rows, files on the FS)."""
    with psycopg.connect(w.api.settings.database_url) as conn:
        row = conn.execute(f"SELECT count(*) FROM {SCHEMA}.commits").fetchone()
    files = sum(1 for p in w.api.settings.fs_root.rglob("*") if p.is_file())
    return int(row[0]) if row else 0, files


ENDPOINTS = ("find", "search", "context", "read", "ls", "tree", "stat", "relations", "commit",
             "get_commit", "remove")  # fmt: skip
NEEDS = {"commit": "commit", "remove": "commit"}


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    key_i=st.integers(0, 10_000),
    endpoint=st.sampled_from(ENDPOINTS),
    account=st.sampled_from((None, *ACCOUNTS)),
    user=st.sampled_from((None, *USERS)),
    agent=st.sampled_from((None, *AGENTS)),
    uri_i=st.integers(0, 10_000),
    commit_i=st.integers(0, 10_000),
)
def test_no_response_crosses_an_account_or_owner(
    world: World,
    key_i: int,
    endpoint: str,
    account: str | None,
    user: str | None,
    agent: str | None,
    uri_i: int,
    commit_i: int,
) -> None:
    key = world.keys[key_i % len(world.keys)]
    uri = world.uris[uri_i % len(world.uris)]
    cid, c_account, c_user = world.commits[commit_i % len(world.commits)]
    who = {k: v for k, v in (("account_id", account), ("user_id", user), ("agent_id", agent))
           if v is not None}  # fmt: skip
    if endpoint == "get_commit":
        account = user = agent = None  # the commit id alone names it
        who = {}
    headers = auth(key.raw) if key.raw else {}
    c = world.api.client
    before = _state(world)
    if endpoint in ("find", "search", "context"):
        resp = c.post(f"/v1/{endpoint}", json={**who, "query": "favourite colour town"},
                      headers=headers)  # fmt: skip
    elif endpoint == "commit":
        body = {"messages": _session("a1", "u1", "g1")["messages"][:1], "session_id": "new"}
        body.update(who)
        resp = c.post("/v1/commits", json=body, headers=headers)
    elif endpoint == "get_commit":
        resp = c.get(f"/v1/commits/{cid}", headers=headers)
    elif endpoint == "remove":
        resp = c.request("DELETE", "/v1/nodes", params={**who, "uri": uri}, headers=headers)
    else:
        resp = c.get(f"/v1/nodes/{endpoint}", params={**who, "uri": uri}, headers=headers)

    assert resp.status_code < 500, resp.text
    if not key.valid:
        assert resp.status_code == 401, resp.text
        assert _state(world) == before
        return
    if NEEDS.get(endpoint, "read") not in key.scopes:
        assert resp.status_code == 403, resp.text
        assert _state(world) == before
        return
    acting_user = key.user or user
    acting_agent = key.agent or agent or "default"
    crossing = (
        (account not in (None, key.account))
        or (key.user is not None and user not in (None, key.user))
        or (key.agent is not None and agent not in (None, key.agent))
    )
    if crossing:
        assert resp.status_code == 403, resp.text
        assert _state(world) == before
        return
    if endpoint == "get_commit":
        mine = c_account == key.account and (key.user is None or key.user == c_user)
        if key.agent is not None:
            served = AGENTS[(ACCOUNTS.index(c_account) + USERS.index(c_user)) % 2]
            mine = mine and served == key.agent
        assert resp.status_code == (200 if mine else 404), resp.text
        for a in ACCOUNTS:
            for u in USERS:
                if not (mine and (a, u) == (c_account, c_user)):
                    assert marker(a, u) not in resp.text
        assert _state(world) == before
        return
    if acting_user is None:
        assert resp.status_code == 400, resp.text
        return
    text = resp.text
    # markers of users this request may see: its own, and (through the serving agent's
    # memories) those of its account's users whose sessions that agent served
    allowed = {marker(key.account, acting_user)} if acting_user else set()
    for i, a in enumerate(ACCOUNTS):
        for j, u in enumerate(USERS):
            if a == key.account and AGENTS[(i + j) % 2] == acting_agent:
                allowed.add(marker(a, u))
    for a in ACCOUNTS:
        for u in USERS:
            if marker(a, u) not in allowed:
                assert marker(a, u) not in text, (endpoint, key, who, text[:2000])
    for other in ACCOUNTS:
        if other != key.account and resp.status_code < 400:  # an error may echo the request
            assert f"ctx://{other}/" not in text
    if endpoint not in ("commit", "remove"):
        assert _state(world)[0] == before[0]  # reads never record a commit
