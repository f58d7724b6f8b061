"""The HTTP API over real PostgreSQL and Redis: keys, the error shape, commits, the read path,
limits, health and metrics."""

from __future__ import annotations

from pathlib import Path

from api_world import ApiWorld, api_world, auth

SCHEMA = "rt_api"
SESSION = {
    "session_id": "s1",
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
            "content": "Great. I am training for the Lisbon half marathon in May.",
        },
    ],
}


def error_of(resp) -> dict:  # type: ignore[no-untyped-def]
    body = resp.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}, body
    assert "Traceback" not in resp.text
    return body["error"]


def test_commit_then_find_through_the_api(world: ApiWorld) -> None:
    key = world.key("acme", "read,commit", user="ann")
    r = world.client.post("/v1/commits", json={**SESSION, "commit_id": "api-c1"}, headers=auth(key))
    assert r.status_code == 202, r.text
    assert r.json()["commit_id"] == "api-c1" and r.headers["Location"] == "/v1/commits/api-c1"
    again = world.client.post(
        "/v1/commits", json={**SESSION, "commit_id": "api-c1"}, headers=auth(key)
    )
    assert again.status_code == 202 and again.json()["commit_id"] == "api-c1"

    st = world.client.get("/v1/commits/api-c1", headers=auth(key)).json()
    assert st["finished"] and st["status"] == "success" and st["user_id"] == "ann"
    assert st["result"]["stats"]["nodes_created"] >= 1

    world.reindex()
    found = world.client.post(
        "/v1/find", json={"query": "What is the dog called?", "top_k": 5}, headers=auth(key)
    )
    assert found.status_code == 200, found.text
    hits = [h for hs in found.json()["groups"].values() for h in hs]
    assert any("Biscuit" in h["text"] for h in hits)
    assert all(h["uri"].startswith("ctx://acme/") for h in hits)

    uri = next(h["uri"] for h in hits if "/users/ann/" in h["uri"])
    read = world.client.get("/v1/nodes/read", params={"uri": uri, "level": 2}, headers=auth(key))
    assert read.status_code == 200 and read.json()["text"]
    ls = world.client.get(
        "/v1/nodes/ls", params={"uri": "ctx://acme/users/ann/"}, headers=auth(key)
    )
    assert ls.status_code == 200 and ls.json()
    ctxr = world.client.post(
        "/v1/context", json={"query": "dog", "budget": 500, "session_id": "q1"}, headers=auth(key)
    )
    assert ctxr.status_code == 200 and ctxr.json()["total_tokens"] <= 500

    # another user of the same account sees nothing of ann's
    bob = world.key("acme", "read", user="bob")
    other = world.client.post("/v1/find", json={"query": "Biscuit dog"}, headers=auth(bob))
    assert other.status_code == 200
    assert all("/users/ann/" not in h["uri"] and "/sessions/s1/" not in h["uri"]
               for hs in other.json()["groups"].values() for h in hs)  # fmt: skip
    assert world.client.get("/v1/commits/api-c1", headers=auth(bob)).status_code == 404
    denied = world.client.get("/v1/nodes/read", params={"uri": uri}, headers=auth(bob))
    assert denied.status_code == 403 and error_of(denied)["code"] == "forbidden"


def test_find_and_context_take_an_as_of_date(world: ApiWorld) -> None:
    key = world.key("acme", "read", user="ann")
    for path, body in (
        ("/v1/find", {"query": "Where does the user live?"}),
        ("/v1/search", {"query": "Where does the user live?"}),
        ("/v1/context", {"query": "Where does the user live?", "budget": 300}),
    ):
        ok = world.client.post(path, json={**body, "as_of": "2024-02-01"}, headers=auth(key))
        assert ok.status_code == 200, ok.text
        bad = world.client.post(path, json={**body, "as_of": "last june"}, headers=auth(key))
        assert bad.status_code == 422 and error_of(bad)["code"], bad.text


def test_keys_are_checked_and_errors_share_one_shape(world: ApiWorld) -> None:
    c = world.client
    body = {"query": "anything", "user_id": "ann"}
    missing = c.post("/v1/find", json=body)
    assert missing.status_code == 401 and error_of(missing)["code"] == "unauthorized"
    assert missing.headers["WWW-Authenticate"] == "Bearer"
    assert c.post("/v1/find", json=body, headers=auth("ctx_nope")).status_code == 401
    good = world.key("acme", "read")
    forged = good[:-4] + ("AAAA" if not good.endswith("AAAA") else "BBBB")
    assert c.post("/v1/find", json=body, headers=auth(forged)).status_code == 401
    assert c.post("/v1/find", json=body, headers={"X-API-Key": good}).status_code == 200

    key_id = good.split("_")[1]
    assert world.store.revoke(key_id)
    revoked = c.post("/v1/find", json=body, headers=auth(good))
    assert revoked.status_code == 401 and "revoked" in error_of(revoked)["message"]

    reader = world.key("acme", "read", user="ann")
    under = c.post("/v1/commits", json=SESSION, headers=auth(reader))
    assert under.status_code == 403 and error_of(under)["details"]["required"] == "commit"

    ann = world.key("acme", "read,commit", user="ann")
    for field, value in (("account_id", "globex"), ("user_id", "bob")):
        r = c.post("/v1/find", json={"query": "x", field: value}, headers=auth(ann))
        assert r.status_code == 403 and error_of(r)["details"]["field"] == field
    acct = world.key("acme", "read")
    no_user = c.post("/v1/find", json={"query": "x"}, headers=auth(acct))
    assert no_user.status_code == 400 and error_of(no_user)["details"]["field"] == "user_id"

    bad = c.post("/v1/find", json={"query": ""}, headers=auth(ann))
    assert bad.status_code == 422 and error_of(bad)["details"]["errors"]
    assert error_of(c.get("/v1/nope"))["code"] == "not_found"
    uri = c.get("/v1/nodes/read", params={"uri": "http://x"}, headers=auth(ann))
    assert uri.status_code == 400 and error_of(uri)["code"] == "invalid_uri"
    gone = c.get(
        "/v1/nodes/read", params={"uri": "ctx://acme/users/ann/memories/none"}, headers=auth(ann)
    )
    assert gone.status_code == 404 and error_of(gone)["code"] == "not_found"
    thief = world.key("other", "read,commit", user="ann")
    stolen = c.post("/v1/commits", json={**SESSION, "commit_id": "api-c1"}, headers=auth(thief))
    assert stolen.status_code == 409 and error_of(stolen)["code"] == "conflict"
    assert c.get("/v1/commits/api-c1", headers=auth(thief)).status_code == 404


def test_body_limit_and_input_limits(world: ApiWorld) -> None:
    key = world.key("acme", "read,commit", user="ann")
    huge = {"query": "x" * (world.settings.api_max_body_bytes + 10)}
    r = world.client.post("/v1/find", json=huge, headers=auth(key))
    assert r.status_code == 413 and error_of(r)["code"] == "too_large"

    def chunks():  # type: ignore[no-untyped-def]
        for _ in range(world.settings.api_max_body_bytes // 65536 + 2):
            yield b"x" * 65536

    streamed = world.client.post(
        "/v1/find",
        content=chunks(),
        headers={**auth(key), "Content-Type": "application/json"},
    )
    assert streamed.status_code == 413


def test_rate_limit_is_per_key_and_shared_through_redis(
    pg_url: str, redis_url: str, tmp_path: Path
) -> None:
    with api_world(pg_url, redis_url, tmp_path, "rt_api_rl", api_rate_limit="3/minute") as w:
        a, b = w.key("acme", "read", user="ann"), w.key("acme", "read", user="bob")
        codes = [w.client.get("/v1/commits/x", headers=auth(a)).status_code for _ in range(4)]
        assert codes == [404, 404, 404, 429]
        limited = w.client.get("/v1/commits/x", headers=auth(a))
        assert error_of(limited)["code"] == "rate_limited"
        assert int(limited.headers["Retry-After"]) >= 1
        assert w.client.get("/v1/commits/x", headers=auth(b)).status_code == 404
        # a second app (another API process) shares the window of key a
        from fastapi.testclient import TestClient

        from ctxpipe.api import create_app

        other = create_app(w.settings, w.service, key_store=w.store, close_service=False)
        with TestClient(other) as c2:
            assert c2.get("/v1/commits/x", headers=auth(a)).status_code == 429


def test_the_served_openapi_document_is_the_one_the_docs_are_built_from(world: ApiWorld) -> None:
    from ctxpipe.api.app import openapi_document

    served = world.client.get("/openapi.json").json()
    assert served == openapi_document()
    assert "/v1/find" in served["paths"] and "FindResult" in served["components"]["schemas"]


def test_health_readiness_and_metrics(world: ApiWorld) -> None:
    c = world.client
    assert c.get("/healthz").json() == {"status": "ok", "checks": {}}
    ready = c.get("/readyz")
    assert ready.status_code == 200, ready.text
    assert ready.json()["checks"] == {"postgres": "ok", "redis": "ok", "fs": "ok"}
    c.get("/v1/commits/x", headers=auth(world.key("acme", "read", user="ann")))
    text = c.get("/metrics").text
    assert 'ctxpipe_api_request_seconds_count{method="GET",route="/v1/commits/{commit_id}"' in text
    assert "ctxpipe_outbox_backlog" in text and "ctxpipe_outbox_oldest_pending_seconds" in text
    assert "ctxpipe_store_up 1.0" in text


def test_readiness_names_what_is_down(pg_url: str, tmp_path: Path) -> None:
    with api_world(pg_url, "redis://127.0.0.1:1/0", tmp_path, "rt_api_down") as w:
        r = w.client.get("/readyz")
        assert r.status_code == 503
        checks = r.json()["checks"]
        assert checks["postgres"] == "ok" and checks["redis"].startswith("unreachable")
        # the limiter fails open: reads still work with Redis down
        key = w.key("acme", "read", user="ann")
        assert w.client.get("/v1/commits/x", headers=auth(key)).status_code == 404


def test_remove_one_memory(world: ApiWorld) -> None:
    key = world.key("acme", "read,commit", user="cy")
    session = {**SESSION, "session_id": "cy-s1", "commit_id": "api-cy"}
    assert world.client.post("/v1/commits", json=session, headers=auth(key)).status_code == 202
    tree = world.client.get(
        "/v1/nodes/tree", params={"uri": "ctx://acme/users/cy/", "depth": 5}, headers=auth(key)
    ).json()
    leaf = next(n["uri"] for n in tree if not n["has_children"] and "/memories/" in n["uri"])
    other = world.key("acme", "read,commit", user="dee")
    assert (
        world.client.delete("/v1/nodes", params={"uri": leaf}, headers=auth(other)).status_code
        == 403
    )
    r = world.client.delete("/v1/nodes", params={"uri": leaf}, headers=auth(key))
    assert r.status_code == 200 and r.json() == {"uri": leaf, "removed": True}
    st = world.client.get("/v1/nodes/stat", params={"uri": leaf}, headers=auth(key)).json()
    assert st["exists"] is False
    again = world.client.delete("/v1/nodes", params={"uri": leaf}, headers=auth(key))
    assert again.json()["removed"] is False
