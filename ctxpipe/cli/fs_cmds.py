"""FS commands: ls, cat, stat, tree, history (read-only views of the ContextFS).

They are admin reads: they open the FS directly, with no request context and no tenancy, so
they take no --account/--user/--agent (the reads through the read path do: `identity`)."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from ctxpipe.cli import services
from ctxpipe.cli.app import app, console, emit_json, handle_errors
from ctxpipe.core.models import NodeSummary
from ctxpipe.fs.listing import first_line

UriArg = Annotated[str, typer.Argument(help="a ctx:// URI, e.g. ctx://acme/users/u1/")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON instead of text")]


def _label(name: str, is_dir: bool, version: int, abstract: str) -> Text:
    text = Text(name + ("/" if is_dir else ""), style="bold blue" if is_dir else "")
    if version:
        text.append(f"  v{version}", style="green")
    if abstract:
        text.append(f"  {abstract}", style="dim")
    return text


@app.command("ls")
@handle_errors
def ls_cmd(uri: UriArg, as_json: JsonOpt = False) -> None:
    """List the children of a directory (hidden node files are not shown).

    Admin read (no tenancy): it sees every account and takes no --account/--user."""
    children = services.open_fs().list_children(uri)
    if as_json:
        emit_json(children)
        return
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("name")
    table.add_column("version", justify="right")
    table.add_column("category")
    table.add_column("abstract (L0)", overflow="fold")
    for c in children:
        table.add_row(
            Text(c.name + ("/" if c.is_dir else ""), style="bold blue" if c.is_dir else ""),
            str(c.version) if c.version else "-",
            Text(c.category),
            Text(c.abstract),
        )
    console.print(table)


@app.command("cat")
@handle_errors
def cat_cmd(
    uri: UriArg,
    level: Annotated[
        int, typer.Option("--level", "-l", min=0, max=2, help="0=L0 abstract, 1=L1, 2=L2")
    ] = 2,
    as_json: JsonOpt = False,
) -> None:
    """Print one level of a node (default L2 content); --json prints the whole node.

    Admin read (no tenancy): it sees every account and takes no --account/--user."""
    fs = services.open_fs()
    if as_json:
        emit_json(fs.read_node(uri))
        return
    text = fs.read_level(uri, level)
    sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")


@app.command("stat")
@handle_errors
def stat_cmd(uri: UriArg, as_json: JsonOpt = False) -> None:
    """Show version, size, content hash and timestamps of a node.

    Admin read (no tenancy): it sees every account and takes no --account/--user."""
    st = services.open_fs().stat_node(uri)
    if as_json:
        emit_json(st)
        return
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    for key, value in st.model_dump(mode="json").items():
        table.add_row(key, Text("" if value is None else str(value)))
    console.print(table)


def _nest(children: list[NodeSummary]) -> list[dict[str, Any]]:
    """Turn a pre-order listing (with depths) into nested dicts."""
    roots: list[dict[str, Any]] = []
    stack: list[tuple[int, list[dict[str, Any]]]] = [(0, roots)]
    for c in children:
        item = c.model_dump(mode="json") | {"children": []}
        while stack[-1][0] >= c.depth:
            stack.pop()
        stack[-1][1].append(item)
        stack.append((c.depth, item["children"]))
    return roots


@app.command("tree")
@handle_errors
def tree_cmd(
    uri: UriArg,
    depth: Annotated[int, typer.Option("--depth", "-d", min=1, help="levels to show")] = 3,
    as_json: JsonOpt = False,
) -> None:
    """Show the tree below a URI: name, version and L0 line of every node.

    Admin read (no tenancy): it sees every account and takes no --account/--user."""
    fs = services.open_fs()
    base = fs.parse(uri)
    children = fs.list_children(base, depth=depth)
    if as_json:
        emit_json({"uri": str(base.as_dir()), "children": _nest(children)})
        return
    stat = fs.stat_node(base)
    root = Tree(_label(str(base.as_dir()), False, stat.version, first_line(fs.abstract(base))))
    branches: list[tuple[int, Tree]] = [(0, root)]
    for c in children:
        while branches[-1][0] >= c.depth:
            branches.pop()
        branch = branches[-1][1].add(_label(c.name, c.is_dir, c.version, c.abstract))
        branches.append((c.depth, branch))
    console.print(root)


@app.command("history")
@handle_errors
def history_cmd(
    uri: UriArg,
    diff: Annotated[bool, typer.Option("--diff", help="print what each change did")] = False,
    version: Annotated[
        int | None, typer.Option("--version", "-v", min=1, help="only this version")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Every change of a node: version, time, action, commit, source messages; --diff shows
    the change itself as a unified diff per level.

    Admin read (no tenancy): it sees every account and takes no --account/--user."""
    entries = services.open_fs().history(uri)
    if version is not None:
        entries = [e for e in entries if e.version == version]
        if not entries:
            raise typer.BadParameter(f"{uri} has no recorded version {version}")
    if as_json:
        emit_json(entries)
        return
    if not entries:
        console.print("[dim]no recorded history (the node was written before history was kept)[/]")
        return
    for e in entries:
        head = Text(f"v{e.version}", style="bold green")
        head.append(f"  {e.at:%Y-%m-%d %H:%M:%S}  {e.action}")
        if e.commit_id:
            head.append(f"  commit {e.commit_id}", style="cyan")
        if e.source_refs:
            head.append(f"  from {', '.join(e.source_refs[:8])}", style="dim")
            if len(e.source_refs) > 8:
                head.append(f" (+{len(e.source_refs) - 8})", style="dim")
        console.print(head)
        if e.reason:
            console.print(Text(f"    {e.reason}", style="dim"))
        if diff:
            for level, text in e.diff.items():
                styled = Text()
                for line in text.splitlines():
                    style = (
                        "green"
                        if line.startswith("+") and not line.startswith("+++")
                        else "red"
                        if line.startswith("-") and not line.startswith("---")
                        else "dim"
                    )
                    styled.append(f"    {line}\n", style=style)
                console.print(Text(f"  {level}:", style="bold"))
                console.print(styled, end="")
