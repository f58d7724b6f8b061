"""The fast failure on an unreachable database never misfires on a busy pool: a caller that
finds every connection in use waits for one (up to the pool timeout) instead of failing."""

from __future__ import annotations

import threading
import time

from ctxpipe.storage.db import Database


def test_a_busy_pool_waits_past_the_connect_timeout(pg_url: str) -> None:
    db = Database(pg_url, min_size=1, max_size=1, timeout=10.0, connect_timeout=0.5)
    try:
        with db.connection() as conn:  # connected once: the server is reachable
            conn.execute("SELECT 1")
        held = threading.Event()

        def hold() -> None:
            with db.connection() as conn:
                conn.execute("SELECT 1")
                held.set()
                time.sleep(1.5)

        t = threading.Thread(target=hold)
        t.start()
        held.wait(5)
        started = time.monotonic()
        with db.connection() as conn:
            assert conn.execute("SELECT 2").fetchone() == (2,)
        waited = time.monotonic() - started
        t.join()
        assert 0.5 < waited < 5.0, waited
    finally:
        db.close()
