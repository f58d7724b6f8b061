"""Fixtures for unit tests that need no servers: a ContextFS on a temporary root."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxpipe.core.models import ContextNode
from ctxpipe.fs import ContextFS

HEAVY = ("torch", "sentence_transformers")


@pytest.fixture
def fs_root(tmp_path: Path) -> Path:
    return tmp_path / "fs"


@pytest.fixture
def fs(fs_root: Path) -> ContextFS:
    return ContextFS(fs_root, lock_timeout_s=10.0)


@pytest.fixture
def make_node() -> Callable[..., ContextNode]:
    """``make_node(uri, tag="a", **fields)``: a node whose levels all carry ``tag``."""

    def factory(uri: str, tag: str = "a", **fields: Any) -> ContextNode:
        data: dict[str, Any] = {
            "uri": uri,
            "category": "profile",
            "abstract": f"abstract {tag}",
            "overview": f"overview {tag}",
            "content": f"content {tag}",
            "metadata": {"tag": tag},
            "source_refs": [f"m-{tag}"],
        }
        data.update(fields)
        return ContextNode(**data)

    return factory


@pytest.fixture(autouse=True)
def _unit_tests_never_import_torch() -> Iterator[None]:
    """The unit tier stays fast by never loading the model: a test that imports torch (or
    sentence-transformers) belongs in tests/integration or should use a small fake embedder."""
    before = {m for m in HEAVY if m in sys.modules}
    yield
    loaded = {m for m in HEAVY if m in sys.modules} - before
    assert not loaded, f"this unit test imported {sorted(loaded)}"
