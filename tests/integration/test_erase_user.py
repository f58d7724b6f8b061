"""Delete a user (right to erasure): after `users delete`, nothing of the user is on disk, in
any table, or returned by any read — checked by scanning the FS and every table for the user's
id and message ids — also when a commit of that user runs concurrently; others keep theirs."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ctxpipe.commit.coordinator import CommitCoordinator
from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.errors import CommitError
from ctxpipe.core.models import ContextNode
from ctxpipe.core.session import RequestContext, SessionInput
from ctxpipe.index.wiring import make_worker
from ctxpipe.maintenance.erasure import _drop_lines
from ctxpipe.maintenance.wiring import make_eraser
from ctxpipe.providers.base import run_sync
from ctxpipe.providers.rules import RulesLLM
from ctxpipe.runtime import Runtime
from ctxpipe.service import ContextEngineService

USER = "wilhelmina"  # an id that appears nowhere else
SESSIONS = ("wil-s1", "wil-s2")


def sess(user: str, sid: str, lines: list[str]) -> SessionInput:
    return SessionInput(
        account_id="acme",
        user_id=user,
        agent_id="helper",
        session_id=sid,
        messages=[
            {"id": f"m{i + 1}", "role": "user" if i % 2 == 0 else "assistant", "content": t}
            for i, t in enumerate(lines)
        ],
    )


WIL = [
    sess(USER, SESSIONS[0], [
        "I'm a glassblower in Murano and I prefer morning studio sessions.",
        "Lovely craft!",
        "Last week my furnace thermocouple failed; I replaced it and recalibrated at 1100C.",
        "Good fix.",
    ]),
    sess(USER, SESSIONS[1], [
        "I now teach glassblowing to apprentices on Fridays.",
        "Teaching sounds rewarding.",
    ]),
]  # fmt: skip
BOB = sess("bob", "bob-s1", [
    "I'm a baker in Lyon and I love sourdough.",
    "Sourdough is great.",
    "My oven thermostat drifted; I recalibrated it with an oven thermometer.",
    "Nice.",
])  # fmt: skip


def fs_text(root: Path) -> list[tuple[str, bytes]]:
    return [(str(p), p.read_bytes()) for p in root.rglob("*") if p.is_file()]


def tables_text(url: str, schema: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    with psycopg.connect(url) as conn:
        names = [
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                (schema,),
            ).fetchall()
        ]
        for t in names:
            rows = conn.execute(f'SELECT t::text FROM "{schema}"."{t}" AS t').fetchall()
            out[t] = [r[0] for r in rows]
    return out


def leaks(rt: Runtime, needles: tuple[str, ...]) -> list[str]:
    found = []
    for path, data in fs_text(rt.settings.fs_root):
        for n in needles:
            if n in path or n.encode() in data:
                found.append(f"FS {path}: {n}")
    for table, rows in tables_text(rt.settings.database_url, rt.settings.db_schema).items():
        for row in rows:
            for n in needles:
                if n in row:
                    found.append(f"table {table}: {n}: {row[:120]}")
    return found


@pytest.fixture
def rt(make_settings: Any, clean_db: str) -> Any:
    runtime = Runtime(make_settings(redis=False))
    yield runtime
    runtime.close()


def commit_all(rt: Runtime, sessions: list[SessionInput]) -> None:
    """Commit in process; each request is also recorded in the ledger, as a Celery submit
    would (so the erasure must clear the ledger too)."""
    from ctxpipe.commit import steps
    from ctxpipe.storage.commit_ledger import CommitLedger

    coord = CommitCoordinator(rt.components())
    ledger = CommitLedger(rt.db, schema=rt.settings.db_schema)
    for s in sessions:
        req = CommitRequest.from_session(s)
        steps.submit(ledger, req)
        coord.commit_sync(req)
    make_worker(rt, "erase-test").drain(max_seconds=120)


def test_erasure_leaves_nothing_of_the_user_and_keeps_the_others(rt: Runtime) -> None:
    commit_all(rt, [*WIL, BOB])
    svc = ContextEngineService(rt)
    wil = RequestContext(account_id="acme", user_id=USER, agent_id="helper", session_id="q")
    assert svc.find("glassblowing furnace", wil).groups  # recalls recorded
    svc.build_context("what does the user do?", wil, budget=300)  # a snapshot stored
    svc.read_path.recall_stats.flush()
    # an agent memory that cites both users' turns: only the user's lines may go
    shared = "ctx://acme/agents/helper/memories/patterns/recalibration"
    rt.fs.write_node(
        ContextNode(
            uri=shared,
            category="patterns",
            abstract="Recalibrate heat sources after replacing sensors",
            content="Thermocouple swap then recalibration [wil-s1:m3]\n"
            "Oven thermostat drift fixed with a thermometer [bob-s1:m3]",
            source_refs=["wil-s1:m3", "bob-s1:m3"],
        )
    )
    needles = (USER, *(f"{s}:" for s in SESSIONS), "Murano", "glassblow")
    assert leaks(rt, needles)  # there is something to erase

    report = make_eraser(rt).erase("acme", USER)
    assert report.user_nodes >= 2 and report.sessions == 2 and not report.warnings
    assert report.agent_nodes_rewritten >= 1
    assert report.rows["commits"] == 2 and report.rows["context_nodes"] >= 2
    assert leaks(rt, needles) == []

    node = rt.fs.read_node(shared)
    assert node.source_refs == ["bob-s1:m3"] and "thermometer" in node.content
    assert [e.action for e in rt.fs.history(shared)] == ["erase"]
    bob = RequestContext(account_id="acme", user_id="bob", agent_id="helper", session_id="q")
    assert rt.fs.exists("ctx://acme/users/bob/memories/profile")
    assert svc.find("sourdough baker", bob).groups
    svc.read_path.user_sessions_cache_clear() if hasattr(
        svc.read_path, "user_sessions_cache_clear"
    ) else None  # noqa: E501
    assert not svc.find("glassblowing furnace Murano", wil).groups

    again = make_eraser(rt).erase("acme", USER)  # idempotent
    assert again.user_nodes == 0 and again.sessions == 0 and sum(again.rows.values()) == 0
    svc.close()


class GatedLLM:
    """The rules LLM, but the extraction (the session's one call, or the profile extractor's
    own) waits until the test opens the gate."""

    name = "gated"

    def __init__(self) -> None:
        self.inner = RulesLLM()
        self.reached = threading.Event()
        self.gate = threading.Event()

    async def complete_json(self, prompt_id, variables, schema, ctx=None, usage=None):  # type: ignore[no-untyped-def]
        if prompt_id in ("extraction.session", "extraction.profile"):
            self.reached.set()
            self.gate.wait(60)
        return await self.inner.complete_json(prompt_id, variables, schema, ctx, usage)

    def complete_json_sync(self, *a, **k):  # type: ignore[no-untyped-def]
        return run_sync(self.complete_json(*a, **k))


def test_a_commit_racing_the_erasure_writes_nothing(make_settings: Any, clean_db: str) -> None:
    settings = make_settings(redis=False)
    first = Runtime(settings)
    commit_all(first, [WIL[0]])
    llm = GatedLLM()
    racing = Runtime(settings, llm=llm)
    req = CommitRequest.from_session(WIL[1])  # accepted before the erasure
    errors: list[BaseException] = []

    def run() -> None:
        try:
            CommitCoordinator(racing.components()).commit_sync(req)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    t = threading.Thread(target=run)
    t.start()
    assert llm.reached.wait(30)
    report = make_eraser(first).erase("acme", USER)
    llm.gate.set()  # the commit goes on, after the erasure
    t.join(60)
    assert report.user_nodes >= 1
    assert errors and isinstance(errors[0], CommitError) and "erased" in str(errors[0])
    assert leaks(first, (USER, *(f"{s}:" for s in SESSIONS))) == []

    again = WIL[0].model_copy(update={"session_id": "wil-s3"})
    later = CommitRequest.from_session(again, commit_id="after-erasure")  # a new start
    result = CommitCoordinator(first.components()).commit_sync(later)
    assert result.stats.nodes_created >= 1
    assert any(w.uri.startswith(f"ctx://acme/users/{USER}/") for w in result.write_results)
    racing.close()
    first.close()


def test_drop_lines_keeps_other_citations() -> None:
    text = "a [wil-s1:m1]\nb [bob-s1:m2]\nc [bob-s1:m1, wil-s2:m4]\nd"
    assert _drop_lines(text, ("wil-s1:", "wil-s2:")) == "b [bob-s1:m2]\nd"


def test_cli_refuses_without_yes_and_validates_ids(make_settings: Any, clean_db: str) -> None:
    from typer.testing import CliRunner

    from ctxpipe.cli import app

    s = make_settings(redis=False)
    env = {"CTXPIPE_FS_ROOT": str(s.fs_root), "CTXPIPE_DATABASE_URL": s.database_url}
    out = CliRunner().invoke(app, ["users", "delete", "acme", USER], env=env)
    assert out.exit_code == 2 and "--yes" in out.output
    out = CliRunner().invoke(app, ["users", "delete", "acme", "../etc", "--yes"], env=env)
    assert out.exit_code == 2
    out = CliRunner().invoke(app, ["users", "delete", "acme", USER, "--yes", "--json"], env=env)
    assert out.exit_code == 0, out.output
