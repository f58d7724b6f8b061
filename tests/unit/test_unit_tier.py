"""The unit tier imports no torch: everything its modules import loads in a fresh interpreter
without torch or sentence-transformers (the model is for tests/integration)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from early_processes import Command, EarlyProcesses

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


MODULES = sorted(imported_modules())
CODE = (
    "import importlib, sys\n"
    "sys.path.insert(0, 'bench')  # as tests/unit/bench put it\n"
    "sys.path.insert(0, 'tests')  # as pytest puts the top conftest's folder (shared twins)\n"
    f"for name in {MODULES!r}:\n"
    "    importlib.import_module(name)\n"
    "heavy = sorted(m for m in ('torch', 'sentence_transformers') if m in sys.modules)\n"
    "assert not heavy, f'importing the unit tier loads {heavy}'\n"
)
# The fresh interpreter starts when collection ends and runs beside the other tests.
PROCESSES = EarlyProcesses(
    __name__, {"tier": Command([sys.executable, "-c", CODE], cwd=UNIT.parents[1])}
)


def test_what_the_unit_tier_imports_does_not_import_torch() -> None:
    assert "ctxpipe.commit.coordinator" in MODULES and len(MODULES) > 40
    done = PROCESSES.outputs()["tier"]
    assert done.returncode == 0, done.stderr
