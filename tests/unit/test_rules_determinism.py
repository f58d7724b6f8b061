"""The rules provider's output is the same in every process: Celery runs each extractor in a
worker of its own (each with its own string-hash seed), and a redelivered or replayed commit
must write the same node names and lines, and summarise the same way, as the in-process run.

One fresh interpreter per hash seed runs every probe below; the interpreters start when
collection ends and run beside the other tests (two of them in `make unit`'s edit loop:
property_examples.few)."""

from __future__ import annotations

import json
import os
import sys

import pytest
from early_processes import Command, EarlyProcesses
from property_examples import few

SEEDS = few(("1", "2", "3", "4", "5"))
SCRIPT = """
import json
from ctxpipe.core.text import content_tokens
from ctxpipe.providers.rules import HANDLERS
from ctxpipe.providers.rules.inputs import load_messages
from ctxpipe.providers.rules.summarize import _score
msgs = [
    {"id": "m1", "role": "user", "name": "Gina", "created_at": "2023-01-20T10:00:00",
     "content": "Yesterday I won the regional dance competition and bought shoes, then we taught"
                " a class and ran home."},
    {"id": "m2", "role": "assistant", "name": "Jon", "created_at": "2023-01-20T10:00:01",
     "content": "Congrats! What did the judges like?"},
    {"id": "m3", "role": "user", "name": "Gina", "created_at": "2023-01-20T10:00:02",
     "content": "I love contemporary routines, and yesterday I opened an online clothing store."},
]
extraction = {p: HANDLERS[p]({"messages": msgs, "user_id": "gina", "agent_id": "jon"})
              for p in ("extraction.profile", "extraction.preferences", "extraction.entity_event")}
s = "Marathon training includes interval sprints, hill repeats, tempo runs and recovery."
msg = load_messages([{"id": "m1", "role": "user", "content": s}])[0]
words = sorted(set(content_tokens(s)))
weights = {t: 0.1 * (i + 1) + 1 / (i + 3) for i, t in enumerate(words)}
score = repr(_score(msg, s, weights, set()))
print(json.dumps({"extraction": extraction, "score": score}, sort_keys=True))
"""


PROCESSES = EarlyProcesses(
    __name__,
    {
        seed: Command([sys.executable, "-c", SCRIPT], {**os.environ, "PYTHONHASHSEED": seed})
        for seed in SEEDS
    },
)


@pytest.fixture(scope="module")
def runs() -> list[dict[str, object]]:
    """What the script printed under each seed."""
    out = []
    for done in PROCESSES.outputs().values():
        assert done.returncode == 0, done.stderr
        out.append(dict(json.loads(done.stdout)))
    return out


def test_extraction_is_the_same_under_any_hash_seed(runs: list[dict[str, object]]) -> None:
    extractions = [r["extraction"] for r in runs]
    first = extractions[0]
    assert isinstance(first, dict)
    assert first["extraction.entity_event"], "the session tells an event"
    assert all(e == first for e in extractions)


def test_sentence_score_is_the_same_in_every_process(runs: list[dict[str, object]]) -> None:
    """A sentence's score does not depend on the order a set of its words is summed in (which
    changes with each process's string hashing): a retried commit summarises the same way."""
    scores = {r["score"] for r in runs}
    assert len(scores) == 1, scores
