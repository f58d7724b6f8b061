"""The memory browser (/ui) over real PostgreSQL and Redis: sign-in with a key kept in a
server-side session, the tree, a node, find and build_context, commits, removal with a CSRF
token, and the key's tenancy on every page."""

from __future__ import annotations

import re
from urllib.parse import unquote

import pytest
from api_world import ApiWorld, auth
from fastapi.testclient import TestClient

SCHEMA = "rt_ui"
SESSION = {
    "session_id": "ui-s1",
    "messages": [
        {
            "id": "m1",
            "role": "user",
            "created_at": "2024-03-01T09:00:00Z",
            "content": "I adopted a golden retriever puppy named Biscuit last weekend.",
        },
        {"id": "m2", "role": "assistant", "content": "Congratulations! How is Biscuit?"},
        {
            "id": "m3",
            "role": "user",
            "content": "I live in Porto and I prefer tea over coffee in the morning.",
        },
    ],
}


@pytest.fixture(scope="module")
def world(world: ApiWorld) -> ApiWorld:
    """The module's API app (conftest.py), with ann's session committed and indexed."""
    key = world.key("acme", "read,commit", user="ann")
    r = world.client.post(
        "/v1/commits",
        json={**SESSION, "commit_id": "ui-c1", "agent_id": "helper"},
        headers=auth(key),
    )
    assert r.status_code == 202, r.text
    world.reindex()
    return world


def browser(world: ApiWorld) -> TestClient:
    """A fresh client (its own cookie jar) on the world's app."""
    return TestClient(world.client.app, raise_server_exceptions=False)


def form_token(client: TestClient) -> str:
    """The sign-in form's token (its cookie is set on `client` with it)."""
    form = client.get("/ui/login")
    token = re.search(r'name="token" value="([^"]+)"', form.text)
    assert form.status_code == 200 and token
    return token.group(1)


def sign_in(client: TestClient, key: str, **who: str) -> None:
    r = client.post(
        "/ui/login", data={"key": key, "token": form_token(client), **who}, follow_redirects=False
    )
    assert r.status_code == 303 and r.headers["location"] == "/ui/", r.text
    assert key not in r.headers["location"]
    cookie = next(h for h in r.headers.get_list("set-cookie") if h.startswith("ctxpipe_ui="))
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/ui" in cookie
    assert key not in cookie


def csrf_of(html: str) -> str:
    m = re.search(r'name="csrf" value="([^"]+)"', html)
    assert m, html
    return m.group(1)


def memory_uris(html: str, user: str) -> list[str]:
    """The nodes of `user`'s memories a page links to."""
    links = {unquote(u) for u in re.findall(r'href="/ui/node\?uri=([^"&]+)"', html)}
    return sorted(u for u in links if u.startswith(f"ctx://acme/users/{user}/"))


def test_pages_need_a_session(world: ApiWorld) -> None:
    client = browser(world)
    for path in ("/ui/", "/ui/find?q=x", "/ui/commits", "/ui/node?uri=ctx://acme/users/ann"):
        r = client.get(path, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/ui/login", path
    client.cookies.set("ctxpipe_ui", "not-a-session", path="/ui")
    assert client.get("/ui/", follow_redirects=False).status_code == 303


def test_a_wrong_key_or_a_missing_form_token_signs_nobody_in(world: ApiWorld) -> None:
    client = browser(world)
    wrong = "ctx_0123456789abcdef_" + "x" * 40
    bad = client.post("/ui/login", data={"key": wrong, "token": form_token(client)})
    assert bad.status_code == 401 and "invalid or revoked API key" in bad.text
    no_token = browser(world).post("/ui/login", data={"key": world.key("acme", user="ann")})
    assert no_token.status_code == 403
    unbound = world.key("acme", "read")  # account-wide: names the user it acts for
    r = client.post("/ui/login", data={"key": unbound, "token": form_token(client)})
    assert r.status_code == 400 and "user_id is required" in r.text
    sign_in(client, unbound, user_id="ann")  # acting as a user it names
    assert "acme / ann / default" in client.get("/ui/").text


def test_browse_the_tree_to_a_node_with_its_levels_history_and_validity(world: ApiWorld) -> None:
    client = browser(world)
    sign_in(client, world.key("acme", "read", user="ann"), agent_id="helper")
    home = client.get("/ui/")
    assert home.status_code == 200
    assert home.headers["content-security-policy"].startswith("default-src 'none'")
    uris = memory_uris(home.text, "ann")
    assert uris, home.text
    pages = {u: client.get("/ui/node", params={"uri": u}) for u in uris}
    assert all(p.status_code == 200 for p in pages.values())
    profile = next(
        p.text for u, p in pages.items() if 'id="level-l2"' in p.text and "Porto" in p.text
    )
    assert 'id="level-l0"' in profile and 'id="level-l1"' in profile
    assert 'id="history"' in profile and "create" in profile and "ui-c1" in profile
    assert "current" in profile and 'id="relations"' in profile and "Tags:" in profile
    assert "Delete this memory" not in profile  # a read key cannot remove
    owner = client.get("/ui/node", params={"uri": "ctx://acme/users/ann"})
    assert owner.status_code == 200 and 'id="children"' in owner.text
    sessions = client.get("/ui/tree", params={"uri": "ctx://acme/sessions"})
    assert sessions.status_code == 200 and "ui-s1" in sessions.text
    escape = client.get("/ui/node", params={"uri": "ctx://acme/users/ann/../bob"})
    assert escape.status_code == 400 and "acme / ann" in escape.text  # still signed in
    missing = client.get("/ui/node", params={"uri": "ctx://acme/users/ann/memories/nope"})
    assert missing.status_code == 404


def test_find_and_build_context_show_scores_turns_and_tokens(world: ApiWorld) -> None:
    client = browser(world)
    sign_in(client, world.key("acme", "read", user="ann"))
    asked = {"q": "What is the dog called?", "top_k": 5, "as_of": ""}  # as the form sends it
    found = client.get("/ui/find", params=asked)
    assert found.status_code == 200 and "Biscuit" in found.text
    assert re.search(r"<td>0\.\d{4}</td>", found.text)  # a score
    assert "ui-s1:m1" in found.text  # the turn it cites
    built = client.get("/ui/find", params={"q": "dog", "mode": "context", "budget": 300})
    assert built.status_code == 200 and 'id="context-text"' in built.text
    assert re.search(r"\d+ / 300 tokens", built.text)
    empty = client.get("/ui/find", params={"q": "x", "top_k": 0})
    assert empty.status_code == 422 and "top_k" in empty.text
    bad_day = client.get("/ui/find", params={"q": "x", "as_of": "yesterday"})
    assert bad_day.status_code == 422 and "as_of" in bad_day.text


def test_commits_list_and_one_commit(world: ApiWorld) -> None:
    client = browser(world)
    sign_in(client, world.key("acme", "read", user="ann"))
    listed = client.get("/ui/commits")
    assert listed.status_code == 200 and "ui-c1" in listed.text
    assert 'id="health"' in listed.text and "FS nodes" in listed.text
    assert 'id="flower-link"' in listed.text
    one = client.get("/ui/commits/ui-c1")
    assert one.status_code == 200
    assert 'id="extractors"' in one.text and "profile" in one.text and "success" in one.text
    assert client.get("/ui/commits/nope").status_code == 404


def test_another_account_sees_nothing_of_the_first(world: ApiWorld) -> None:
    client = browser(world)
    sign_in(client, world.key("globex", "read,commit", user="ann"))
    home = client.get("/ui/")
    assert "ctx://acme/" not in home.text and "Biscuit" not in home.text
    found = client.get("/ui/find", params={"q": "What is the dog called?"})
    assert found.status_code == 200 and "Biscuit" not in found.text
    assert "ui-c1" not in client.get("/ui/commits").text
    assert client.get("/ui/commits/ui-c1").status_code == 404
    node = client.get("/ui/node", params={"uri": "ctx://acme/users/ann"})
    assert node.status_code == 403 and "Biscuit" not in node.text
    # another user of the same account neither
    other = browser(world)
    sign_in(other, world.key("acme", "read", user="bob"))
    assert memory_uris(other.get("/ui/").text, "ann") == []
    assert other.get("/ui/node", params={"uri": "ctx://acme/users/ann"}).status_code == 403


def test_remove_one_memory_with_confirmation_and_token(world: ApiWorld) -> None:
    key = world.key("acme", "read,commit", user="dee")
    world.client.post(
        "/v1/commits",
        json={**SESSION, "session_id": "ui-s2", "commit_id": "ui-c2"},
        headers={"Authorization": f"Bearer {key}"},
    )
    client = browser(world)
    sign_in(client, key)
    uri = memory_uris(client.get("/ui/").text, "dee")[-1]
    node = client.get("/ui/node", params={"uri": uri})
    assert "Delete this memory" in node.text
    confirm = client.get("/ui/node/delete", params={"uri": uri})
    assert confirm.status_code == 200 and 'id="confirm-delete"' in confirm.text
    forged = client.post("/ui/node/delete", data={"uri": uri, "csrf": "forged"})
    assert forged.status_code == 403
    assert client.get("/ui/node", params={"uri": uri}).status_code == 200  # still there
    done = client.post(
        "/ui/node/delete", data={"uri": uri, "csrf": csrf_of(confirm.text)}, follow_redirects=False
    )
    assert done.status_code == 303 and done.headers["location"].startswith("/ui/?removed=")
    assert client.get("/ui/node", params={"uri": uri}).status_code == 404
    # a read-only key of the same user is refused by the API's rule
    reader = browser(world)
    sign_in(reader, world.key("acme", "read", user="dee"))
    page = reader.get("/ui/")
    left = memory_uris(page.text, "dee")
    r = reader.post("/ui/node/delete", data={"uri": left[0], "csrf": csrf_of(page.text)})
    assert r.status_code == 403 and "commit" in r.text


def test_sign_out_and_revocation_end_the_session(world: ApiWorld) -> None:
    client = browser(world)
    key = world.key("acme", "read", user="ann")
    sign_in(client, key)
    page = client.get("/ui/")
    out = client.post("/ui/logout", data={"csrf": csrf_of(page.text)}, follow_redirects=False)
    assert out.status_code == 303
    assert client.get("/ui/", follow_redirects=False).status_code == 303
    sign_in(client, key)
    assert client.get("/ui/", follow_redirects=False).status_code == 200
    world.store.revoke(key.split("_")[1])
    assert client.get("/ui/", follow_redirects=False).status_code == 303
