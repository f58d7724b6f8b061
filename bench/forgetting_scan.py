"""How long the forgetting scan takes over many memory nodes (TTL, capacity and value policies).

    .venv/bin/python bench/forgetting_scan.py [--nodes 100000] [--owners 100]

Writes `--nodes` memory nodes (events and entities) across `--owners` users of one account on
a fresh FS (through ContextFS, atomic writes; written in parallel threads), then times
`Forgetter.plan()` with TTL, capacity and value policies all on — the walk of every node's
`.meta.json`, the value of each, the choice — and, as a baseline in the same run, a bare walk
that only lists the same node directories (`os.scandir`), so the ratio says what the policy
work adds to reading the tree. Nothing is removed (a plan is a dry run).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ctxpipe.core.config import ForgettingConfig  # noqa: E402
from ctxpipe.core.models import ContextNode  # noqa: E402
from ctxpipe.fs import ContextFS, LocalOwnerLock  # noqa: E402
from ctxpipe.maintenance.forgetting import Forgetter  # noqa: E402


def bare_walk(root: Path) -> int:
    n = 0
    stack = [root]
    while stack:
        d = stack.pop()
        with os.scandir(d) as it:
            for e in it:
                if e.is_dir(follow_symlinks=False) and not e.name.startswith("."):
                    stack.append(Path(e.path))
                elif e.name == ".meta.json":
                    n += 1
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--owners", type=int, default=100)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ctxpipe-forget-"))
    try:
        fs = ContextFS(tmp / "fs")

        def write(i: int) -> None:
            owner, cat = i % args.owners, ("events", "entities")[i % 2]
            uri = f"ctx://bench/users/u{owner}/memories/{cat}/n{i}"
            fs.write_node(ContextNode(uri=uri, category=cat, abstract=f"memory {i}", content="x"))

        t0 = time.perf_counter()
        with ThreadPoolExecutor(16) as pool:
            for done, _ in enumerate(pool.map(write, range(args.nodes)), 1):
                if done % 5000 == 0:
                    print(f"\r  writing nodes: {done}/{args.nodes}", end="", flush=True)
        print(f"\r  wrote {args.nodes} nodes in {time.perf_counter() - t0:.0f} s" + " " * 20)

        cfg = ForgettingConfig(
            ttl_days={"events": 365}, capacity={"entities": 10_000}, min_value=0.0
        )
        forgetter = Forgetter(fs, LocalOwnerLock(tmp / "fs"), cfg)
        t1 = time.perf_counter()
        walked = bare_walk(tmp / "fs")
        bare_s = time.perf_counter() - t1
        t2 = time.perf_counter()
        doomed = forgetter.plan()
        scan_s = time.perf_counter() - t2
        print(f"bare walk of {walked} nodes: {bare_s:.2f} s")
        print(
            f"forgetting scan (TTL + capacity + value) of {args.nodes} nodes: {scan_s:.2f} s "
            f"({args.nodes / scan_s:,.0f} nodes/s; {scan_s / bare_s:.1f} × the bare walk); "
            f"{len(doomed)} chosen"
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
