"""The layering of DESIGN §2: the library never imports Celery; only the CLI (the composition
root) may reach `tasks`, and only lazily inside a function."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "ctxpipe"


def imports(path: Path) -> list[tuple[str, bool]]:
    """(module, at module level?) for every import in `path`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = {id(n) for n in tree.body}
    out: list[tuple[str, bool]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, id(node) in top) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.module, id(node) in top))
    return out


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
