"""`ctxpipe ls | cat | stat | tree` on a ContextFS given by CTXPIPE_FS_ROOT."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from ctxpipe.cli import app
from ctxpipe.core.models import ContextNode
from ctxpipe.fs import ContextFS

NodeFactory = Callable[..., ContextNode]
NODE = "ctx://acme/users/u1/memories/profile/name"
TRAVERSAL = "ctx://acme/users/u1/../../etc/passwd"


@pytest.fixture
def populated(fs: ContextFS, make_node: NodeFactory) -> ContextFS:
    fs.write_node(make_node(NODE, "n", abstract="Name is Bob\nsecond line", content="Bob [b]x[/b]"))
    fs.write_node(make_node(NODE, "n", abstract="Name is Bob\nsecond line", content="Bob v2"))
    fs.write_node(make_node("ctx://acme/users/u1/memories/preferences/tea", "tea"))
    return fs


@pytest.fixture
def run(fs_root: Path) -> Callable[..., Result]:
    runner = CliRunner()

    def invoke(*args: str) -> Result:
        return runner.invoke(
            app, list(args), env={"CTXPIPE_FS_ROOT": str(fs_root), "COLUMNS": "200"}
        )

    return invoke


def test_ls(populated: ContextFS, run: Callable[..., Result]) -> None:
    r = run("ls", "ctx://acme/users/u1/memories/profile")
    assert r.exit_code == 0, r.output
    assert "name/" in r.stdout and "Name is Bob" in r.stdout and "second line" not in r.stdout
    r = run("ls", "ctx://acme/users/u1/memories/", "--json")
    assert r.exit_code == 0
    data = json.loads(r.stdout)
    assert [d["name"] for d in data] == ["preferences", "profile"]
    assert data[1]["uri"] == "ctx://acme/users/u1/memories/profile"


def test_cat_levels(populated: ContextFS, run: Callable[..., Result]) -> None:
    r = run("cat", NODE)
    assert r.exit_code == 0 and r.stdout == "Bob v2\n"
    assert run("cat", NODE, "--level", "0").stdout == "Name is Bob\nsecond line\n"
    assert run("cat", NODE, "-l", "1").stdout == "overview n\n"
    bad = run("cat", NODE, "--level", "3")
    assert bad.exit_code == 2


def test_cat_prints_markup_verbatim(
    fs: ContextFS, make_node: NodeFactory, run: Callable[..., Result]
) -> None:
    fs.write_node(make_node(NODE, content="[bold]not markup[/bold]"))
    assert run("cat", NODE).stdout == "[bold]not markup[/bold]\n"


def test_cat_json(populated: ContextFS, run: Callable[..., Result]) -> None:
    r = run("cat", NODE, "--json")
    assert r.exit_code == 0
    node = ContextNode.model_validate_json(r.stdout)
    assert node == populated.read_node(NODE)
    assert node.version == 2


def test_stat(populated: ContextFS, run: Callable[..., Result]) -> None:
    r = run("stat", NODE, "--json")
    assert r.exit_code == 0
    data = json.loads(r.stdout)
    assert data["exists"] is True and data["version"] == 2
    assert data["size"] == populated.stat_node(NODE).size
    text = run("stat", NODE)
    assert "version" in text.stdout and populated.stat_node(NODE).content_hash in text.stdout
    missing = json.loads(run("stat", "ctx://acme/users/u9", "--json").stdout)
    assert missing["exists"] is False


def test_tree(populated: ContextFS, run: Callable[..., Result]) -> None:
    r = run("tree", "ctx://acme/users/u1/", "--depth", "4")
    assert r.exit_code == 0, r.output
    out = r.stdout
    for piece in ("ctx://acme/users/u1/", "memories/", "profile/", "name/", "v2", "Name is Bob"):
        assert piece in out, piece
    assert "tea/" in out and "v1" in out and "abstract tea" in out
    shallow = run("tree", "ctx://acme/users/u1/", "--depth", "1").stdout
    assert "memories/" in shallow and "profile" not in shallow


def test_tree_json(populated: ContextFS, run: Callable[..., Result]) -> None:
    r = run("tree", "ctx://acme/users/u1/memories", "--json", "--depth", "2")
    data = json.loads(r.stdout)
    assert data["uri"] == "ctx://acme/users/u1/memories/"
    assert [c["name"] for c in data["children"]] == ["preferences", "profile"]
    profile = data["children"][1]
    [name] = profile["children"]
    assert (name["name"], name["version"], name["abstract"]) == ("name", 2, "Name is Bob")
    assert name["children"] == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("cat", TRAVERSAL), "invalid URI"),
        (("ls", TRAVERSAL), "invalid URI"),
        (("stat", "ctx://acme/users/%2e%2e/x"), "invalid URI"),
        (("tree", "/etc"), "invalid URI"),
        (("cat", "ctx://acme/users/u1/none"), "no such node"),
        (("ls", "ctx://acme/users/nobody/"), "no such node"),
    ],
)
def test_errors_are_one_line_exit_2(
    populated: ContextFS, run: Callable[..., Result], args: tuple[str, ...], message: str
) -> None:
    r = run(*args)
    assert r.exit_code == 2
    err = r.stderr.strip()
    assert message in err
    assert len(err.splitlines()) == 1
    assert "Traceback" not in r.output and r.stdout == ""


def test_traversal_through_the_installed_command(fs_root: Path) -> None:
    exe = Path(sys.executable).parent / "ctxpipe"
    assert exe.exists(), "the ctxpipe console script is not installed in this environment"
    env = {**os.environ, "CTXPIPE_FS_ROOT": str(fs_root)}
    proc = subprocess.run(
        [str(exe), "cat", TRAVERSAL], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "invalid URI" in lines[0]
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""
    assert not fs_root.exists()  # nothing was created, let alone outside the root
