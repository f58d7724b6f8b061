"""How `bench/chaos.py` settles and judges a run: wait until the outbox is drained, compare
the FS node by node with the reference built in process, and the replica with the FS."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import psycopg

VOLATILE = ("_at", "time", "timestamp", "duration_ms", "trace_id")  # keys that differ by run


def outbox_busy(url: str, schema: str) -> int:
    q = (
        f"SELECT count(*) FROM {schema}.outbox_events "
        "WHERE status IN ('pending', 'claimed', 'failed')"
    )
    with psycopg.connect(url, connect_timeout=5) as conn:
        return int(conn.execute(q).fetchone()[0])  # type: ignore[index]


def wait_idle(url: str, schema: str, timeout: float) -> float:
    started = time.monotonic()
    quiet = 0
    while time.monotonic() - started < timeout:
        try:
            quiet = quiet + 1 if outbox_busy(url, schema) == 0 else 0
        except psycopg.Error:
            quiet = 0
        if quiet >= 3:
            return time.monotonic() - started
        time.sleep(1.0)
    raise TimeoutError(f"the outbox did not drain in {timeout:.0f}s")


def scrub(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: scrub(v) for k, v in value.items() if not str(k).endswith(VOLATILE)}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value


def node_digest(path: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in (".abstract.md", ".overview.md", "content.md"):
        f = path / name
        out[name] = f.read_text(encoding="utf-8") if f.exists() else None
    for name in (".meta.json", ".relations.json"):
        f = path / name
        out[name] = scrub(json.loads(f.read_text(encoding="utf-8"))) if f.exists() else None
    hist = path / ".history.jsonl"
    lines = hist.read_text(encoding="utf-8").splitlines() if hist.exists() else []
    out["history"] = [
        (e.get("version"), e.get("action"), e.get("commit_id") or e.get("commit"))
        for e in map(json.loads, lines)
    ]
    return out


def fs_nodes(root: Path) -> dict[str, Path]:
    return {"ctx://" + str(p.parent.relative_to(root)): p.parent for p in root.rglob(".meta.json")}


def compare_fs(got: Path, want: Path) -> dict[str, list[str]]:
    a, b = fs_nodes(got), fs_nodes(want)
    differing = [u for u in sorted(a.keys() & b.keys()) if node_digest(a[u]) != node_digest(b[u])]
    return {
        "lost": sorted(b.keys() - a.keys()),
        "extra": sorted(a.keys() - b.keys()),
        "differing": differing,
        "nodes": [str(len(a)), str(len(b))],
    }


def compare_replica(fs_root: Path, url: str, schema: str) -> dict[str, int]:
    fs = {}
    for uri, path in fs_nodes(fs_root).items():
        meta = json.loads((path / ".meta.json").read_text(encoding="utf-8"))
        fs[uri] = (int(meta.get("version", 0)), str(meta.get("content_hash", "")))
    with psycopg.connect(url, connect_timeout=5) as conn:
        rows = conn.execute(f"SELECT uri, version, content_hash FROM {schema}.context_nodes")
        replica = {r[0]: (int(r[1]), str(r[2])) for r in rows}
        dup = conn.execute(
            f"SELECT count(*) FROM (SELECT uri, level, chunk_index FROM {schema}.context_chunks "
            "GROUP BY 1, 2, 3 HAVING count(*) > 1) d"
        ).fetchone()
        dead = conn.execute(
            f"SELECT count(*) FROM {schema}.outbox_events WHERE status = 'dead'"
        ).fetchone()
    return {
        "fs_nodes": len(fs),
        "replica_nodes": len(replica),
        "missing": len(fs.keys() - replica.keys()),
        "orphaned": len(replica.keys() - fs.keys()),
        "stale": sum(1 for u in fs.keys() & replica.keys() if fs[u] != replica[u]),
        "duplicate_chunk_rows": int(dup[0]) if dup else 0,
        "dead_events": int(dead[0]) if dead else 0,
    }
