"""Fixtures for unit tests that need no servers: a ContextFS on a temporary root."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctxpipe.core.models import ContextNode
from ctxpipe.fs import ContextFS


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
