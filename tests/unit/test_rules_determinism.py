"""The rules provider's output is the same in every process: Celery runs each extractor in a
worker of its own (each with its own string-hash seed), and a redelivered or replayed commit
must write the same node names and lines as the in-process run."""

from __future__ import annotations

import json
import os
import subprocess
import sys

SCRIPT = """
import json
from ctxpipe.providers.rules import HANDLERS
msgs = [
    {"id": "m1", "role": "user", "name": "Gina", "created_at": "2023-01-20T10:00:00",
     "content": "Yesterday I won the regional dance competition and bought shoes, then we taught"
                " a class and ran home."},
    {"id": "m2", "role": "assistant", "name": "Jon", "created_at": "2023-01-20T10:00:01",
     "content": "Congrats! What did the judges like?"},
    {"id": "m3", "role": "user", "name": "Gina", "created_at": "2023-01-20T10:00:02",
     "content": "I love contemporary routines, and yesterday I opened an online clothing store."},
]
out = {p: HANDLERS[p]({"messages": msgs, "user_id": "gina", "agent_id": "jon"})
       for p in ("extraction.profile", "extraction.preferences", "extraction.entity_event")}
print(json.dumps(out, sort_keys=True))
"""


def _run(seed: str) -> dict[str, object]:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, check=True
    )
    return dict(json.loads(done.stdout))


def test_extraction_is_the_same_under_any_hash_seed() -> None:
    runs = [_run(seed) for seed in ("1", "2", "3")]
    assert runs[0]["extraction.entity_event"], "the session tells an event"
    assert runs[0] == runs[1] == runs[2]
