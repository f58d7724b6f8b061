"""find through the HTTP API vs the same call in process, and API throughput with 2 workers.

    .venv/bin/python bench/api_latency.py [--sessions 40] [--queries 200] [--seconds 20]

One throwaway stack (PostgreSQL + Redis on free ports). Sessions of 4 users are committed in
process and indexed; then, in the same run:

1. latency: each query is sent once in process (`ContextEngineService.find`, the baseline) and
   once through a `ctxpipe serve` process with 1 worker (`CtxClient.find`: HTTP, key check,
   rate limit, JSON both ways), alternating, so both see the same machine load. Reported:
   p50/p95 of each and their ratio (target <= 1.3 at p95).
2. throughput: `ctxpipe serve --workers 2`, `--clients` threads calling find for `--seconds`;
   reported requests/s, with the in-process find/s of the same threads as the baseline.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._stack import env_for, local_stack, percentile, sample_session  # noqa: E402
from ctxpipe.api.keys import KeySpec, KeyStore  # noqa: E402
from ctxpipe.client import CtxClient  # noqa: E402
from ctxpipe.commit.coordinator import CommitCoordinator  # noqa: E402
from ctxpipe.commit.payloads import CommitRequest  # noqa: E402
from ctxpipe.core.config import Settings  # noqa: E402
from ctxpipe.core.session import RequestContext, SessionInput  # noqa: E402
from ctxpipe.index.reindex import reindex  # noqa: E402
from ctxpipe.index.wiring import make_indexer  # noqa: E402
from ctxpipe.runtime import Runtime  # noqa: E402
from ctxpipe.service import ContextEngineService  # noqa: E402
from ctxpipe.storage.netutil import free_port  # noqa: E402

USERS = ("user0", "user1", "user2", "user3")
QUESTIONS = (
    "Where does the user live?",
    "Which language does the user prefer for services?",
    "Where does the user work?",
    "What does the user always do with dependencies?",
    "What did the user ship recently?",
    "Who is the user's colleague?",
)


@contextmanager
def api_process(settings: Settings, workers: int, logdir: Path) -> Iterator[str]:
    port = free_port()
    env = {**os.environ, **env_for(settings), "CTXPIPE_API_RATE_LIMIT": ""}
    log = open(logdir / f"api-{workers}.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxpipe", "serve", "--port", str(port), "--workers",
         str(workers), "--log-level", "warning"],
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
                raise RuntimeError((logdir / f"api-{workers}.log").read_text()[-3000:])
            time.sleep(0.2)
        yield url
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=30)
        log.close()


def warm_up(client: CtxClient, n: int = 20) -> None:
    """Every worker process loads its model on its first finds."""
    for i in range(n):
        client.find(QUESTIONS[i % len(QUESTIONS)], 10, user_id=USERS[i % len(USERS)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=40)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--json", type=Path, help="write the figures here too")
    args = ap.parse_args()

    with local_stack([], embedding_dim=384) as settings:
        rt = Runtime(settings)
        coord = CommitCoordinator(rt.components())
        for i in range(args.sessions):
            data = sample_session(i, USERS[i % len(USERS)])
            coord.commit_sync(CommitRequest.from_session(SessionInput.model_validate(data)))
        report = reindex(make_indexer(rt))
        svc = ContextEngineService(rt)
        store = KeyStore(rt.db, schema=settings.db_schema)
        key = store.create(KeySpec(account_id="bench", scopes=["read"])).key  # type: ignore[list-item]
        logdir = Path(settings.var_dir)

        def ctx(u: str) -> RequestContext:
            return RequestContext(account_id="bench", user_id=u, agent_id="helper",
                                  session_id="q")  # fmt: skip

        for i in range(20):
            svc.find(QUESTIONS[i % len(QUESTIONS)], ctx(USERS[i % len(USERS)]), 10)
        local_ms: list[float] = []
        api_ms: list[float] = []
        server_ms: list[float] = []  # the find inside the API process (its own timing)
        auth_ms: list[float] = []  # GET /v1/keys/self: HTTP + key check, no find
        with api_process(settings, 1, logdir) as url, CtxClient(url, key, timeout=300) as client:
            warm_up(client)
            for i in range(args.queries):
                q, u = QUESTIONS[i % len(QUESTIONS)], USERS[i % len(USERS)]
                t = time.perf_counter()
                a = svc.find(q, ctx(u), 10)
                local_ms.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                b = client.find(q, 10, user_id=u, agent_id="helper", session_id="q")
                api_ms.append((time.perf_counter() - t) * 1000)
                server_ms.append(b.timings_ms.get("total", 0.0))
                t = time.perf_counter()
                client.whoami()
                auth_ms.append((time.perf_counter() - t) * 1000)
                assert [h.uri for h in a.hits] == [h.uri for h in b.hits], "results differ"

        def hammer(call, seconds: float, clients: int) -> float:  # type: ignore[no-untyped-def]
            done = [0] * clients
            stop = time.monotonic() + seconds

            def run(k: int) -> None:
                i = k
                while time.monotonic() < stop:
                    call(k, QUESTIONS[i % len(QUESTIONS)], USERS[i % len(USERS)])
                    done[k] += 1
                    i += 1

            threads = [threading.Thread(target=run, args=(k,)) for k in range(clients)]
            t0 = time.monotonic()
            for th in threads:
                th.start()
            for th in threads:
                th.join()
            return sum(done) / (time.monotonic() - t0)

        print(
            f"find p50/p95 ms: in process {percentile(local_ms, 0.5):.1f}/"
            f"{percentile(local_ms, 0.95):.1f}, API {percentile(api_ms, 0.5):.1f}/"
            f"{percentile(api_ms, 0.95):.1f}",
            file=sys.stderr,
        )
        local_rps = hammer(lambda k, q, u: svc.find(q, ctx(u), 10), args.seconds, args.clients)
        with api_process(settings, 2, logdir) as url:
            clients = [
                CtxClient(url, key, agent_id="helper", timeout=300) for _ in range(args.clients)
            ]
            for c in clients[:2]:
                warm_up(c, 30)
            api_rps = hammer(
                lambda k, q, u: clients[k].find(q, 10, user_id=u), args.seconds, args.clients
            )
            for c in clients:
                c.close()
        svc.close()

    figures = {
        "nodes_indexed": report.indexed,
        "chunks": report.chunks,
        "queries": args.queries,
        "in_process_p50_ms": round(percentile(local_ms, 0.5), 1),
        "in_process_p95_ms": round(percentile(local_ms, 0.95), 1),
        "api_p50_ms": round(percentile(api_ms, 0.5), 1),
        "api_p95_ms": round(percentile(api_ms, 0.95), 1),
        "api_find_inside_p50_ms": round(percentile(server_ms, 0.5), 1),
        "api_find_inside_p95_ms": round(percentile(server_ms, 0.95), 1),
        "api_auth_only_p50_ms": round(percentile(auth_ms, 0.5), 1),
        "api_auth_only_p95_ms": round(percentile(auth_ms, 0.95), 1),
        "ratio_p50": round(percentile(api_ms, 0.5) / percentile(local_ms, 0.5), 3),
        "ratio_p95": round(percentile(api_ms, 0.95) / percentile(local_ms, 0.95), 3),
        "clients": args.clients,
        "api_2_workers_rps": round(api_rps, 1),
        "in_process_rps": round(local_rps, 1),
        "cpus": os.cpu_count(),
    }
    text = json.dumps(figures, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
