"""`ctxpipe status`: one snapshot of the pipeline's health (queue depths, outbox backlog, FS
vs replica, last repair, commit backlog, LLM cost, LLM throttling, commits by phase), as a table
or JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from ctxpipe.cli import services
from ctxpipe.cli.app import app, console, emit_json, handle_errors

if TYPE_CHECKING:
    from ctxpipe.index.status import IndexStatus
    from ctxpipe.providers.llm_limits import LimiterSnapshot

JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON instead of text")]


def _backlog_row(st: IndexStatus) -> str:
    b = st.commit_backlog
    age = "-" if b.oldest_age_s is None else f"{b.oldest_age_s:.1f}s"
    cap = f"cap {b.max_pending}" if b.max_pending else "no cap"
    return (
        f"{b.in_flight} in flight ({cap}), oldest {age}, "
        f"{b.finished_recently} finished in the last {b.window_s:.0f}s"
    )


def _cost_row(st: IndexStatus) -> str:
    c = st.llm_cost
    if not c.commits:
        return "-"
    return (
        f"{c.llm_calls} calls, {c.prompt_tokens} prompt + {c.completion_tokens} completion "
        f"tokens over {c.commits} commits / {c.messages} messages "
        f"({c.calls_per_100_messages:.1f} calls and {c.prompt_tokens_per_100_messages:.0f} "
        "prompt tokens per 100 messages)"
    )


def _cost_by_phase_row(st: IndexStatus) -> str:
    c = st.llm_cost
    if not c.by_phase:
        return "-"
    return ", ".join(
        f"{phase} {u.calls} calls / {u.prompt_tokens}+{u.completion_tokens} tokens"
        for phase, u in sorted(c.by_phase.items())
    )


def _rate_limits(t: LimiterSnapshot) -> list[str]:
    """The request and token limits: per minute over the default 60 s window, else per window
    with the rate per minute they enforce (`llm_rate_window_s` scales the settings to it)."""
    if t.window_s == 60:
        pairs = (("rpm", t.requests_per_window), ("tpm", t.tokens_per_window))
        return [f"{name} {value}" for name, value in pairs if value is not None]
    window = f"{t.window_s:g} s"
    return [
        f"{what} {value} per {window} ({per_minute:.6g}/min)"
        for what, value, per_minute in (
            ("requests", t.requests_per_window, t.requests_per_minute),
            ("tokens", t.tokens_per_window, t.tokens_per_minute),
        )
        if value is not None and per_minute is not None
    ]


def throttling_line(t: LimiterSnapshot | None) -> str:
    """The `LLM throttling` row: the limits, what the current window holds, the counters."""
    if t is None:
        return "- (rules provider)"
    limits = _rate_limits(t)
    if t.max_concurrency is not None:
        limits.append(f"concurrency {t.max_concurrency}")
    window = "last minute" if t.window_s == 60 else f"last {t.window_s:g} s"
    cool = f", Retry-After {t.cooldown_s:.1f}s left" if t.cooldown_s > 0 else ""
    return (
        f"{', '.join(limits) or 'no limits'}; {window} {t.requests_in_window} requests / "
        f"{t.tokens_in_window} tokens, {t.in_flight} in flight{cool}; {t.throttled} waits "
        f"({t.wait_seconds:.1f}s), {t.http_429} × 429, {t.retry_after_honoured} Retry-After "
        f"honoured, {t.deferred} handed back"
    )


def _status_rows(st: IndexStatus) -> list[tuple[str, str]]:
    rows = [
        ("queues", ", ".join(f"{q} {n}" for q, n in st.queues.items()) or "-"),
        (
            "outbox",
            ", ".join(
                f"{k} {st.outbox.get(k, 0)}" for k in ("pending", "claimed", "failed", "dead")
            )
            + f" (done {st.outbox.get('done', 0)})",
        ),
        (
            "oldest pending",
            "-" if st.oldest_pending_age_s is None else f"{st.oldest_pending_age_s:.1f}s",
        ),
        (
            "nodes",
            f"{st.fs_nodes} on FS, {st.replica_nodes} in the replica "
            f"({st.replica_chunks} chunks, {st.replica_edges} edges)",
        ),
        ("commit backlog", _backlog_row(st)),
        ("LLM cost", _cost_row(st)),
        ("  by phase", _cost_by_phase_row(st)),
        ("LLM throttling", throttling_line(st.llm_throttling)),
    ]
    last = st.last_repair
    if last:
        rows.append(
            (
                "last repair",
                f"{last['finished_at']:%Y-%m-%d %H:%M:%S} {last['mode']}: missing "
                f"{last['missing']}, stale {last['stale']}, orphaned {last['orphaned']}, "
                f"relations {last['relations']} ({last['events_queued']} events queued)",
            )
        )
    else:
        rows.append(("last repair", "never"))
    phases = ", ".join(f"{p} {n}" for p, n in sorted(st.commits_by_phase.items()))
    rows.append(("commits", phases or "none"))
    return rows


@app.command("status")
@handle_errors
def status_cmd(as_json: JsonOpt = False) -> None:
    """Queue depths, outbox backlog, FS vs replica, last repair, commits by phase.

    Exit status 1 when a server (Redis, PostgreSQL) could not be read."""
    from ctxpipe.index.status import collect_status

    with services.runtime() as rt:
        st = collect_status(rt.settings, db=rt.db, fs=rt.fs)  # every queue of `core.queues`
    if as_json:
        data = st.model_dump(mode="json")
        data["in_sync"] = st.in_sync
        emit_json(data)
        if st.errors:
            raise typer.Exit(1)
        return
    table = Table(show_header=False, box=None)
    for key, value in _status_rows(st):
        table.add_row(f"[bold]{key}[/]", value)
    console.print(table)
    for part, err in st.errors.items():
        console.print(f"[red]{part} unavailable:[/] {err}", highlight=False)
    verdict = "[green]in sync[/]" if st.in_sync else "[yellow]catching up[/]"
    console.print(f"replica: {verdict}")
    if st.errors:
        raise typer.Exit(1)
