"""docs/ARCHITECTURE.md stays true: every concept in its table lives where the table says (the
module exists and defines that class or function at its top level)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "ARCHITECTURE.md"
CELL = re.compile(r"^`([^`]+)`$")


def table(heading: str) -> list[list[str]]:
    """The cells of the first markdown table whose header row starts with `heading`."""
    rows: list[list[str]] = []
    inside = False
    for line in DOC.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if "|" in line else []
        if not inside:
            inside = cells[:1] == [heading]
        elif not cells:
            break
        elif not set(line.replace("|", "").strip()) <= set("-: "):
            rows.append(cells)
    return rows


def module_file(module: str) -> Path | None:
    base = ROOT.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def top_level_names(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def concepts() -> list[tuple[str, str]]:
    out = []
    for cells in table("Concept"):
        concept, module = (CELL.match(c) for c in cells[:2])
        assert concept and module, f"a row of the concept table is not `Name` | `module`: {cells}"
        out.append((concept.group(1), module.group(1)))
    return out


def test_the_table_names_the_core_concepts() -> None:
    named = {c for c, _ in concepts()}
    assert len(named) >= 40
    for core_concept in (
        "CommitCoordinator",
        "ArchiveBuilder",
        "CandidatePipeline",
        "CandidateDeduplicator",
        "PolicyRouter",
        "ContextWriter",
        "RelationWriter",
        "OutboxStore",
        "IndexWorker",
        "DocumentChunker",
        "HierarchicalRetriever",
        "IntentAnalyzer",
        "ContextBuilder",
        "BudgetAllocator",
        "ContextEngineService",
    ):
        assert core_concept in named


def test_each_concept_lives_in_the_module_the_table_names() -> None:
    wrong = []
    for concept, module in concepts():
        path = module_file(module)
        if path is None:
            wrong.append(f"{module}: no such module")
        elif concept not in top_level_names(path):
            wrong.append(f"{module}: does not define {concept}")
    assert wrong == []


def test_a_wrong_row_would_be_caught() -> None:
    service = module_file("ctxpipe.service")
    assert service is not None and "ContextEngineService" in top_level_names(service)
    assert "OutboxStore" not in top_level_names(service)
    assert module_file("ctxpipe.index.outbox_store") is None
