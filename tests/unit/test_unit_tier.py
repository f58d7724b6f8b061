"""The unit tier imports no torch: everything its modules import loads in a fresh interpreter
without torch or sentence-transformers (the model is for tests/integration)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

UNIT = Path(__file__).resolve().parent


def imported_modules() -> set[str]:
    """Every absolute module the unit test files and their conftest import at the top."""
    out: set[str] = set()
    for path in sorted(UNIT.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Import):
                out.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                out.add(node.module)
    local = {p.stem for p in UNIT.rglob("*.py")}  # test modules and conftest: scanned above
    return {m for m in out if m not in local}


def test_what_the_unit_tier_imports_does_not_import_torch() -> None:
    modules = sorted(imported_modules())
    assert "ctxpipe.commit.coordinator" in modules and len(modules) > 40
    code = (
        "import importlib, sys\n"
        "sys.path.insert(0, 'bench')  # as tests/unit/bench put it\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "heavy = sorted(m for m in ('torch', 'sentence_transformers') if m in sys.modules)\n"
        "assert not heavy, f'importing the unit tier loads {heavy}'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120, cwd=UNIT.parents[1])
