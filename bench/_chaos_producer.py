"""The chaos benchmark's producer: a separate process that knows only Celery (and reads the
ledger table with psycopg, as the README's producer contract allows). Never imports ctxpipe.

    python bench/_chaos_producer.py INPUT.json OUTPUT.json

INPUT: {"broker": url, "database": url, "schema": "ctx", "users": {user: [session, ...]},
        "submit_timeout_s": 10, "commit_timeout_s": 600}
Each user's sessions are sent in order (the next one once the previous commit is terminal in
the ledger), users in parallel. A submit that fails or gets no answer in time is sent again with
the same commit id until `ctxpipe.commit.submit` answers: the contract that makes an accepted
commit durable. One line per finished commit goes to stdout.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

import psycopg
from celery import Celery

TERMINAL = {"registered", "failed"}


def follow(url: str, schema: str, commit_id: str, deadline: float) -> dict[str, Any]:
    """Poll the ledger until the commit is terminal (PostgreSQL outages are waited out)."""
    query = f"SELECT phase, status, error FROM {schema}.commits WHERE commit_id = %s"
    while time.time() < deadline:
        try:
            with psycopg.connect(url, connect_timeout=3) as conn:
                row = conn.execute(query, (commit_id,)).fetchone()
        except psycopg.Error:
            row = None
        if row is not None and row[0] in TERMINAL:
            return {"phase": row[0], "status": row[1], "error": row[2]}
        time.sleep(0.2)
    return {"phase": "timeout", "status": None, "error": "no terminal phase in time"}


def run_user(app: Celery, cfg: dict[str, Any], sessions: list[dict[str, Any]], out: list) -> None:
    for session in sessions:
        submitted = time.time()
        sends = 0
        while True:
            sends += 1
            try:
                result = app.send_task("ctxpipe.commit.submit", args=[session], queue="commit")
                result.get(timeout=cfg.get("submit_timeout_s", 10), propagate=True)
                result.forget()
                break
            except Exception as exc:  # noqa: BLE001 - broker/DB down, timeout: send again
                last = " ".join(str(exc).split())[:160]
                if time.time() - submitted > cfg.get("commit_timeout_s", 600):
                    out.append({"commit_id": session["commit_id"], "phase": "unsent",
                                "error": last, "sends": sends})  # fmt: skip
                    return
                time.sleep(1.0)
        accepted = time.time()
        deadline = submitted + cfg.get("commit_timeout_s", 600)
        state = follow(cfg["database"], cfg.get("schema", "ctx"), session["commit_id"], deadline)
        done = time.time()
        out.append(
            {
                "commit_id": session["commit_id"],
                "user": session["user_id"],
                "sends": sends,
                "submitted_at": round(submitted, 3),
                "submit_s": round(accepted - submitted, 3),
                "latency_s": round(done - submitted, 3),
                **state,
            }
        )
        print(f"done {session['commit_id']} {state['phase']} {done - submitted:.1f}s", flush=True)


def main(argv: list[str]) -> int:
    cfg = json.loads(open(argv[1], encoding="utf-8").read())
    app = Celery("chaos-producer", broker=cfg["broker"], backend=cfg["broker"])
    app.conf.update(
        broker_connection_timeout=3,
        broker_transport_options={"socket_connect_timeout": 3},
        result_backend_transport_options={"socket_connect_timeout": 3},
        broker_connection_retry_on_startup=True,
    )
    results: list[dict[str, Any]] = []
    threads = [
        threading.Thread(target=run_user, args=(app, cfg, sessions, results), daemon=True)
        for sessions in cfg["users"].values()
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with open(argv[2], "w", encoding="utf-8") as fh:
        json.dump(results, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
