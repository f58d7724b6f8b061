"""Read-path commands: find, search, context, read, relations (Rich tables or --json).

Every command acts for one request context (``--account/--user/--agent/--session``, defaulted
from the URIs it names: `ctxpipe.cli.identity`): only what that user and agent may see is
searched or read.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table
from rich.text import Text

from ctxpipe.cli import services
from ctxpipe.cli.app import app, console, emit_json, handle_errors
from ctxpipe.cli.identity import AccountOpt, AgentOpt, SessionOpt, UserOpt, request_context
from ctxpipe.client.context_request import ContextRequest
from ctxpipe.client.find_request import FindRequest
from ctxpipe.client.search_request import SearchRequest
from ctxpipe.core.session import Message
from ctxpipe.core.validity import parse_as_of

if TYPE_CHECKING:
    from ctxpipe.retrieval.models import FindHit

QueryArg = Annotated[str, typer.Argument(help="what to look for")]
UriArg = Annotated[str, typer.Argument(help="a ctx:// URI")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON instead of tables")]
ScopeOpt = Annotated[
    list[str] | None, typer.Option("--scope", help="limit to URIs under this one (repeatable)")
]
CategoryOpt = Annotated[
    list[str] | None, typer.Option("--category", "-c", help="memory category (repeatable)")
]
AsOfOpt = Annotated[
    str | None,
    typer.Option(
        "--as-of",
        metavar="YYYY-MM-DD",
        help="profile and preference facts valid on this date (default: valid now)",
    ),
]
TypeOpt = Annotated[
    list[str] | None,
    typer.Option("--type", "-t", help="context type: memory, session, resource, skill"),
]


def _refs(refs: list[str], limit: int = 4) -> str:
    ids = [r.split(":", 1)[1] if ":" in r else r for r in refs]
    more = f" +{len(ids) - limit}" if len(ids) > limit else ""
    return ", ".join(ids[:limit]) + more


def _hits_table(title: str, hits: list[FindHit]) -> Table:
    table = Table(title=title, title_justify="left", header_style="bold", pad_edge=False)
    table.add_column("#", justify="right")
    table.add_column("score", justify="right")
    table.add_column("L", justify="right")
    table.add_column("uri", overflow="fold", style="blue")
    table.add_column("who / when", overflow="fold", style="dim")
    table.add_column("text", overflow="fold")
    table.add_column("cites", overflow="fold", style="dim")
    for i, h in enumerate(hits, 1):
        text = Text(h.text)
        if h.abstract and h.abstract != h.text:
            text = Text(h.abstract + "\n", style="dim") + Text(h.text)
        who = " ".join(x for x in (h.speaker or h.role, h.date) if x)
        table.add_row(
            str(i), f"{h.score:.4f}", str(h.level), h.uri, who, text, _refs(h.source_refs)
        )
    return table


@app.command("find")
@handle_errors
def find_cmd(
    query: QueryArg,
    account: AccountOpt = None,
    user: UserOpt = None,
    agent: AgentOpt = None,
    session: SessionOpt = None,
    top_k: Annotated[
        int | None,
        typer.Option("--top-k", "-k", min=1, max=200, help="hits at most (default: find's 10)"),
    ] = None,
    scope: ScopeOpt = None,
    category: CategoryOpt = None,
    ctype: TypeOpt = None,
    min_score: Annotated[float, typer.Option("--min-score", help="minimum cosine")] = 0.0,
    tag: Annotated[
        list[str] | None,
        typer.Option("--tag", help="only nodes carrying this tag (repeatable: all of them)"),
    ] = None,
    budget: Annotated[
        int | None,
        typer.Option("--budget", "-b", min=1, help="at most this many tokens of hits in all"),
    ] = None,
    as_of: AsOfOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Hybrid find (vector + full text, fused), grouped by context type."""
    ctx = request_context(account, user, agent, session, scope or [])
    req = FindRequest(
        query=query,
        top_k=top_k,
        scopes=scope,
        categories=category,
        context_types=ctype,
        min_score=min_score,
        tags=tag,
        budget_tokens=budget,
        as_of=parse_as_of(as_of),
    )
    with services.service() as svc:
        res = svc.find(req, ctx)
    if as_json:
        emit_json(res)
        return
    for ctype_name, hits in res.groups.items():
        console.print(_hits_table(f"{ctype_name} ({len(hits)})", hits))
    if not res.groups:
        console.print("[dim]no results[/]")
    t = res.timings_ms
    console.print(
        f"[dim]plan {res.plan} over {res.owner_rows} rows · {t.get('total', 0):.0f} ms "
        f"(embed {t.get('embed', 0):.0f} ∥ text {t.get('sql_text', 0):.0f}, vector "
        f"{t.get('sql_vector', 0):.0f}, rank {t.get('rank', 0):.0f})"
        f" · {res.total_tokens} tokens[/]"
    )


@app.command("search")
@handle_errors
def search_cmd(
    query: QueryArg,
    account: AccountOpt = None,
    user: UserOpt = None,
    agent: AgentOpt = None,
    session: SessionOpt = None,
    scope: ScopeOpt = None,
    trajectory: Annotated[bool, typer.Option("--trajectory", help="show drill-down")] = False,
    as_of: AsOfOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Intent analysis into typed queries, then hierarchical retrieval for each."""
    ctx = request_context(account, user, agent, session, scope or [])
    req = SearchRequest(query=query, scopes=scope, as_of=parse_as_of(as_of))
    with services.service() as svc:
        res = svc.search(req, ctx)
    if as_json:
        emit_json(res)
        return
    console.print(f"[bold]intent[/] ({res.intent_source}): {res.reasoning}")
    for q in res.queries:
        state = "converged" if q.converged else "stopped"
        console.print(
            f"  · [{q.context_type}] {q.query!r} priority {q.priority}: "
            f"{len(q.hits)} hits, {q.rounds} rounds ({state})"
        )
        if trajectory:
            for step in q.trajectory:
                kids = ", ".join(f"{k.split('/')[-1]}={f:.3f}" for k, _, f in step.children[:5])
                console.print(
                    f"      r{step.round} {step.kind:9} {step.node or '(global)'} "
                    f"parent={step.parent_score:.3f} top={step.top_score:.3f} [{kids}]",
                    highlight=False,
                )
    for ctype_name, hits in res.groups.items():
        console.print(_hits_table(f"{ctype_name} ({len(hits)})", hits))
    if not res.groups:
        console.print("[dim]no results[/]")


def _load_messages(path: Path | None) -> list[Message]:
    if path is None:
        return []
    raw = json.loads(sys.stdin.read() if str(path) == "-" else path.read_text(encoding="utf-8"))
    if isinstance(raw, dict):
        raw = raw.get("messages", [])
    return [Message.model_validate(m) for m in raw]


@app.command("context")
@handle_errors
def context_cmd(
    query: QueryArg,
    account: AccountOpt = None,
    user: UserOpt = None,
    agent: AgentOpt = None,
    session: SessionOpt = None,
    budget: Annotated[int, typer.Option("--budget", "-b", min=1, help="tokens")] = 4096,
    profile: Annotated[str, typer.Option("--profile", "-p", help="budget profile")] = "default",
    system: Annotated[str, typer.Option("--system", help="system prompt")] = "",
    messages: Annotated[
        Path | None,
        typer.Option("--messages", "-m", help="JSON file of the conversation (- = stdin)"),
    ] = None,
    full: Annotated[bool, typer.Option("--full", help="no incremental reuse")] = False,
    show_text: Annotated[bool, typer.Option("--text/--no-text", help="print the context")] = True,
    as_of: AsOfOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Build a token-budgeted context (incremental across calls of the same session)."""
    ctx = request_context(account, user, agent, session)
    req = ContextRequest(
        query=query,
        messages=_load_messages(messages),
        budget=budget,
        profile=profile,
        system_prompt=system,
        incremental=not full,
        as_of=parse_as_of(as_of),
    )
    with services.service() as svc:
        res = svc.build_context(req, ctx)
    if as_json:
        emit_json(res)
        return
    table = Table(header_style="bold", pad_edge=False, title=f"context ({res.budget.profile})")
    table.add_column("section")
    table.add_column("budget", justify="right")
    table.add_column("tokens", justify="right")
    table.add_column("items", justify="right")
    table.add_column("views (L0/L1/L2)", justify="right")
    for s in res.sections:
        views = [sum(1 for i in s.items if i.view == v) for v in (0, 1, 2)]
        table.add_row(
            s.name, str(s.budget), str(s.tokens), str(len(s.items)), "/".join(map(str, views))
        )
    table.add_row("total", str(res.budget.total), str(res.total_tokens), "", "", style="bold")
    console.print(table)
    d = res.delta
    console.print(
        f"strategy [bold]{d.strategy.value}[/] · tokens saved {d.tokens_saved} · new "
        f"{d.delta_tokens} · reused {', '.join(d.reused_sections) or '-'} · "
        f"{len(res.cited_refs)} turns cited",
        highlight=False,
    )
    if show_text:
        console.rule()
        console.print(res.text, highlight=False, markup=False)


@app.command("read")
@handle_errors
def read_cmd(
    uri: UriArg,
    account: AccountOpt = None,
    user: UserOpt = None,
    agent: AgentOpt = None,
    session: SessionOpt = None,
    level: Annotated[int, typer.Option("--level", "-l", min=0, max=2, help="0=L0, 1=L1, 2=L2")] = 2,
    as_json: JsonOpt = False,
) -> None:
    """Read one level of a node the request may see."""
    ctx = request_context(account, user, agent, session, [uri])
    with services.service() as svc:
        text = svc.read(uri, ctx, level)
    if as_json:
        emit_json({"uri": uri, "level": level, "text": text})
        return
    sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")


@app.command("relations")
@handle_errors
def relations_cmd(
    uri: UriArg,
    account: AccountOpt = None,
    user: UserOpt = None,
    agent: AgentOpt = None,
    session: SessionOpt = None,
    depth: Annotated[
        int | None,
        typer.Option(
            "--depth",
            min=1,
            max=5,
            help="walk the relation graph (both directions) this many hops; scores 1/(1+d)",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """The relations of a node (edges to data the request may not see are left out); with
    --depth N, every node within N hops, nearest first."""
    ctx = request_context(account, user, agent, session, [uri])
    with services.service() as svc:
        if depth is not None:
            found = svc.graph(uri, ctx, depth)
        else:
            edges = svc.relations(uri, ctx)
    if depth is not None:
        if as_json:
            emit_json(found)
            return
        graph = Table(header_style="bold", pad_edge=False)
        for col in ("hops", "score", "node", "via", "relation"):
            graph.add_column(col, overflow="fold")
        for n in found:
            arrow = "→" if n.direction == "out" else "←"
            graph.add_row(
                str(n.distance), f"{n.score:.2f}", n.uri, n.via, f"{arrow} {n.relation_type}"
            )
        console.print(graph if found else "[dim]no related nodes[/]")
        return
    if as_json:
        emit_json(edges)
        return
    table = Table(header_style="bold", pad_edge=False)
    table.add_column("type")
    table.add_column("to", style="blue", overflow="fold")
    table.add_column("weight", justify="right")
    table.add_column("reason", overflow="fold")
    for e in edges:
        table.add_row(e.relation_type, e.to_uri, f"{e.weight:.2f}", e.reason)
    console.print(table if edges else "[dim]no relations[/]")


@app.command("tags")
@handle_errors
def tags_cmd(
    prefix: Annotated[str, typer.Argument(help="only tags starting with this")] = "",
    account: AccountOpt = None,
    user: UserOpt = None,
    agent: AgentOpt = None,
    session: SessionOpt = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=1000)] = 50,
    as_json: JsonOpt = False,
) -> None:
    """Tags in use in what the request may see (its user's and agent's memories), most used
    first; `find --tag T` narrows a search to nodes carrying T."""
    ctx = request_context(account, user, agent, session)
    with services.service() as svc:
        tags = svc.find_tags(ctx, prefix, limit)
    if as_json:
        emit_json(tags)
        return
    table = Table(header_style="bold", pad_edge=False)
    table.add_column("tag")
    table.add_column("nodes", justify="right")
    for t in tags:
        table.add_row(t.tag, str(t.nodes))
    console.print(table if tags else "[dim]no tags[/]")
