"""Chaos: prove that no memory is lost while workers die, the broker restarts and PostgreSQL
goes away — as figures.

    .venv/bin/python bench/chaos.py [--sessions 200] [--kill-every 5] [--seed 7] [--quick]
                                    [--json OUT]

1. A dev stack of real processes (`ctxpipe dev up` machinery: embedded PostgreSQL, Redis with
   its append-only file, one worker node per queue, beat, the supervisor) in a temp directory.
2. LoCoMo dev sessions (read in place), each conversation committed once per speaker as the
   user — each user's sessions in order, users in parallel — by a producer process that imports
   only Celery (bench/_chaos_producer.py: it re-sends a submit until it is answered, then
   follows the ledger).
3. Meanwhile: Redis is restarted right after the first burst of submits (one per user; its
   append-only file keeps the queue); a fault loop SIGKILLs a whole worker node (parent and
   pool children, any queue) every few seconds — the supervisor brings it back —, restarts
   Redis once with its data deleted (every queued message lost) and stops PostgreSQL for a
   while once.
4. When every commit is terminal the pipeline settles (outbox drained, one `ctxpipe repair`,
   drained again), and the FS is compared node by node with a reference built from the same
   sessions in process (same commit ids and order, its own FS root and schema): lost, extra
   and differing nodes; the replica is compared with the FS (missing, stale, orphaned rows);
   duplicate chunk rows are counted. It prints the table and exits 1 if anything was lost.
   Both runs merge a candidate into an existing memory only at its routed URI (the dedup's
   vector prefilter, which reads the index replica, is set not to merge): how far the embed
   workers lag behind is timing, not durability, and must not make the two runs differ.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import _locomo
import psycopg
from _chaos_compare import compare_fs, compare_replica, wait_idle
from _chaos_faults import Faults
from _stack import percentile

from ctxpipe.commit.coordinator import CommitCoordinator
from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.commit.recovery import DIED_RUNNING, REDRIVES
from ctxpipe.core.config import DedupConfig, Settings
from ctxpipe.core.session import SessionInput
from ctxpipe.devstack import DevStack
from ctxpipe.devstack.env import child_env
from ctxpipe.index.wiring import make_worker
from ctxpipe.runtime import Runtime
from ctxpipe.storage.migrations import migrate
from ctxpipe.storage.netutil import free_port

HERE = Path(__file__).resolve().parent
REF_SCHEMA = "chaos_ref"


# ------------------------------------------------------------------ sessions
def sessions_for(sample: dict[str, Any], as_b: bool, limit: int) -> list[dict[str, Any]]:
    """The conversation's sessions with one speaker as the user (the other is the agent)."""
    conv = sample["conversation"]
    a, b = conv["speaker_a"], conv["speaker_b"]
    me, other = (b, a) if as_b else (a, b)
    account = _locomo.slug(f"locomo-{sample['sample_id']}")
    out = []
    for n, date, items in _locomo.sessions_of(conv)[:limit]:
        sid = f"{_locomo.slug(sample['sample_id'])}-s{n}" + ("-b" if as_b else "")
        messages = [
            {
                "id": t["dia_id"],
                "role": "user" if t["speaker"] == me else "assistant",
                "name": t["speaker"],
                "content": _locomo.turn_text(t),
                "created_at": (date + timedelta(seconds=i)).isoformat(),
            }
            for i, t in enumerate(items)
        ]
        out.append(
            {
                "account_id": account,
                "user_id": _locomo.slug(me),
                "agent_id": _locomo.slug(other),
                "session_id": sid,
                "commit_id": f"chaos-{sid}",
                "messages": messages,
            }
        )
    return out


def pick_sessions(data: list[dict[str, Any]], total: int) -> dict[str, list[dict[str, Any]]]:
    """`total` sessions (or all there are), spread over the users as evenly as their
    conversations allow: each user's first sessions, in order."""
    every: dict[str, list[dict[str, Any]]] = {}
    for sample in data:
        for as_b in (False, True):
            sessions = sessions_for(sample, as_b, 10_000)
            every[f"{sessions[0]['account_id']}/{sessions[0]['user_id']}"] = sessions
    taken = dict.fromkeys(every, 0)
    left = min(total, sum(len(s) for s in every.values()))
    while left:
        for user, sessions in every.items():
            if left and taken[user] < len(sessions):
                taken[user] += 1
                left -= 1
    return {user: every[user][:n] for user, n in taken.items() if n}


# ------------------------------------------------------------------ faults
def slow_commits(
    results: list[dict[str, Any]], url: str, schema: str, over_s: float = 30.0
) -> list[dict[str, Any]]:
    """The commits slower than `over_s`, with what the ledger says of them (timings, attempts,
    re-drives): where a slow commit spent its time."""
    slow = sorted(
        (r for r in results if r.get("latency_s", 0) > over_s), key=lambda r: -r["latency_s"]
    )[:10]
    out = []
    with psycopg.connect(url, connect_timeout=5) as conn:
        for r in slow:
            row = conn.execute(
                f"SELECT timings, attempts FROM {schema}.commits WHERE commit_id = %s",
                (r["commit_id"],),
            ).fetchone()
            submitted = r.get("submitted_at", 0.0)
            timings = {
                k: round(v - submitted, 1) if k.endswith("_at") and isinstance(v, float) else v
                for k, v in (row[0] if row else {}).items()
            }
            out.append(
                {
                    "commit_id": r["commit_id"],
                    "latency_s": r["latency_s"],
                    "submitted_at": time.strftime("%H:%M:%S", time.localtime(submitted)),
                    "timings": timings,
                    "attempts": row[1] if row else None,
                }
            )
    return out


def redrives(url: str, schema: str) -> dict[str, int]:
    """What the reaper did: commits it re-drove, the most re-drives of one commit, and the most
    worker deaths that caught one commit's task running (the count bounded by its
    `max_redrives`, beyond which the commit is failed as one that kills its worker)."""
    with psycopg.connect(url, connect_timeout=5) as conn:
        rows = conn.execute(f"SELECT attempts FROM {schema}.commits").fetchall()
    counts = [(int(a.get(REDRIVES, 0)), int(a.get(DIED_RUNNING, 0))) for (a,) in rows if a]
    return {
        "commits": sum(1 for r, _ in counts if r),
        "max": max((r for r, _ in counts), default=0),
        "max_died_running": max((d for _, d in counts), default=0),
    }


def build_reference(settings: Settings, users: dict[str, list[dict[str, Any]]]) -> Path:
    ref = settings.model_copy(
        update={"fs_root": settings.var_dir / "ref-fs", "db_schema": REF_SCHEMA}
    )
    with psycopg.connect(ref.database_url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {REF_SCHEMA} CASCADE")
    migrate(ref.database_url, schema=REF_SCHEMA, embedding_dim=ref.embedding_dim)
    rt = Runtime(ref)
    coord = CommitCoordinator(rt.components())
    worker = make_worker(rt, "chaos-reference")
    done = 0
    total = sum(len(s) for s in users.values())
    for sessions in users.values():
        for raw in sessions:
            req = CommitRequest.from_session(
                SessionInput.model_validate(raw), commit_id=raw["commit_id"]
            )
            coord.commit_sync(req)
            worker.drain(max_seconds=600)
            done += 1
            print(f"\r  reference in process: {done}/{total}", end="", flush=True)
    print()
    rt.close()
    return ref.fs_root


# ------------------------------------------------------------------ run
def run(args: argparse.Namespace) -> dict[str, Any]:
    data = _locomo.load(args.data)[: args.conversations]
    users = pick_sessions(data, args.sessions)
    total = sum(len(s) for s in users.values())
    tmp = Path(tempfile.mkdtemp(prefix="ctxpipe-chaos-"))
    settings = Settings(
        var_dir=tmp / "var",
        fs_root=tmp / "var" / "fs",
        database_url=f"postgresql://ctxpipe@127.0.0.1:{free_port()}/ctxpipe",
        redis_url=f"redis://127.0.0.1:{free_port()}/0",
        flower_port=free_port(),
        api_port=free_port(),  # never the default 8080: another stack may hold it
        # the stack and the reference decide alike: a candidate is merged into a similar memory
        # only by its routed URI (the FS), not by the vector prefilter — that one reads the
        # index replica, which in the stack may not have indexed the user's last commit yet,
        # so the same session could be merged in one run and created in the other by timing
        dedup=DedupConfig(similarity_threshold=1.0, llm_decision_max=1.0),
    )
    stack = DevStack(settings, concurrency=2)
    print(f"chaos: {total} sessions of {len(users)} users; stack in {tmp}", flush=True)
    out: dict[str, Any] = {"sessions": total, "users": len(users)}
    try:
        stack.up(timeout=120)
        cfg = {
            "broker": settings.redis_url,
            "database": settings.database_url,
            "schema": settings.db_schema,
            "users": users,
            "submit_timeout_s": 10,
            "commit_timeout_s": args.commit_timeout,
        }
        (tmp / "producer-in.json").write_text(json.dumps(cfg), encoding="utf-8")
        env = {k: v for k, v in child_env(settings).items() if not k.startswith("CTXPIPE_")}
        producer = subprocess.Popen(
            [sys.executable, str(HERE / "_chaos_producer.py"), str(tmp / "producer-in.json"),
             str(tmp / "producer-out.json")],
            env=env, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        finished = [0]

        def read_progress() -> None:
            assert producer.stdout is not None
            for line in producer.stdout:
                if line.startswith("done "):
                    finished[0] += 1
                    if finished[0] % max(1, total // 20) == 0 or finished[0] == total:
                        print(f"  commits terminal: {finished[0]}/{total}", flush=True)

        reader = threading.Thread(target=read_progress, daemon=True)
        reader.start()
        faults = Faults(
            stack, lambda: finished[0] / total, args.kill_every, args.pg_down, args.seed
        )
        t0 = time.monotonic()
        time.sleep(1.0)  # every user's first submit is in flight: restart the broker under it
        faults.restart_broker()
        faults.start()
        producer.wait(timeout=args.commit_timeout * 4)
        faults.stop.set()
        faults.join(timeout=60)
        t_commits = time.monotonic() - t0
        for _mark, fault in faults.marks:  # a run too short to reach a mark still gets it
            fault()
        reader.join(timeout=5)
        results = json.loads((tmp / "producer-out.json").read_text(encoding="utf-8"))
        print("settling: draining the outbox, one repair, draining again", flush=True)
        t1 = time.monotonic()
        wait_idle(settings.database_url, settings.db_schema, 600)
        rep = subprocess.run(
            [sys.executable, "-m", "ctxpipe", "repair", "--full", "--json"],
            env=child_env(settings), capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        repair = json.loads(rep.stdout) if rep.returncode == 0 else {"error": rep.stderr[-300:]}
        wait_idle(settings.database_url, settings.db_schema, 600)
        settle_s = time.monotonic() - t1
        replica = compare_replica(settings.fs_root, settings.database_url, settings.db_schema)
        slow = slow_commits(results, settings.database_url, settings.db_schema)
        reaped = redrives(settings.database_url, settings.db_schema)
        stack.down(timeout=10)  # the reference runs alone (the stack's PostgreSQL restarts)
        stack.postgres.start()
        print("building the reference in process", flush=True)
        ref_root = build_reference(settings, users)
        fs = compare_fs(settings.fs_root, ref_root)
        lat = [r["latency_s"] for r in results if "latency_s" in r]
        phases = Counter(r["phase"] for r in results)
        out.update(
            {
                "faults": dict(faults.counts),
                "fault_log": faults.log,
                "commits": dict(phases),
                "failed": [
                    {"commit_id": r["commit_id"], "error": r.get("error")}
                    for r in results
                    if r["phase"] != "registered"
                ],
                "resent_submits": sum(r.get("sends", 1) - 1 for r in results),
                "redrives": reaped,
                "latency_p50_s": percentile(lat, 0.5),
                "latency_p95_s": percentile(lat, 0.95),
                "latency_max_s": max(lat) if lat else None,
                "commits_s": round(t_commits, 1),
                "settle_s": round(settle_s, 1),
                "repair": {k: repair.get(k) for k in ("missing", "stale", "orphaned")}
                if isinstance(repair, dict)
                else repair,
                "fs": {
                    "nodes": int(fs["nodes"][0]),
                    "reference_nodes": int(fs["nodes"][1]),
                    "lost": fs["lost"],
                    "duplicate": fs["extra"],
                    "differing": fs["differing"],
                },
                "replica": replica,
                "slowest": slow,
            }
        )
    finally:
        try:
            stack.down(timeout=10)
        except OSError as exc:
            print(f"dev down: {exc}", file=sys.stderr)
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def verdict(out: dict[str, Any]) -> list[str]:
    bad = []
    fs, rep = out["fs"], out["replica"]
    for key in ("lost", "duplicate", "differing"):
        if fs[key]:
            bad.append(f"{len(fs[key])} {key} node(s): {fs[key][:5]}")
    if set(out["commits"]) - {"registered"}:
        bad.append(f"commits not registered: {out['failed'][:5]}")
    for key in ("missing", "orphaned", "stale", "duplicate_chunk_rows"):
        if rep[key]:
            bad.append(f"replica: {rep[key]} {key}")
    return bad


def report(out: dict[str, Any]) -> None:
    fs, rep = out["fs"], out["replica"]
    rows = [
        ("sessions / users", f"{out['sessions']} / {out['users']}"),
        ("faults", ", ".join(f"{k} ×{v}" for k, v in sorted(out["faults"].items()))),
        ("commits", ", ".join(f"{k} {v}" for k, v in out["commits"].items())),
        (
            "failed commits",
            "; ".join(f"{f['commit_id']}: {f['error']}" for f in out["failed"]) or "none",
        ),  # fmt: skip
        ("submits sent again", str(out["resent_submits"])),
        (
            "re-driven by the reaper",
            f"{out['redrives']['commits']} commits, at most {out['redrives']['max']} times; "
            f"at most {out['redrives']['max_died_running']} deaths while running (bound 5)",
        ),  # fmt: skip
        (
            "commit latency",
            f"p50 {out['latency_p50_s']:.1f}s, p95 {out['latency_p95_s']:.1f}s, "
            f"max {out['latency_max_s']:.1f}s (target p95 <= 30s)",
        ),  # fmt: skip
        ("FS nodes vs reference", f"{fs['nodes']} vs {fs['reference_nodes']}"),
        (
            "lost / duplicate / differing",
            f"{len(fs['lost'])} / {len(fs['duplicate'])} / {len(fs['differing'])}",
        ),  # fmt: skip
        (
            "replica vs FS",
            f"{rep['replica_nodes']} rows vs {rep['fs_nodes']} nodes; missing "
            f"{rep['missing']}, stale {rep['stale']}, orphaned {rep['orphaned']}",
        ),  # fmt: skip
        ("duplicate chunk rows", str(rep["duplicate_chunk_rows"])),
        ("dead outbox events", str(rep["dead_events"])),
        ("repair found", json.dumps(out["repair"])),
        ("time: commits / settle", f"{out['commits_s']:.0f}s / {out['settle_s']:.0f}s"),
    ]
    width = max(len(k) for k, _ in rows)
    print()
    for k, v in rows:
        print(f"{k:<{width}}  {v}")
    for s in out.get("slowest", []):
        print(f"slow: {json.dumps(s)}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--data", type=Path, default=None, help="locomo_dev.json (read in place)")
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--conversations", type=int, default=5)
    ap.add_argument("--kill-every", type=float, default=5.0, help="seconds between node kills")
    ap.add_argument("--pg-down", type=float, default=10.0, help="seconds PostgreSQL is stopped")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--commit-timeout", type=float, default=600.0)
    ap.add_argument("--quick", action="store_true", help="the CI variant: 16 sessions, 4 users")
    ap.add_argument("--keep", action="store_true", help="keep the temp directory")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.quick:
        args.sessions, args.conversations, args.kill_every, args.pg_down = 16, 2, 4.0, 5.0
    out = run(args)
    report(out)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2, default=str), encoding="utf-8")
    bad = verdict(out)
    for line in bad:
        print(f"FAIL: {line}")
    print("no memory lost" if not bad else "MEMORY LOST OR DIVERGED")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
