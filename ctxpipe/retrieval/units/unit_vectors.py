"""The vectors `find` ranks a candidate chunk's lines and sentences with: those the index
stored next to the chunks (`StoredUnitCache`, fetched per chunk and node version), and the
units' vectors by (chunk id, text) (`UnitVectors`, an LRU cache that encodes, as the index
does, a unit with none stored)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import numpy as np

from ctxpipe.core.caches import LockedCache
from ctxpipe.core.config import UnitContext
from ctxpipe.providers.base import Embedder
from ctxpipe.retrieval.models import CandidateRow
from ctxpipe.retrieval.units.encoding import encode_units, line_units
from ctxpipe.retrieval.units.lexical import unit_key
from ctxpipe.storage.pipelined import Pending


def as_vector(value: Any) -> np.ndarray | None:
    """A stored embedding (pgvector `Vector`, numpy array, list or '[..]' text) as float32."""
    if value is None:
        return None
    if hasattr(value, "to_numpy"):
        return np.asarray(value.to_numpy(), dtype=np.float32)
    if isinstance(value, str):
        return np.asarray([float(x) for x in value.strip("[]").split(",") if x], np.float32)
    return np.asarray(value, dtype=np.float32)


Stored = Mapping[str, Mapping[str, np.ndarray]]  # chunk id -> unit key -> vector
Fetched = Mapping[str, Mapping[str, Any]]  # chunk id -> unit key -> stored vector, as read


class UnitVectors:
    """LRU cache of line/sentence embeddings by (chunk id, text): units recur across queries,
    and a unit read in its chunk's context has that chunk's vector. `context`: how the index
    reads units (`ChunkingConfig.unit_context`); units not stored are encoded the same way,
    their whole chunk read at once."""

    def __init__(
        self, embedder: Embedder, size: int = 50000, context: UnitContext = "chunk"
    ) -> None:
        self.embedder = embedder
        self.size = size
        self.context: UnitContext = context
        self._data: LockedCache[np.ndarray] = LockedCache.lru(size)

    def put(self, chunk_id: str, text: str, vec: np.ndarray) -> None:
        self._data.put((chunk_id, text), vec)

    def complete(
        self,
        rows: Sequence[CandidateRow],
        texts_by_row: Mapping[int, Sequence[str]],
        stored: Stored | None,
    ) -> None:
        """Encode, as the index does, the units of the rows (by index) with a unit neither
        stored nor cached."""
        todo: list[CandidateRow] = []
        for r, texts in texts_by_row.items():
            row = rows[r]
            have = (stored or {}).get(row.chunk_id) or {}
            left = {(row.chunk_id, t) for t in texts if unit_key(t) not in have}
            if left and len(self._data.get_many(left)) < len(left):
                todo.append(row)
        if not todo:
            return
        lines = [
            line_units(r.text_content, [str(x) for x in r.source_refs], r.context_type)
            for r in todo
        ]
        per_chunk, _ = encode_units(self.embedder, lines, context=self.context)
        for row, vecs in zip(todo, per_chunk, strict=True):
            for text, vec in vecs.items():
                self.put(row.chunk_id, text, np.asarray(vec, dtype=np.float32))

    def get_many(
        self, items: Sequence[tuple[str, str]], stored: Stored | None = None
    ) -> np.ndarray:
        """Vectors of (chunk id, text) `items`: stored ones first, then cached, then encoded
        (each text on its own: what `complete` did not cover)."""
        found: dict[tuple[str, str], np.ndarray] = {}
        for cid, t in items:
            v = ((stored or {}).get(cid) or {}).get(unit_key(t))
            if v is not None:
                found[(cid, t)] = v
        cached = self._data.get_many(i for i in items if i not in found)
        found.update((cast(tuple[str, str], k), v) for k, v in cached.items())
        missing = [i for i in dict.fromkeys(items) if i not in found]
        if missing:
            vecs = np.asarray(self.embedder.encode([t for _, t in missing]), dtype=np.float32)
            for i, v in zip(missing, vecs, strict=True):
                found[i] = v
                self.put(i[0], i[1], v)
        if not items:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([found[i] for i in items])


class StoredUnitCache:
    """The index-time unit vectors of chunks, kept per (chunk, node version): a find fetches
    only the chunks it has not seen at their current version (the candidates of one owner
    recur across queries), and converts each vector once. Bounded by units held."""

    def __init__(
        self,
        fetch: Callable[[Sequence[str]], Fetched],
        max_units: int = 50_000,
        send: Callable[[Sequence[str]], Pending[Fetched] | None] | None = None,
    ) -> None:
        self.fetch = fetch
        self.send = send
        self.max_units = max_units
        # chunk id -> (node version, unit vectors): bounded by the units held, not the chunks
        self._data: LockedCache[tuple[int, dict[str, np.ndarray]]] = LockedCache.lru(
            max_units, getsizeof=lambda entry: max(1, len(entry[1]))
        )

    def get(
        self, rows: Sequence[CandidateRow], shape: tuple[int, ...]
    ) -> dict[str, dict[str, np.ndarray]]:
        """Chunk id -> unit key -> vector for the units of `rows` (candidate chunk rows)."""
        out: dict[str, dict[str, np.ndarray]] = {}
        missing = self._missing({r.chunk_id: r.node_version for r in rows}, out)
        if missing:
            self._keep(missing, self.fetch(list(missing)), shape, out)
        return out

    def held(self, rows: Sequence[CandidateRow]) -> dict[str, dict[str, np.ndarray]] | None:
        """`get` of `rows` when every one is held at its version (nothing to fetch), else
        None."""
        out: dict[str, dict[str, np.ndarray]] = {}
        return None if self._missing({r.chunk_id: r.node_version for r in rows}, out) else out

    def send_missing(
        self, chunks: Mapping[str, int], shape: tuple[int, ...]
    ) -> Pending[None] | None:
        """Fetch the units of the `chunks` (chunk id -> node version) not held at that
        version with the statement sent (`send`), kept when `result()` reads it; None when
        every one is held, or nothing was sent."""
        missing = self._missing(chunks, {})
        sent = self.send(list(missing)) if missing and self.send is not None else None
        if sent is None:
            return None
        return sent.then(lambda got: self._keep(missing, got, shape, {}))

    def _missing(
        self, wanted: Mapping[str, int], out: dict[str, dict[str, np.ndarray]]
    ) -> dict[str, int]:
        """The chunks of `wanted` not held at their version; the held ones go to `out`."""
        missing: dict[str, int] = {}
        cached = self._data.get_many(wanted)
        for cid, version in wanted.items():
            hit = cached.get(cid)
            if hit is not None and hit[0] == version:
                out[cid] = hit[1]
            else:
                missing[cid] = version
        return missing

    def _keep(
        self,
        missing: Mapping[str, int],
        fetched: Fetched,
        shape: tuple[int, ...],
        out: dict[str, dict[str, np.ndarray]],
    ) -> None:
        for cid, version in missing.items():
            vecs: dict[str, np.ndarray] = {}
            for key, raw in (fetched.get(cid) or {}).items():
                vec = as_vector(raw)
                if vec is not None and vec.shape == shape:
                    vecs[key] = vec
            self._data.put(cid, (version, vecs))
            out[cid] = vecs

    @property
    def units_held(self) -> int:
        return int(self._data.currsize)

    def clear(self) -> None:
        self._data.clear()


__all__ = ["Fetched", "Stored", "StoredUnitCache", "UnitVectors", "as_vector"]
