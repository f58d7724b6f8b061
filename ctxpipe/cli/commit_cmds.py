"""`ctxpipe commit FILE`: commit a session JSON (inline, or through Celery)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from ctxpipe.cli import services
from ctxpipe.cli.app import app, console, emit_json, err_console, fail, handle_errors, settings
from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.enums import MemoryCategory
from ctxpipe.core.errors import BacklogFullError, CommitError
from ctxpipe.core.models import CommitOptions, CommitResult
from ctxpipe.core.session import SessionInput

if TYPE_CHECKING:
    from ctxpipe.service import ContextEngineService

EXIT_TRY_LATER = 75  # sysexits EX_TEMPFAIL: the commit backlog is full, submit again later


def load_session(path: Path) -> SessionInput:
    try:
        raw = json.loads(path.read_text(encoding="utf-8-sig"))  # a leading BOM is tolerated
    except FileNotFoundError:
        raise ValueError(f"no such file: {path}") from None
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{path} is not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start})"
        ) from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from None
    return SessionInput.model_validate(raw)


def print_result(result: CommitResult) -> None:
    colour = {"success": "green", "partial": "yellow"}.get(result.status.value, "red")
    console.print(f"commit [bold]{result.commit_id}[/]: [{colour}]{result.status.value}[/]")
    s = result.stats
    console.print(
        f"  candidates {s.candidates_extracted}, created {s.nodes_created}, merged "
        f"{s.nodes_merged}, skipped {s.candidates_skipped}, relations {s.relations_written}, "
        f"outbox events {s.outbox_events_queued}, {s.duration_ms} ms"
    )
    table = Table("extractor", "status", "candidates", "reason", box=None)
    for r in result.extractors:
        table.add_row(r.extractor, r.status.value, str(r.candidates), r.reason)
    console.print(table)
    if s.llm_by_phase:
        cost = Table("LLM cost: phase", "calls", "prompt tokens", "completion tokens", box=None)
        for phase, u in s.llm_by_phase.items():
            cost.add_row(phase, str(u.calls), str(u.prompt_tokens), str(u.completion_tokens))
        cost.add_row(
            "total", str(s.llm_calls), str(s.llm_prompt_tokens), str(s.llm_completion_tokens)
        )
        console.print(cost)
    for w in result.write_results:
        mark = (
            "!" if w.error else {"create": "+", "merge": "~", "skip": "="}.get(w.action.value, "*")
        )
        console.print(f"  {mark} {w.uri} v{w.node_version}" + (f"  {w.error}" if w.error else ""))
    for warning in result.warnings:
        console.print(f"  [yellow]warning:[/] {warning}")
    if result.reason:
        console.print(f"  reason: {result.reason}")


def _service(inline: bool) -> ContextEngineService:
    """In process (without PostgreSQL when it cannot be reached), or through Celery."""
    commits: services.Commits = "in-process" if inline else "celery"
    service = services.build_service(commits=commits, optional_database=inline)
    if not service.runtime.use_database:
        err_console.print(
            "[yellow]warning:[/] PostgreSQL is not reachable: committing without dedup "
            "prefilter and outbox (`ctxpipe repair` re-indexes later)"
        )
    return service


@app.command("commit")
@handle_errors
def commit_cmd(
    file: Path = typer.Argument(..., help="session JSON (see examples/)"),
    inline: bool = typer.Option(False, "--inline", help="run the pipeline in this process"),
    wait: bool = typer.Option(False, "--wait", help="wait for the Celery workflow to finish"),
    timeout: float = typer.Option(120.0, "--timeout", help="seconds to wait with --wait"),
    as_json: bool = typer.Option(False, "--json", help="print the CommitResult as JSON"),
    dry_run: bool = typer.Option(False, "--dry-run", help="plan only; write nothing"),
    commit_id: str | None = typer.Option(None, "--commit-id", help="idempotency key"),
    skip_archive: bool = typer.Option(False, "--skip-archive"),
    skip_dedup: bool = typer.Option(False, "--skip-dedup"),
    skip_relations: bool = typer.Option(False, "--skip-relations"),
    category: list[MemoryCategory] | None = typer.Option(
        None, "--category", help="only extract these categories (repeatable)"
    ),
    max_candidates: int | None = typer.Option(None, "--max-candidates", min=0),
) -> None:
    """Commit one session: archive, extract, plan, write to the FS, register outbox events.

    Without --inline the commit is enqueued on Celery and its commit id printed; while the
    commit backlog is full nothing is recorded and the exit status is 75 (try again later)."""
    session = load_session(file)
    options = CommitOptions(
        dry_run=dry_run,
        skip_archive=skip_archive,
        skip_dedup=skip_dedup,
        skip_relations=skip_relations,
        categories_filter=category or None,
        max_candidates=max_candidates,
    )
    req = CommitRequest.from_session(session, options, commit_id=commit_id)
    service = _service(inline)
    try:
        if inline:
            try:
                result = service.coordinator.commit_sync(req)
            except CommitError as exc:
                fail(str(exc))
            show(result, as_json)
            return
        try:
            cid = service.dispatcher.submit(req)
        except BacklogFullError as exc:  # back-pressure: nothing recorded, try again later
            fail(str(exc), EXIT_TRY_LATER)
        if not wait:
            if as_json:
                emit_json({"commit_id": cid, "phase": "enqueued"})
            else:
                console.print(f"enqueued commit [bold]{cid}[/]")
            return
        view = service.wait_commit(cid, timeout)
        if view.result is None:
            fail(f"commit {cid} failed in phase {view.error_phase}: {view.error}")
        show(view.result, as_json)
    finally:
        service.close()


def show(result: CommitResult | None, as_json: bool) -> None:
    assert result is not None
    if as_json:
        emit_json(result)
    else:
        print_result(result)


commits_app = typer.Typer(help="Inspect commits recorded in the ledger.", no_args_is_help=True)
app.add_typer(commits_app, name="commits")


@commits_app.command("show")
@handle_errors
def commits_show(
    commit_id: str = typer.Argument(...),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Phase, per-extractor status, timings and result of one commit.

    Admin read (no tenancy): it sees every account and takes no --account/--user."""
    from ctxpipe.storage.commit_ledger import CommitLedger

    cfg = settings()
    with services.database(cfg) as db:
        row = CommitLedger(db, schema=cfg.db_schema).get(commit_id)
    if row is None:
        fail(f"no such commit: {commit_id}")
    assert row is not None
    if as_json:
        emit_json(row.model_dump(mode="json", exclude={"request"}))
        return
    console.print(
        f"commit [bold]{row.commit_id}[/]  phase [cyan]{row.phase}[/]  status {row.status or '-'}"
    )
    console.print(
        f"  {row.account_id}/{row.user_id} session {row.session_id}, "
        f"created {row.created_at:%Y-%m-%d %H:%M:%S}"
    )
    if row.error:
        console.print(f"  [red]error in {row.error_phase}:[/] {row.error}")
    table = Table("extractor", "status", "candidates", "reason", box=None)
    for name, info in sorted(row.extractors.items()):
        table.add_row(
            name, str(info.get("status")), str(info.get("candidates")), str(info.get("reason", ""))
        )
    console.print(table)
    if row.timings:
        console.print("  timings: " + ", ".join(f"{k}={v}" for k, v in sorted(row.timings.items())))
    if row.result:
        print_result(CommitResult.model_validate(row.result))


@commits_app.command("list")
@handle_errors
def commits_list(
    limit: int = typer.Option(20, "--limit", min=1),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """The most recent commits and their phase.

    Admin read (no tenancy): it sees every account and takes no --account/--user."""
    from ctxpipe.storage.commit_ledger import CommitLedger

    cfg = settings()
    with services.database(cfg) as db:
        rows = CommitLedger(db, schema=cfg.db_schema).recent(limit)
    if as_json:
        emit_json(rows)
        return
    table = Table("commit", "user", "session", "phase", "status", "updated")
    for r in rows:
        table.add_row(
            r["commit_id"],
            r["user_id"],
            r["session_id"],
            r["phase"],
            r["status"] or "",
            f"{r['updated_at']:%H:%M:%S}",
        )
    console.print(table)
