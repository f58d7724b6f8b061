"""The memory browser's pages (/ui) vs the plain JSON API call behind each, on the demo data.

    .venv/bin/python bench/ui_pages.py [--rounds 60] [--json FILE]

One throwaway stack (PostgreSQL + Redis on free ports, commit/extract/embed workers) and a
`ctxpipe serve` process, as `make demo` runs them: the sample sessions of `examples/` are
committed through the API and Celery, as `ctxpipe demo` commits them, and indexed. A browser
session signs in as alice (the demo's user, agent `helper`); then, in the same run, each page
and its JSON call are requested alternately `--rounds` times (so both see the same machine
load), after a warm-up:

    page                          JSON call(s) behind it
    /ui/                          GET /v1/nodes/tree of the user's space (the page lists 5 roots)
    /ui/node?uri=<profile>        GET /v1/nodes/read (L2) + /v1/nodes/stat + /v1/nodes/relations
    /ui/find?q=…                  POST /v1/find
    /ui/find?q=…&mode=context     POST /v1/context
    /ui/commits                   GET /v1/commits/{id} of the newest commit (the page also
                                  reads the outbox, the replica and the FS counts)
    /ui/commits/{id}              GET /v1/commits/{id}

Reported per page: p50/p95 in ms of the page and of its JSON call(s), and their ratio. The
target: every page under 200 ms at p95.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._stack import env_for, local_stack, percentile  # noqa: E402
from ctxpipe.api.keys import KeySpec, KeyStore  # noqa: E402
from ctxpipe.client import CtxClient  # noqa: E402
from ctxpipe.core.config import Settings  # noqa: E402
from ctxpipe.storage.db import Database  # noqa: E402
from ctxpipe.storage.netutil import free_port  # noqa: E402

QUESTION = "how was the Airflow DAG fixed?"
PROFILE = "ctx://acme/users/alice/memories/profile"
WORKERS = [("commit,maintenance", 1), ("extract", 1), ("embed", 1)]


@contextmanager
def api_process(settings: Settings, logdir: Path) -> Iterator[str]:
    port = free_port()
    env = {**os.environ, **env_for(settings), "CTXPIPE_API_RATE_LIMIT": ""}
    log = open(logdir / "api.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxpipe", "serve", "--port", str(port), "--log-level", "warning"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError((logdir / "api.log").read_text()[-3000:])
            time.sleep(0.2)
        yield url
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=30)
        log.close()


def commit_demo(url: str, key: str) -> list[str]:
    """The demo's sessions through the API (Celery commits them), then wait for the index."""
    ids = []
    with CtxClient(url, key, timeout=300) as client:
        for path in sorted((ROOT / "examples").glob("*.json")):
            data = json.loads(path.read_text(encoding="utf-8"))
            cid = client.commit(
                data["messages"],
                user_id=data["user_id"],
                agent_id=data["agent_id"],
                session_id=data["session_id"],
                used_tools=data.get("used_tools") or None,
                commit_id=f"bench-ui-{path.stem}",
            )
            done = client.wait(cid, timeout=600)
            assert done.status == "success", done
            ids.append(cid)
        deadline = time.monotonic() + 300
        while not client.find(QUESTION, 5, user_id="alice", agent_id="helper").hits:
            assert time.monotonic() < deadline, "the demo was not indexed"
            time.sleep(1)
    return ids


def sign_in(http: httpx.Client, key: str) -> None:
    form = http.get("/ui/login")
    token = re.search(r'name="token" value="([^"]+)"', form.text)
    assert token, form.text
    r = http.post("/ui/login", data={"key": key, "token": token.group(1), "agent_id": "helper"})
    assert r.status_code == 303, r.text


def timed(call: Callable[[], None]) -> float:
    t = time.perf_counter()
    call()
    return (time.perf_counter() - t) * 1000


def ok(r: httpx.Response) -> None:
    assert r.status_code == 200, (r.status_code, r.text[:500])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--json", type=Path, help="write the figures here too")
    args = ap.parse_args()

    with local_stack(WORKERS, embedding_dim=384) as settings:
        db = Database.from_settings(settings)
        store = KeyStore(db, schema=settings.db_schema)
        producer = store.create(KeySpec(account_id="acme", scopes=["read", "commit"])).key  # type: ignore[list-item]
        alice = store.create(KeySpec(account_id="acme", user_id="alice", scopes=["read"])).key  # type: ignore[list-item]
        with api_process(settings, Path(settings.var_dir)) as url:
            ids = commit_demo(url, producer)
            newest = [i for i in ids if "alice" in i][-1]  # the latest commit alice may read
            bearer = {"Authorization": f"Bearer {alice}"}
            who = {"agent_id": "helper"}
            with (
                httpx.Client(base_url=url, timeout=60) as page,
                httpx.Client(base_url=url, timeout=60, headers=bearer) as api,
            ):
                sign_in(page, alice)
                q = {"uri": PROFILE, **who}

                def node_json() -> None:
                    ok(api.get("/v1/nodes/read", params={**q, "level": 2}))
                    ok(api.get("/v1/nodes/stat", params=q))
                    ok(api.get("/v1/nodes/relations", params=q))

                pairs: dict[str, tuple[Callable[[], None], Callable[[], None]]] = {
                    "tree": (
                        lambda: ok(page.get("/ui/")),
                        lambda: ok(api.get("/v1/nodes/tree", params={
                            "uri": "ctx://acme/users/alice", "depth": 3, **who})),
                    ),
                    "node": (lambda: ok(page.get("/ui/node", params={"uri": PROFILE})), node_json),
                    "find": (
                        lambda: ok(page.get("/ui/find", params={"q": QUESTION})),
                        lambda: ok(api.post("/v1/find", json={
                            "query": QUESTION, "top_k": 10, **who})),
                    ),
                    "context": (
                        lambda: ok(page.get("/ui/find", params={
                            "q": QUESTION, "mode": "context", "budget": 500})),
                        lambda: ok(api.post("/v1/context", json={
                            "query": QUESTION, "budget": 500, "incremental": False, **who})),
                    ),
                    "commits": (
                        lambda: ok(page.get("/ui/commits")),
                        lambda: ok(api.get(f"/v1/commits/{newest}")),
                    ),
                    "commit": (
                        lambda: ok(page.get(f"/ui/commits/{newest}")),
                        lambda: ok(api.get(f"/v1/commits/{newest}")),
                    ),
                }  # fmt: skip
                for ui_call, json_call in pairs.values():  # warm-up: model, caches, pools
                    for _ in range(5):
                        ui_call()
                        json_call()
                figures: dict[str, object] = {"rounds": args.rounds, "cpus": os.cpu_count()}
                for name, (ui_call, json_call) in pairs.items():
                    ui_ms: list[float] = []
                    json_ms: list[float] = []
                    for _ in range(args.rounds):
                        ui_ms.append(timed(ui_call))
                        json_ms.append(timed(json_call))
                    p50, p95 = percentile(ui_ms, 0.5), percentile(ui_ms, 0.95)
                    j50, j95 = percentile(json_ms, 0.5), percentile(json_ms, 0.95)
                    figures[name] = {
                        "page_p50_ms": round(p50, 1),
                        "page_p95_ms": round(p95, 1),
                        "json_p50_ms": round(j50, 1),
                        "json_p95_ms": round(j95, 1),
                        "ratio_p95": round(p95 / j95, 2),
                        "under_200ms_p95": p95 < 200,
                    }
                    print(
                        f"{name:8s} page p50/p95 {p50:6.1f}/{p95:6.1f} ms   "
                        f"JSON {j50:6.1f}/{j95:6.1f} ms   ratio p95 {p95 / j95:.2f}",
                        file=sys.stderr,
                    )
        db.close()
    text = json.dumps(figures, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
