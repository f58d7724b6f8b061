"""Fixtures for the in-process commit pipeline (real ContextFS, real rules LLM, no servers)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from outbox_twin import MemoryOutbox

from ctxpipe.commit.components import CommitComponents
from ctxpipe.commit.coordinator import CommitCoordinator
from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.config import Settings
from ctxpipe.core.errors import LLMError
from ctxpipe.core.models import CommitOptions
from ctxpipe.core.session import RequestContext
from ctxpipe.providers.base import run_sync
from ctxpipe.providers.rules import RulesLLM
from ctxpipe.runtime import Runtime


class FailingLLM:
    """The real rules LLM, except that the listed prompt ids raise LLMError."""

    name = "failing"

    def __init__(self, fail_on: set[str]) -> None:
        self._inner = RulesLLM()
        self.fail_on = fail_on

    async def complete_json(self, prompt_id, variables, schema, ctx=None, usage=None):  # type: ignore[no-untyped-def]
        if prompt_id in self.fail_on:
            raise LLMError(f"simulated failure of {prompt_id}")
        return await self._inner.complete_json(prompt_id, variables, schema, ctx, usage)

    def complete_json_sync(self, *a: Any, **k: Any) -> Any:
        return run_sync(self.complete_json(*a, **k))


@pytest.fixture
def unit_settings(tmp_path: Path) -> Settings:
    return Settings(fs_root=tmp_path / "fs", var_dir=tmp_path / "var")


@pytest.fixture
def make_components(unit_settings: Settings) -> Callable[..., CommitComponents]:
    def make(llm: Any = None, outbox: Any = None, **kw: Any) -> CommitComponents:
        rt = Runtime(unit_settings, llm=llm or RulesLLM(), use_database=False)
        comp = rt.components()
        comp.outbox = outbox if outbox is not None else MemoryOutbox()
        for k, v in kw.items():
            setattr(comp, k, v)
        return comp

    return make


def ctx(user: str = "alice", session: str = "s1", agent: str = "helper") -> RequestContext:
    return RequestContext(account_id="acme", user_id=user, agent_id=agent, session_id=session)


def request(
    messages: list[dict[str, Any]],
    *,
    user: str = "alice",
    session: str = "s1",
    commit_id: str = "c1",
    tools: list[dict[str, Any]] | None = None,
    options: CommitOptions | None = None,
    used_contexts: list[str] | None = None,
) -> CommitRequest:
    return CommitRequest(
        commit_id=commit_id,
        ctx=ctx(user, session),
        messages=messages,  # type: ignore[arg-type]
        used_tools=tools or [],
        options=options or CommitOptions(),  # type: ignore[arg-type]
        used_contexts=used_contexts or [],
    )


def commit(components: CommitComponents, req: CommitRequest):  # type: ignore[no-untyped-def]
    return CommitCoordinator(components).commit_sync(req)


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under the FS root (lock files excluded) with its bytes."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".locks" not in p.parts and p.name != ".lock"
    }


SESSION_1 = [
    {
        "id": "m1",
        "role": "user",
        "created_at": "2026-03-14T10:00:00Z",
        "content": "Hi! I'm a data engineer at Acme Corp and I live in Berlin.",
    },
    {"id": "m2", "role": "assistant", "content": "Nice to meet you. How can I help today?"},
    {
        "id": "m3",
        "role": "user",
        "content": "I prefer Python over Java for data pipelines, and I always use type hints.",
    },
    {"id": "m4", "role": "assistant", "content": "Noted. Python with type hints it is."},
    {
        "id": "m5",
        "role": "user",
        "content": "Last Saturday I presented Project Atlas at the Berlin Data Summit with my "
        "colleague Maria Lopez.",
    },
    {"id": "m6", "role": "assistant", "content": "How did the presentation go?"},
    {
        "id": "m7",
        "role": "user",
        "content": "Well, but my Airflow DAG fails with an ImportError on the scheduler. "
        "How do I fix it?",
    },
    {
        "id": "m8",
        "role": "assistant",
        "content": "Install the provider package on the scheduler image and restart it; the "
        "ImportError comes from the missing apache-airflow-providers-postgres.",
    },
    {"id": "m9", "role": "user", "content": "That worked, thanks! The DAG runs now."},
]

SESSION_2 = [
    {
        "id": "n1",
        "role": "user",
        "created_at": "2026-05-02T09:00:00Z",
        "content": "Quick update: I now work as a machine learning engineer at Globex.",
    },
    {"id": "n2", "role": "assistant", "content": "Congratulations on the new role!"},
    {"id": "n3", "role": "user", "content": "Thanks. I still live in Berlin and I love hiking."},
    {"id": "n4", "role": "assistant", "content": "Hiking around Berlin sounds great."},
]

TOOLS = [
    {
        "name": "sql_runner",
        "kind": "tool",
        "success": True,
        "duration_ms": 120,
        "tokens": 50,
        "input": "SELECT count(*) FROM events",
        "output": "42",
    },
    {
        "name": "sql_runner",
        "kind": "tool",
        "success": False,
        "duration_ms": 80,
        "tokens": 20,
        "input": "SELEC * FROM x",
        "error": "syntax error at or near SELEC",
    },
]
