"""What the ledger suite's modules share: the commit they submit, the LLM that fails on cue, and
reads of a ledger row and of a commit's files. The fixtures (`ledger`, `make_components`) are
in conftest.py beside it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
from pydantic import BaseModel

from ctxpipe.commit import steps
from ctxpipe.commit.components import CommitComponents
from ctxpipe.commit.memory_ledger import InMemoryLedger
from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.session import RequestContext
from ctxpipe.extraction.extractors import EXTRACTOR_NAMES
from ctxpipe.providers.base import run_sync
from ctxpipe.providers.rules import RulesLLM
from ctxpipe.storage.commit_ledger import CommitLedger

Ledger = InMemoryLedger | CommitLedger
MakeComponents = Callable[..., CommitComponents]

# what each refuses an output of a commit it does not know with (no row: the foreign key)
UNKNOWN_COMMIT = (KeyError, psycopg.errors.ForeignKeyViolation)
CTX = {"account_id": "acme", "user_id": "rita", "agent_id": "a", "session_id": "s9"}
MESSAGES = [
    {"id": "m1", "role": "user", "content": "I'm a nurse in Porto and I love surfing."},
    {"id": "m2", "role": "assistant", "content": "Surfing in Porto sounds wonderful."},
    {"id": "m3", "role": "user", "content": "I always surf before my night shifts."},
]


class ScriptedLLM:
    """The rules LLM, except that the prompts `fail_on` raise `error` (by default the archive
    step's: the session's one extraction call and the summary alone)."""

    name = "scripted"

    def __init__(
        self,
        error: Exception,
        fail_on: frozenset[str] = frozenset({"extraction.session", "compression.archive_summary"}),
    ) -> None:
        self.error = error
        self.fail_on = fail_on
        self.inner = RulesLLM()

    async def complete_json(self, prompt_id, variables, schema, ctx=None, usage=None):  # type: ignore[no-untyped-def]
        if prompt_id in self.fail_on:
            raise self.error
        return await self.inner.complete_json(prompt_id, variables, schema, ctx, usage)

    def complete_json_sync(self, *a: Any, **k: Any) -> Any:
        return run_sync(self.complete_json(*a, **k))


def make_req(commit_id: str, session: str = "s9", **ctx: str) -> CommitRequest:
    rc = RequestContext(**{**CTX, "session_id": session, **ctx})
    return CommitRequest(commit_id=commit_id, ctx=rc, messages=MESSAGES)  # type: ignore[arg-type]


def row_of(ledger: Ledger, commit_id: str) -> Any:
    row = ledger.get(commit_id)
    assert row is not None, commit_id
    return row


def run_all(c: CommitComponents, ledger: Ledger, commit_id: str) -> list[BaseModel]:
    out = [steps.archive_step(c, ledger, commit_id)]
    out += [steps.extract_step(c, ledger, commit_id, n) for n in EXTRACTOR_NAMES]
    out += [
        steps.plan_step(c, ledger, commit_id),
        steps.write_step(c, ledger, commit_id),
        steps.register_step(c, ledger, commit_id),
    ]
    return out


def files_of(c: CommitComponents) -> dict[str, bytes]:
    root = c.settings.fs_root
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".locks" not in p.parts and p.name != ".lock"
    }
