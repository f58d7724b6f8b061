"""Concurrency: 50 commits for one user submitted at once and run by two worker processes.
The owner-space lock serialises their writes to the shared profile: the profile holds every
fact (no merge lost), its versions strictly increase, and no lock is left behind."""

from __future__ import annotations

import itertools
import json
import random

import redis
from celery import Celery
from celery_stack import wait_commit, workers

N = 50


def tool_names(n: int) -> list[str]:
    """Made-up, distinct product names: one fact per session that no two sessions share."""
    syl = ["ka", "lo", "mi", "ru", "te", "zo", "pa", "ne"]
    names = [(a + b + c).capitalize() for a, b, c in itertools.product(syl, syl, syl)]
    random.Random(7).shuffle(names)
    return names[:n]


def test_fifty_concurrent_commits_for_one_user_lose_no_fact(  # type: ignore[no-untyped-def]
    make_settings, clean_db, clean_redis, tmp_path
):
    settings = make_settings()
    names = tool_names(N)
    sessions = [
        {
            "account_id": "acme",
            "user_id": "alice",
            "agent_id": "helper",
            "session_id": f"conc-{i}",
            "commit_id": f"conc-{i}",
            "messages": [
                {"id": "m1", "role": "user", "content": f"I use {name} at work."},
                {"id": "m2", "role": "assistant", "content": "Good to know."},
            ],
        }
        for i, name in enumerate(names)
    ]
    producer = Celery(broker=settings.redis_url, backend=settings.redis_url, set_as_current=False)
    with workers(
        settings,
        tmp_path,
        [("commit,extract,maintenance", 2), ("commit,extract,maintenance", 2)],
    ):
        sent = [
            producer.send_task("ctxpipe.commit.submit", args=[s], queue="commit") for s in sessions
        ]
        for r in sent:
            r.get(timeout=120)
            r.forget()
        rows = [wait_commit(settings, s["commit_id"], timeout=600) for s in sessions]
    producer.close()
    assert [(r["phase"], r["status"]) for r in rows] == [("registered", "success")] * N, [
        (r["commit_id"], r["error"]) for r in rows if r["phase"] != "registered"
    ]

    profile = settings.fs_root / "acme/users/alice/memories/profile"
    content = (profile / "content.md").read_text(encoding="utf-8")
    missing = [n for n in names if f"uses {n} at work" not in content]
    assert missing == [], f"{len(missing)} facts lost: {missing[:5]}"

    history = [
        json.loads(line)
        for line in (profile / ".history.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    versions = [h["version"] for h in history]
    assert versions == sorted(set(versions)), versions  # strictly increasing, no repeat
    meta = json.loads((profile / ".meta.json").read_text(encoding="utf-8"))
    assert meta["version"] == versions[-1] == N  # one version per commit
    assert sorted(h["commit_id"] for h in history) == sorted(s["commit_id"] for s in sessions)

    client = redis.Redis.from_url(settings.redis_url)
    assert list(client.scan_iter("ctxpipe:lock:*")) == []  # no owner lock left behind
    client.close()
    leftovers = [
        p
        for p in settings.fs_root.rglob("*")
        if p.name.startswith((".staging-", ".commit-", ".tmp-"))
    ]
    assert leftovers == []
