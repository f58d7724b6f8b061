"""The chaos benchmark's reduced variant (`bench/chaos.py --quick`): 16 LoCoMo sessions of 4
users through a dev stack of real processes while worker nodes are SIGKILLed every few seconds,
Redis restarts right after the first submits and once more with its data deleted, and
PostgreSQL stops for 5 s. Nothing may be lost, duplicated or different from the same sessions
committed in process; every commit ends registered; the replica equals the FS."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_no_memory_is_lost_under_faults(tmp_path):  # type: ignore[no-untyped-def]
    out = tmp_path / "chaos.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXPIPE_")}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "chaos.py"), "--quick", "--json", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    res = json.loads(out.read_text(encoding="utf-8"))
    faults = res["faults"]
    assert any(k.startswith("kill ") for k in faults), faults
    assert "broker restart, data deleted" in faults and "broker restart (AOF)" in faults
    assert any(k.startswith("PostgreSQL stopped") for k in faults), faults
    assert res["commits"] == {"registered": res["sessions"]}
    fs = res["fs"]
    assert fs["nodes"] == fs["reference_nodes"] > 0
    assert fs["lost"] == fs["duplicate"] == fs["differing"] == []
    rep = res["replica"]
    assert rep["missing"] == rep["stale"] == rep["orphaned"] == rep["duplicate_chunk_rows"] == 0
