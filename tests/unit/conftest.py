"""Fixtures for unit tests that need no servers: a ContextFS on a temporary root, a fake
embedding model; fsync that checks its descriptor but does not wait for the disk."""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import typer.main
import typer.testing
from early_processes import EarlyProcesses
from hypothesis import settings

from ctxpipe.core.models import ContextNode
from ctxpipe.fs import ContextFS
from ctxpipe.providers.base import EmbeddingVector

HEAVY = ("torch", "sentence_transformers")

# `make unit` (the edit-test loop) loads this profile: each property test runs a fifth of the
# examples it names (property_examples.examples); `make test`, which CI runs, runs them all.
settings.register_profile("edit-loop", max_examples=20)


def _fsync_without_the_disk(fd: int) -> None:
    os.fstat(fd)  # a closed or bad descriptor still fails as the real fsync would (EBADF)


@pytest.fixture(autouse=True)
def _no_disk_flushes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Throw-away test roots: durability is irrelevant, speed is not (as the test PostgreSQL's
    fsync=off). Surviving a power loss cannot be observed in a test, and every ContextFS write
    fsyncs its files and directories: on a busy disk that doubled the FS and commit tests. The
    calls still happen (test_atomicity interrupts them); tests/integration keeps real fsync."""
    monkeypatch.setattr(os, "fsync", _fsync_without_the_disk)


_BUILT_COMMANDS: dict[Any, Any] = {}


def _command_built_once(app: Any) -> Any:
    if app not in _BUILT_COMMANDS:
        _BUILT_COMMANDS[app] = typer.main.get_command(app)
    return _BUILT_COMMANDS[app]


@pytest.fixture(autouse=True)
def _cli_runner_builds_the_command_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """typer's CliRunner builds the click command from every command's signature at each
    invoke (tens of ms, some 50 invokes); the app does not change within a run, so each app is
    built once (a re-imported app is a new key)."""
    monkeypatch.setattr(typer.testing, "_get_command", _command_built_once)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the fresh interpreters the selected tests will wait for (early_processes.py):
    they run beside the rest of the tier instead of one after another inside it."""
    if session.config.option.collectonly:
        return
    selected = {i.module.__name__ for i in session.items if isinstance(i, pytest.Function)}
    for declared in EarlyProcesses.declared:
        if declared.module in selected:
            declared.start()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    for declared in EarlyProcesses.declared:
        declared.stop()


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


class HashEmbedder:
    """An `Embedder` without a model: unit-length vectors from a hash of the text. Its tokens
    are words, or, given `tokens` (a `prep_pool.TokenizerFile`), a real tokenizer's, offered
    as the real embedder offers them to the chunker (offsets and counts in batches)."""

    dimension = 8
    pools_spans = False

    def __init__(self, model_name: str = "hash-8", tokens: Any = None) -> None:
        self.model_name = model_name
        self.read: list[str] = []
        self.max_seq_length = 64 if tokens is None else int(tokens.max_seq_length)
        if tokens is not None:
            self.count_tokens = tokens.count_tokens
            self.count_many = tokens.count_many
            self.token_starts = tokens.token_starts
            self.word_additive = tokens.word_additive

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        self.read.extend(texts)
        out = []
        for t in texts:
            raw = np.frombuffer(hashlib.sha256(t.encode()).digest()[:8], dtype=np.uint8)
            v = raw.astype(np.float32) + 1.0
            out.append((v / np.linalg.norm(v)).tolist())
        return out

    async def embed_texts(self, texts: Sequence[str]) -> list[EmbeddingVector]:
        return [EmbeddingVector(dense_vector=v, model=self.model_name) for v in self.encode(texts)]

    def count_tokens(self, text: str) -> int:
        return len(text.split())


@pytest.fixture
def hash_embedder() -> type[HashEmbedder]:
    """The `HashEmbedder` class (see there)."""
    return HashEmbedder


@pytest.fixture(autouse=True)
def _unit_tests_never_import_torch() -> Iterator[None]:
    """The unit tier stays fast by never loading the model: a test that imports torch (or
    sentence-transformers) belongs in tests/integration or should use a small fake embedder."""
    before = {m for m in HEAVY if m in sys.modules}
    yield
    loaded = {m for m in HEAVY if m in sys.modules} - before
    assert not loaded, f"this unit test imported {sorted(loaded)}"
