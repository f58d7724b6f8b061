"""`ctxpipe export` / `ctxpipe import` on a ContextFS given by CTXPIPE_FS_ROOT (no database:
the import warns that the replica catches up by repair)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import Result
from portability_world import populate, tree_bytes
from typer.testing import CliRunner

from ctxpipe.cli import app
from ctxpipe.fs import ContextFS

DEAD_PG = "postgresql://ctxpipe:pw@127.0.0.1:1/ctxpipe"


def invoke(root: Path, *args: str) -> Result:
    env = {"CTXPIPE_FS_ROOT": str(root), "CTXPIPE_DATABASE_URL": DEAD_PG, "COLUMNS": "200"}
    return CliRunner().invoke(app, list(args), env=env)


def test_export_then_import_into_another_root(tmp_path: Path) -> None:
    populate(ContextFS(tmp_path / "src"))
    out = tmp_path / "acme.jsonl"
    done = invoke(tmp_path / "src", "export", "--account", "acme", "-o", str(out), "-q")
    assert done.exit_code == 0, done.output
    assert "exported 7 node(s) and 2 session owner(s) of account acme" in done.output
    stdout = invoke(tmp_path / "src", "export", "--account", "acme", "--user", "ann", "-q")
    assert stdout.exit_code == 0 and all(
        "/ann/" in json.loads(ln)["uri"] or "/s1/" in json.loads(ln)["uri"]
        for ln in stdout.stdout.splitlines()
    )
    imported = invoke(tmp_path / "dst", "import", str(out), "--json")
    assert imported.exit_code == 0, imported.output
    report = json.loads(imported.stdout)
    assert (report["written"], report["sessions"], report["conflicts"]) == (7, 2, 0)
    assert "repair" in report["warnings"][0]
    acme = {k: v for k, v in tree_bytes(tmp_path / "src").items() if k.startswith("acme/")}
    assert tree_bytes(tmp_path / "dst") == acme
    again = invoke(tmp_path / "dst", "import", str(out), "-q")
    assert again.exit_code == 0 and "0 node(s) written" in again.output
    assert "9 unchanged" in again.output


def test_resume_appends_the_rest(tmp_path: Path) -> None:
    populate(ContextFS(tmp_path / "src"))
    full, part = tmp_path / "full.jsonl", tmp_path / "part.jsonl"
    assert invoke(tmp_path / "src", "export", "--all", "-o", str(full), "-q").exit_code == 0
    lines = full.read_text().splitlines(keepends=True)
    part.write_text("".join(lines[:3]) + lines[3][:10])
    res = invoke(tmp_path / "src", "export", "--all", "-o", str(part), "--resume", "-q")
    assert res.exit_code == 0, res.output
    assert part.read_text() == full.read_text()


def test_what_is_refused(tmp_path: Path) -> None:
    populate(ContextFS(tmp_path / "src"))
    nothing = invoke(tmp_path / "src", "export")
    assert nothing.exit_code == 2 and "--all, or --account" in nothing.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"format": 1, "kind": "node"}\n{"id": "m", "memory": "x"}\n')
    res = invoke(tmp_path / "dst", "import", str(bad))
    assert res.exit_code == 2
    assert f"{bad}:1:" in res.output and "2 bad record(s)" in res.output
    assert "nothing imported" in res.output and tree_bytes(tmp_path / "dst") == {}
    mem0 = invoke(tmp_path / "dst", "import", str(bad), "--format", "mem0")
    assert mem0.exit_code == 2 and "--account" in mem0.output


def test_a_conflict_exits_1(tmp_path: Path) -> None:
    populate(ContextFS(tmp_path / "src"))
    out = tmp_path / "all.jsonl"
    assert invoke(tmp_path / "src", "export", "--all", "-o", str(out), "-q").exit_code == 0
    populate(ContextFS(tmp_path / "dst"))  # the same URIs, other dates
    res = invoke(tmp_path / "dst", "import", str(out), "-q")
    assert res.exit_code == 1 and "conflict" in res.output


def test_mem0_through_the_command(tmp_path: Path) -> None:
    src = tmp_path / "m.jsonl"
    src.write_text(
        json.dumps(
            {
                "id": "a1",
                "memory": "Likes tea",
                "user_id": "alex",
                "created_at": "2024-07-20T01:23:45Z",
            }
        )
        + "\n"  # fmt: skip
    )
    res = invoke(tmp_path / "fs", "import", str(src), "--format", "mem0", "-a", "acme", "-q")
    assert res.exit_code == 0, res.output
    node = ContextFS(tmp_path / "fs").read_node("ctx://acme/users/alex/memories/entities/mem0-a1")
    assert node.content == "Likes tea"
