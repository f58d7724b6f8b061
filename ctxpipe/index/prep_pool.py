"""PrepPool: the host's share of indexing — chunking nodes and finding the lines and sentences
of every chunk — done in worker processes, so that one embed worker's GPU is not left waiting
on one Python thread (`ChunkingConfig.prep_processes`).

A worker process loads only the model's tokenizer (`tokenizer.json`, no torch, no model) and
chunks exactly as the embed worker's own chunker does (same tokenizer, same settings). The
nodes of a batch are dealt to the workers in contiguous parts and the results come back in
order; a node that fails is returned as its error, as the in-process path reports it.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from ctxpipe.core.config import ChunkingConfig
from ctxpipe.core.models import ChunkRecord, ContextNode
from ctxpipe.index.chunker import DocumentChunker
from ctxpipe.providers.token_reader import splits_words_first, token_counts, token_starts
from ctxpipe.retrieval.units.encoding import LineUnits, line_units

Prepared = tuple[list[ChunkRecord], dict[str, list[LineUnits]]] | BaseException


class TokenizerFile:
    """The chunker's view of an embedding model: its tokenizer and length, read from disk."""

    def __init__(self, model_name: str) -> None:
        from ctxpipe.providers.embedder import SentenceTransformerEmbedder
        from ctxpipe.retrieval.tokens import counter_for_model

        self._tok = counter_for_model(model_name)._tok
        self.max_seq_length = SentenceTransformerEmbedder(model_name).max_seq_length
        processor = self._tok.post_processor
        self.special_tokens = int(processor.num_special_tokens_to_add(False)) if processor else 0
        self.word_additive = splits_words_first(self._tok)

    def count_tokens(self, text: str) -> int:
        return len(self._tok.encode(text, add_special_tokens=False).ids) if text else 0

    def count_many(self, texts: Sequence[str]) -> list[int]:
        return token_counts(self._tok, texts)

    def token_starts(self, texts: Sequence[str]) -> list[list[int]]:
        return token_starts(self._tok, texts)


_WORKER: dict[str, Any] = {}  # in a worker process: its chunker and whether lines are wanted


def _start(model_name: str, chunking: str) -> None:
    config = ChunkingConfig.model_validate_json(chunking)
    tokens = TokenizerFile(model_name)
    _WORKER["chunker"] = DocumentChunker(tokens, config, special_tokens=tokens.special_tokens)
    _WORKER["lines"] = bool(config.unit_vectors)


def prepare(chunker: DocumentChunker, nodes: Sequence[ContextNode], lines: bool) -> list[Prepared]:
    """Each node's chunks and the lines of each chunk (by chunk id), or the node's error."""
    together: list[list[ChunkRecord] | BaseException]
    try:
        together = list(chunker.chunk_nodes(nodes))
    except Exception:  # noqa: BLE001 - one node at a time, to tell which one failed
        together = []
        for node in nodes:
            try:
                together.append(chunker.chunk_for_node(node))
            except Exception as exc:  # noqa: BLE001
                together.append(exc)
    out: list[Prepared] = []
    for chunks in together:
        if isinstance(chunks, BaseException):
            out.append(chunks)
            continue
        per_chunk = (
            {c.chunk_id: line_units(c.text_content, c.source_refs, c.context_type) for c in chunks}
            if lines
            else {}
        )
        out.append((chunks, per_chunk))
    return out


def _prepare_here(nodes: list[ContextNode]) -> list[Prepared]:
    return prepare(_WORKER["chunker"], nodes, _WORKER["lines"])


def _started(pause_s: float) -> int:
    time.sleep(pause_s)  # held a moment, so that each call finds a different worker
    return os.getpid()


class PrepPool:
    """`processes` worker processes (spawned: safe beside CUDA) that prepare nodes."""

    def __init__(self, model_name: str, chunking: ChunkingConfig, processes: int) -> None:
        self.processes = processes
        self._pool = ProcessPoolExecutor(
            max_workers=processes,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_start,
            initargs=(model_name, chunking.model_dump_json()),
        )

    def prepare(self, nodes: Sequence[ContextNode]) -> list[Prepared]:
        """`prepare` of every node, the nodes dealt to the workers in contiguous parts."""
        items = list(nodes)
        if not items:
            return []
        size = -(-len(items) // self.processes)
        parts = [items[i : i + size] for i in range(0, len(items), size)]
        futures = [self._pool.submit(_prepare_here, part) for part in parts]
        return [done for f in futures for done in f.result()]

    def ready(self, tries: int = 20) -> int:
        """Start every worker now (each loads the tokenizer) rather than on the first batch;
        returns how many distinct workers answered (`processes`, unless one never did)."""
        answered: set[int] = set()
        for _ in range(tries):
            futures = [self._pool.submit(_started, 0.1) for _ in range(self.processes)]
            answered.update(f.result() for f in futures)
            if len(answered) >= self.processes:
                break
        return len(answered)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


_POOLS: dict[tuple[str, str, int, int], PrepPool] = {}  # one per process and settings
_POOLS_LOCK = threading.Lock()  # a worker's drains (threads) ask for the pool at once


def shared_pool(model_name: str, chunking: ChunkingConfig, processes: int) -> PrepPool | None:
    """The process's pool of `processes` workers for these settings (None when 0): started
    once, its workers kept for every batch (a spawned worker takes a second or two to start).
    `processes`: `chunking.prep_processes` as the embedder's device resolves it."""
    if processes <= 0:
        return None
    key = (model_name, chunking.model_dump_json(), processes, os.getpid())
    with _POOLS_LOCK:
        pool = _POOLS.get(key)
        if pool is None:
            pool = _POOLS[key] = PrepPool(model_name, chunking, processes)
    return pool


def close_pools() -> None:
    """Stop this process's prep pools (their workers and what they cached go with them)."""
    with _POOLS_LOCK:
        pools = list(_POOLS.values())
        _POOLS.clear()
    for pool in pools:
        pool.close()


__all__ = ["PrepPool", "Prepared", "TokenizerFile", "close_pools", "prepare", "shared_pool"]
