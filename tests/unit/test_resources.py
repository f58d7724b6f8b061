"""sql/ and prompts/ are found through importlib.resources: inside the installed package (the
wheel ships them as ctxpipe/_resources/), else beside the package in a source checkout; never
through the working directory."""

from __future__ import annotations

from pathlib import Path

import pytest

import ctxpipe
from ctxpipe.resources import ResourceNotFoundError, locate, resource_dir
from ctxpipe.storage.migrations import default_sql_dir, load_migrations

CHECKOUT = Path(ctxpipe.__file__).resolve().parents[1]


def test_a_checkout_uses_the_top_level_directories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the working directory plays no part
    assert resource_dir("sql") == CHECKOUT / "sql"
    assert resource_dir("prompts") == CHECKOUT / "prompts"
    assert default_sql_dir() == CHECKOUT / "sql"
    assert load_migrations()[0].name == "001_init.sql"


def test_an_installed_package_uses_what_it_ships(tmp_path: Path) -> None:
    package = tmp_path / "site-packages" / "ctxpipe"
    (package / "_resources" / "sql").mkdir(parents=True)
    (tmp_path / "site-packages" / "sql").mkdir()  # a stray sql/ beside it is not used
    assert locate(package, "sql") == package / "_resources" / "sql"


def test_neither_is_one_clear_error(tmp_path: Path) -> None:
    package = tmp_path / "ctxpipe"
    package.mkdir()
    with pytest.raises(ResourceNotFoundError, match="cannot find the prompts/ directory"):
        locate(package, "prompts")
