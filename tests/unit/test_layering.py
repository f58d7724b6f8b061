"""The layering of the library: it never imports Celery; only the CLI (the composition
root) may reach `tasks`, and only lazily inside a function; dependencies point one way, down
the floors, and no modules import each other in a circle.

Every import counts, wherever it is written: at module level, inside a function, or under
`if TYPE_CHECKING:` (a type-only import is still a dependency someone must understand)."""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "ctxpipe"
DOC = PKG.parent / "docs" / "ARCHITECTURE.md"

# core ← client/fs/providers/storage ← extraction/commit/index/retrieval/maintenance ←
# service/runtime ← the edges. A module may import from its own floor or any floor below.
FLOORS: dict[str, int] = {
    "core": 0,
    "resources": 0,  # finds the shipped sql/ and prompts/ directories
    # tracing set-up, the hand spans (OpenTelemetry API) and the log lines' format
    "observability": 0,
    # the HTTP client and the /v1 request and response bodies: the API and the read path
    # import its models, it imports nothing but `core` (an agent installs httpx + pydantic)
    "client": 1,
    "fs": 1,
    "providers": 1,
    "storage": 1,
    "extraction": 2,
    "commit": 2,
    "index": 2,
    "retrieval": 2,
    "maintenance": 2,
    "portability": 2,  # export / import of nodes (JSONL), the mem0 importer
    "sessions": 2,  # open sessions: appended messages, cut into commits
    "service": 3,
    "runtime": 3,
    "devstack": 3,  # the local dev stack: composes the floors below for `ctxpipe dev`
    # the edges: the command (and `python -m ctxpipe`), the HTTP API, the MCP server
    "cli": 4,
    "__main__": 4,
    "api": 4,
    "mcp_server": 4,
}

# What the client side (the client and the MCP server over it) may import of ctxpipe: itself
# and the shared models of `core`, which import pydantic and nothing else.
CLIENT_SIDE = ("ctxpipe.client", "ctxpipe.mcp_server")
CLIENT_MAY_IMPORT = (
    "ctxpipe.client",
    "ctxpipe.core",
    "ctxpipe.core.enums",
    "ctxpipe.core.errors",
    "ctxpipe.core.models",
    "ctxpipe.core.session",
)


@functools.cache
def parsed(path: Path) -> ast.Module:
    """`path`'s syntax tree, parsed once for all the tests here (read-only)."""
    return ast.parse(path.read_text(encoding="utf-8"))


def imports(path: Path) -> list[tuple[str, bool]]:
    """(module, at module level?) for every absolute import in `path`."""
    tree = parsed(path)
    top = {id(n) for n in tree.body}
    out: list[tuple[str, bool]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, id(node) in top) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.module, id(node) in top))
    return out


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path = PKG) -> dict[str, set[str]]:
    """Module → the modules of the same package it imports (every import, relative ones
    resolved). `from a import b` points at `a.b` when that is a module, else at `a`."""
    files = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}

    def owner(name: str) -> str | None:  # the longest known module that `name` lies in
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for mod, path in files.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        targets: list[str] = []
        for node in ast.walk(parsed(path)):
            if isinstance(node, ast.Import):
                targets += [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*up, base] if base else up)
                targets += [
                    f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names
                ]
        graph[mod] = {t for t in map(owner, targets) if t is not None and t != mod}
    return graph


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components with more than one member (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp: list[str] = []
            while not comp or comp[-1] != v:
                comp.append(stack.pop())
                on_stack.discard(comp[-1])
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


@functools.cache
def ctxpipe_graph() -> dict[str, set[str]]:
    return import_graph(PKG)


def package_of(module: str) -> str:
    """`ctxpipe.index.worker` → `index`; `ctxpipe.runtime` → `runtime`; `ctxpipe` → ``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_ctxpipe_never_imports_celery() -> None:
    files = sorted(PKG.rglob("*.py"))
    assert len(files) > 50
    offenders = [
        f"{p.relative_to(PKG)}: {m}"
        for p in files
        for m, _ in imports(p)
        if m == "celery" or m.startswith(("celery.", "kombu"))
    ]
    assert offenders == []


def test_only_the_cli_reaches_tasks_and_only_lazily() -> None:
    offenders = []
    for p in sorted(PKG.rglob("*.py")):
        for module, top_level in imports(p):
            if module == "tasks" or module.startswith("tasks."):
                if not p.is_relative_to(PKG / "cli") or top_level:
                    offenders.append(f"{p.relative_to(PKG)}: {module}")
    assert offenders == []


def test_the_graph_sees_every_kind_of_import(tmp_path: Path) -> None:
    root = tmp_path / "pkg"
    (root / "sub").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "sub" / "__init__.py").write_text("from pkg.sub.a import A\n")
    (root / "sub" / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.sub.b import B\nA = 1\n"
    )
    (root / "sub" / "b.py").write_text("def f():\n    from . import c\n")
    (root / "sub" / "c.py").write_text("from ..sub import a\nimport json\n")
    (root / "top.py").write_text("from pkg import sub\n")
    graph = import_graph(root)
    assert graph["pkg.sub.a"] == {"pkg.sub.b"}  # under TYPE_CHECKING
    assert graph["pkg.sub.b"] == {"pkg.sub.c"}  # relative, inside a function
    assert graph["pkg.sub.c"] == {"pkg.sub.a"}  # relative, up one level; json is not ours
    assert graph["pkg.top"] == {"pkg.sub"}  # `from pkg import sub`: the package sub
    assert cycles(graph) == [["pkg.sub.a", "pkg.sub.b", "pkg.sub.c"]]
    assert cycles({"x": {"y"}, "y": set()}) == []


def test_every_package_has_a_floor() -> None:
    graph = ctxpipe_graph()
    assert len(graph) > 100 and sum(map(len, graph.values())) > 400
    assert "ctxpipe.storage.outbox_store" in graph["ctxpipe.runtime"]
    packages = {package_of(m) for m in graph} - {""}
    assert sorted(packages - FLOORS.keys()) == []


def test_no_module_imports_from_a_higher_floor() -> None:
    upward = [
        f"{mod} -> {dep}"
        for mod, deps in ctxpipe_graph().items()
        for dep in sorted(deps)
        if package_of(mod) and package_of(dep)
        if FLOORS[package_of(dep)] > FLOORS[package_of(mod)]
    ]
    assert upward == []


def test_the_client_side_imports_only_the_client_and_the_shared_models() -> None:
    graph = ctxpipe_graph()
    client_side = [m for m in graph if m.startswith(CLIENT_SIDE)]
    assert "ctxpipe.client.sync" in client_side and "ctxpipe.mcp_server.server" in client_side
    reached = {dep for mod in client_side for dep in graph[mod]}
    assert "ctxpipe.client.models" in reached and "ctxpipe.core.session" in reached
    outside = sorted(
        dep for dep in reached if dep not in CLIENT_MAY_IMPORT and not dep.startswith(CLIENT_SIDE)
    )
    assert outside == []
    # and the shared models stay shared: no ctxpipe import beyond themselves
    shared = [m for m in CLIENT_MAY_IMPORT if m.startswith("ctxpipe.core.")]
    assert sorted(d for m in shared for d in graph[m] if d not in CLIENT_MAY_IMPORT) == []


def test_no_modules_import_each_other_in_a_circle() -> None:
    assert cycles(ctxpipe_graph()) == []


def test_no_packages_import_each_other_in_a_circle() -> None:
    packages: dict[str, set[str]] = {}
    for mod, deps in ctxpipe_graph().items():
        packages.setdefault(package_of(mod), set()).update(
            package_of(d) for d in deps if package_of(d) != package_of(mod)
        )
    assert cycles(packages) == []


def test_the_architecture_doc_states_these_floors() -> None:
    """docs/ARCHITECTURE.md's table of floors names every package, on its floor here."""
    stated: dict[str, int] = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) > 2 and cells[0].isdigit():
            stated.update(dict.fromkeys(re.findall(r"`([^`]+)`", cells[1]), int(cells[0])))
    present = {package_of(m) for m in ctxpipe_graph()} - {""}
    assert stated == {p: FLOORS[p] for p in present}
