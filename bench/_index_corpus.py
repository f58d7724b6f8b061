"""The nodes the index benches write to a throwaway FS.

- `synthetic`: session archives of 20-40 messages and memories with cited refs, from a word list;
- `locomo`: every LoCoMo session as the session archive a commit writes (`[id] role (name) on
  date: text` lines, one message each), its first turn as the abstract (the benchmark's data is
  read in place; nothing is copied).
"""

from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path

from _locomo import load, session_inputs

from ctxpipe.commit.archive_builder import spoken_on
from ctxpipe.core.enums import ContextType
from ctxpipe.core.models import ContextNode
from ctxpipe.fs import ContextFS

WORDS = (
    "deploy pipeline airflow scheduler worker database index vector query latency budget "
    "lisbon berlin project falcon nimbus release review tests coverage python golang rust "
    "kubernetes cluster memory cache redis postgres migration schema rollback incident "
    "customer invoice quarterly revenue roadmap design meeting weekly planning sprint "
    "bug regression profiler flamegraph allocation timeout retry backoff queue consumer"
).split()


def sentence(rng: random.Random, n: int) -> str:
    words = [rng.choice(WORDS) for _ in range(n)]
    return " ".join(words).capitalize() + "."


def synthetic(fs: ContextFS, archives: int, memories: int, seed: int = 7) -> list[ContextNode]:
    rng = random.Random(seed)
    nodes: list[ContextNode] = []
    for a in range(archives):
        ids = [f"m{i}" for i in range(1, rng.randint(20, 40) + 1)]
        lines = [
            f"[{mid}] {rng.choice(['user', 'assistant'])}: "
            + " ".join(sentence(rng, rng.randint(6, 18)) for _ in range(rng.randint(1, 3)))
            for mid in ids
        ]
        nodes.append(
            fs.write_node(
                ContextNode(
                    uri=f"ctx://bench/sessions/s{a}/archives/1",
                    abstract=sentence(rng, 24),
                    overview="\n".join(f"- {sentence(rng, 8)}" for _ in range(5)),
                    content="\n".join(lines),
                    context_type=ContextType.SESSION,
                    category="archive",
                    source_refs=[f"s{a}:{m}" for m in ids],
                    metadata={"message_ids": ids},
                )
            )
        )
    for m in range(memories):
        refs = [f"s{m % max(archives, 1)}:m{rng.randint(1, 20)}" for _ in range(3)]
        nodes.append(
            fs.write_node(
                ContextNode(
                    uri=f"ctx://bench/users/u{m % 30}/memories/entities/e{m}",
                    abstract=sentence(rng, 12),
                    overview="\n".join(f"- {sentence(rng, 10)} [{r.split(':')[1]}]" for r in refs),
                    content="\n".join(
                        f"- {sentence(rng, rng.randint(10, 30))} [{rng.choice(refs).split(':')[1]}]"
                        for _ in range(rng.randint(3, 10))
                    ),
                    category="entities",
                    source_refs=refs,
                )
            )
        )
    return nodes


def locomo(fs: ContextFS, data: Path | None = None) -> list[ContextNode]:
    """One archive node per LoCoMo session (128 in the dev set)."""
    from datetime import datetime

    nodes = []
    for sample in load(data):
        for session in session_inputs(sample):
            msgs = session["messages"]
            sid = session["session_id"]
            lines = [
                f"[{m['id']}] {m['role']} ({m['name']})"
                f"{spoken_on(datetime.fromisoformat(m['created_at']) + timedelta(0))}: "
                f"{m['content']}"
                for m in msgs
            ]
            nodes.append(
                fs.write_node(
                    ContextNode(
                        uri=f"ctx://{session['account_id']}/sessions/{sid}/archives/1",
                        abstract=msgs[0]["content"][:300],
                        overview=f"Session {sid} archive",
                        content="\n".join(lines),
                        context_type=ContextType.SESSION,
                        category="archive",
                        owner_space=f"sessions/{sid}",
                        source_refs=[f"{sid}:{m['id']}" for m in msgs],
                        metadata={"message_ids": [m["id"] for m in msgs]},
                    )
                )
            )
    return nodes


__all__ = ["WORDS", "locomo", "sentence", "synthetic"]
