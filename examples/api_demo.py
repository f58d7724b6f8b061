"""`make demo`, last step: on the HTTP API of the dev stack (`ctxpipe dev up` starts it, `ctxpipe
dev down` stops it), make a key for alice, and commit + find one session through the Python
client.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time

import httpx

from ctxpipe.api.keys import KeySpec, KeyStore
from ctxpipe.client import CtxClient
from ctxpipe.core.config import Settings
from ctxpipe.storage.db import Database


def api_url(cfg: Settings) -> str:
    """The dev stack's API, ready; one line and exit status 1 when it is not running."""
    url = f"http://127.0.0.1:{cfg.api_port}"
    try:
        if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
            return url
    except httpx.HTTPError:
        pass
    sys.exit(f"the API is not ready at {url}: `ctxpipe dev up` starts it (`ctxpipe dev status`)")


def main() -> None:
    cfg = Settings()
    url = api_url(cfg)
    db = Database.from_settings(cfg)
    try:
        key = KeyStore(db, schema=cfg.db_schema).create(
            KeySpec(account_id="acme", user_id="alice", scopes=["read", "commit"], name="demo")  # type: ignore[list-item]
        )
    finally:
        db.close()
    print(f"API at {url} (OpenAPI: {url}/docs); key {key.record.key_id} for acme/alice")
    with CtxClient(url, key.key, agent_id="helper") as client:
        session = [
            {
                "id": "m1",
                "role": "user",
                "content": "I started learning Portuguese, Tuesdays"
                " and Thursdays with a tutor, since we moved to Lisbon.",
            },
            {"id": "m2", "role": "assistant", "content": "Boa sorte! Want a vocabulary drill?"},
            {
                "id": "m3",
                "role": "user",
                "content": "Yes, and I prefer short drills of ten"
                " words, with the English next to each one.",
            },
            {"id": "m4", "role": "assistant", "content": "Ten words with translations, then."},
        ]
        # the commit id is the idempotency key: the same session committed again is one commit
        digest = hashlib.sha256(json.dumps(session).encode()).hexdigest()[:12]
        cid = client.commit(session, session_id="api-demo", commit_id=f"api-demo-{digest}")
        status = client.wait(cid, timeout=120)
        print(f"commit {cid} through the API: {status.status}")
        query = "How does alice like her language drills?"
        deadline = time.monotonic() + 60  # the embed worker indexes the new nodes
        while True:
            hits = client.find(query, 3).hits
            if any(r.startswith("api-demo:") for h in hits for r in h.source_refs):
                break
            if time.monotonic() > deadline:
                sys.exit("the session committed through the API was not findable within 60 s")
            time.sleep(0.5)
        print(f"find {query!r}:")
        for hit in hits:
            print(f"  {hit.score:.3f}  {hit.uri}  {hit.source_refs}\n         {hit.text[:100]}")
    print("stop the stack, the API included, with: ctxpipe dev down")


if __name__ == "__main__":
    main()
