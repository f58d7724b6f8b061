"""Indexer: make the replica rows of a set of URIs equal to the FS (the one code path shared by
the outbox worker, `reindex` and MOVE handling).

For each URI: the node is read from the FS (the truth). Present → chunked, embedded and upserted
unless the replica already holds this version with this content; a replica row of a *newer*
version is never overwritten by an older one (refused) unless the caller forces that URI.
Absent → its replica rows (node, chunks, outgoing edges) are deleted. The texts of the whole
batch are embedded together (the embedder batches them by length), and every row of the batch
is written in one transaction (`ReplicaStore.write`).

Unit vectors: every line and sentence `find` ranks inside a chunk (`unit_texts`) is embedded
with the chunk and stored next to it, keyed by a hash of its text. A chunk with a unit not
embedded yet is read again whole, its units pooled from that reading
(`retrieval.units.encoding`, `ChunkingConfig.unit_context`); a chunk of one line whose text is
encoded whole anyway takes that vector for its unit. Read only what is new: a unit's vector
depends on its chunk's whole text, so the stored unit vectors are looked up by the text of
their chunk, and an updated or moved node keeps those of every chunk whose text is unchanged
(the chunker keeps earlier chunks' texts when lines are appended); the model reads only the
new or changed chunks, each distinct set of lines once (`ChunkingConfig.unit_vectors` turns
all this off).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ctxpipe.core.config import ChunkingConfig, gpu_prep_processes, on_device
from ctxpipe.core.errors import NodeNotFoundError
from ctxpipe.core.models import ChunkRecord, ContextNode, RelationEdge
from ctxpipe.core.uri import node_uri
from ctxpipe.fs import ContextFS, FSRelationStore
from ctxpipe.index.chunker import DocumentChunker
from ctxpipe.index.prep_pool import prepare, shared_pool
from ctxpipe.index.replica import NodeState, NodeWrite, ReplicaRows
from ctxpipe.providers.base import Embedder
from ctxpipe.providers.embedder import device_type, normalised
from ctxpipe.retrieval.units.encoding import LineUnits, encode_units, unit_texts_of
from ctxpipe.retrieval.units.lexical import unit_key

log = logging.getLogger(__name__)

RELATIONS_KEY = "relations:"  # `SyncReport.errors` key prefix of a URI's relation failure


@dataclass
class SyncReport:
    """What one `sync_nodes` / `sync_relations` call did, per URI."""

    indexed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # replica newer than FS: left alone
    deleted: list[str] = field(default_factory=list)
    absent: list[str] = field(default_factory=list)  # neither on FS nor in the replica
    relations: int = 0
    chunks: int = 0
    embedded: int = 0  # chunk texts run through the model (unchanged texts reuse their vectors)
    units: int = 0  # unit vectors written
    units_embedded: int = 0  # unit texts run through the model (the rest reused a vector)
    errors: dict[str, BaseException] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    def add_time(self, key: str, started: float) -> None:
        self.timings[key] = self.timings.get(key, 0.0) + time.perf_counter() - started


def decide(node: ContextNode, state: NodeState | None, rewrite: bool, replace: bool) -> str:
    """`index`, `unchanged` or `refused` for a node present on the FS."""
    if state is None or replace or node.version > state.version:
        return "index"
    if node.version < state.version:
        return "refused"  # never index an older version over a newer one
    return "index" if rewrite or node.content_hash != state.content_hash else "unchanged"


class Indexer:
    def __init__(
        self,
        fs: ContextFS,
        relations: FSRelationStore,
        replica: ReplicaRows,
        embedder: Embedder,
        chunking: ChunkingConfig | None = None,
        *,
        chunker: DocumentChunker | None = None,
    ) -> None:
        self.fs = fs
        self.relations = relations
        self.replica = replica
        self.embedder = embedder
        self._chunking = chunking or ChunkingConfig()
        self._chunker = chunker
        self._dimension_ok = False

    @property
    def chunker(self) -> DocumentChunker:
        """Built on first use (it needs the model's tokenizer)."""
        if self._chunker is None:
            self._chunker = DocumentChunker(self.embedder, self._chunking)
        return self._chunker

    @property
    def unit_vectors(self) -> bool:
        return bool(self._chunking.unit_vectors)

    @property
    def model_name(self) -> str:
        return str(self.embedder.model_name)

    @property
    def prep_processes(self) -> int:
        """`ChunkingConfig.prep_processes` where this embedder runs (`auto`: none on a CPU,
        `gpu_prep_processes` on a GPU)."""
        auto = (0, gpu_prep_processes())
        return on_device(self._chunking.prep_processes, device_type(self.embedder), auto)

    def warm(self) -> None:
        """Load what the first batch would otherwise wait for: the tokenizer, the model, and
        the prep processes (started, each with its tokenizer loaded)."""
        self.chunker.count_tokens("warm up")
        self.embedder.encode(["warm up"])
        pool = shared_pool(self.model_name, self._chunking, self.prep_processes)
        if pool is not None:
            pool.ready()

    def check_dimension(self) -> None:
        """The model's vector size must be the schema's (`EmbeddingError` otherwise)."""
        if not self._dimension_ok:
            self.replica.check_dimension(self.embedder.model_name, int(self.embedder.dimension))
            self._dimension_ok = True

    # ------------------------------------------------------------------ nodes
    def read_nodes(self, uris: Iterable[str], report: SyncReport) -> dict[str, ContextNode | None]:
        """FS nodes by URI (None: not on the FS); unreadable nodes go to `report.errors`."""
        out: dict[str, ContextNode | None] = {}
        for uri in uris:
            try:
                out[uri] = self.fs.read_node(uri)
            except NodeNotFoundError:
                out[uri] = None
            except Exception as exc:  # noqa: BLE001 - one bad node never sinks the batch
                report.errors[uri] = exc
        return out

    def sync_nodes(
        self,
        uris: Iterable[str],
        *,
        force: bool = False,
        replace: Iterable[str] = (),
        reuse: dict[str, Any] | None = None,
        report: SyncReport | None = None,
    ) -> SyncReport:
        """Converge the replica rows of `uris` to the FS in one transaction.

        `force`: rewrite present nodes even when the replica holds the same version, every
        text embedded afresh (reindex; still never regressing). Otherwise the stored vectors
        of chunk texts that did not change (same text, same model) are reused.
        `replace`: URIs whose replica row may go back to the FS's older version (repair found
        the FS behind the replica). `reuse`: more vectors by chunk text (moved rows)."""
        report = report or SyncReport()
        wanted = list(dict.fromkeys(node_uri(u) for u in uris))
        if not wanted:
            return report
        self.check_dimension()
        started = time.perf_counter()
        nodes = self.read_nodes(wanted, report)
        report.add_time("read", started)
        started = time.perf_counter()
        states = self.replica.node_states(nodes)
        replace_set = {node_uri(u) for u in replace}
        to_index: list[ContextNode] = []
        deletes: list[str] = []
        for uri, node in nodes.items():
            if node is None:
                (deletes if uri in states else report.absent).append(uri)
                continue
            verdict = decide(node, states.get(uri), force, uri in replace_set)
            if verdict == "index":
                to_index.append(node)
            elif verdict == "unchanged":
                report.unchanged.append(uri)
            else:
                state = states[uri]
                log.warning(
                    "refused to index %s v%d over the replica's v%d (never regress)",
                    uri,
                    node.version,
                    state.version,
                )
                report.refused.append(uri)
        report.add_time("decide", started)

        reuse = dict(reuse or {})
        unit_reuse: dict[str, dict[str, Any]] = {}
        if to_index and not force:  # an updated node: its unchanged texts keep their vectors
            started = time.perf_counter()
            stored = self.replica.chunk_vectors([n.uri for n in to_index], self.model_name)
            reuse = {**stored, **reuse}
            if self.unit_vectors:  # the deleted rows too: a move's units keep their vectors
                from_uris = [n.uri for n in to_index] + deletes
                unit_reuse = self.replica.unit_vectors(from_uris, self.model_name)
            report.add_time("reuse", started)
        writes = self._prepare(to_index, report, reuse, unit_reuse)
        started = time.perf_counter()
        written, deleted = self.replica.write(writes, deletes, rewrite=force, replace=replace_set)
        report.add_time("write", started)
        for w in writes:
            if w.node.uri in written:
                report.indexed.append(w.node.uri)
                report.chunks += len(w.chunks)
            else:  # a concurrent worker wrote a newer (or the same) version first
                report.unchanged.append(w.node.uri)
        report.deleted.extend(sorted(deleted))
        report.absent.extend(sorted(set(deletes) - deleted))
        return report

    def _prepare(
        self,
        nodes: list[ContextNode],
        report: SyncReport,
        reuse: dict[str, Any],
        unit_reuse: dict[str, dict[str, Any]] | None = None,
    ) -> list[NodeWrite]:
        """Chunk every node and find its lines (in the prep processes when there are some),
        then embed all new texts of the batch (chunks and units) together."""
        started = time.perf_counter()
        pool = shared_pool(self.model_name, self._chunking, self.prep_processes)
        done = (
            pool.prepare(nodes)
            if pool is not None
            else prepare(self.chunker, nodes, lines=self.unit_vectors)
        )
        chunked: list[tuple[ContextNode, list[ChunkRecord]]] = []
        lines: dict[str, list[LineUnits]] = {}
        for node, result in zip(nodes, done, strict=True):
            if isinstance(result, BaseException):
                report.errors[node.uri] = result
                continue
            chunks, lines_of_chunks = result
            for c in chunks:
                c.metadata["model"] = self.model_name
            chunked.append((node, chunks))
            lines.update(lines_of_chunks)
        report.add_time("chunk", started)
        started = time.perf_counter()
        texts = list(
            dict.fromkeys(
                c.text_content
                for _, chunks in chunked
                for c in chunks
                if c.text_content not in reuse
            )
        )
        units = {cid: unit_texts_of(per_chunk) for cid, per_chunk in lines.items()}
        if units and self._chunking.chunk_vectors == "units":  # a chunk with units: their mean
            # a text is encoded whole when any chunk holding it has no units (the same text can
            # be a memory's chunk with units and an archive summary's chunk without)
            alone = {c.text_content for _, cs in chunked for c in cs if not units.get(c.chunk_id)}
            texts = [t for t in texts if t in alone]
        kept = dict(unit_reuse or {})  # chunk text -> unit key -> the vector stored with it
        keys = {u: unit_key(u) for per_chunk in units.values() for u in per_chunk}
        text_of = {c.chunk_id: c.text_content for _, chunks in chunked for c in chunks}

        def stored(cid: str) -> dict[str, Any] | None:
            """The stored unit vectors of this chunk's text, if they cover all its units: a
            unit's vector is pooled from its chunk's reading, so it is reused only with the
            whole chunk text unchanged."""
            got = kept.get(text_of[cid])
            if got is None or not all(keys[u] in got for u in units[cid]):
                return None
            return got

        reused = {cid: got for cid in lines if (got := stored(cid)) is not None}
        # a chunk of one unit, a text encoded whole anyway: the unit takes that vector (the
        # reading of that one line alone)
        whole = {**reuse, **dict.fromkeys(texts)}
        single = {
            cid
            for cid in lines
            if cid not in reused and len(units[cid]) == 1 and units[cid][0] in whole
        }
        # the chunks new or changed are read again, whole; chunks of the same lines (an
        # overview equal to its content, a text twice in the batch) are read once
        stale = [cid for cid in lines if units[cid] and cid not in reused and cid not in single]
        reads = list(dict.fromkeys(tuple(lines[cid]) for cid in stale))
        report.add_time("units", started)
        started = time.perf_counter()
        context = self._chunking.unit_context
        fresh, vectors = encode_units(self.embedder, reads, context=context, texts=texts)
        read = dict(zip(reads, fresh, strict=True))
        by_chunk = {cid: read[tuple(lines[cid])] for cid in stale}  # a unit's vector in its chunk
        report.embedded += len(texts)
        report.units_embedded += len({u for r in reads for u in unit_texts_of(r)})
        report.add_time("embed", started)
        writes = []
        for node, chunks in chunked:
            per_chunk: list[list[tuple[str, Any]]] = []
            for c in chunks:
                cid = c.chunk_id
                if cid in reused:
                    row = [(keys[u], reused[cid][keys[u]]) for u in units[cid]]
                elif cid in single:
                    u = units[cid][0]
                    row = [(keys[u], vectors[u] if u in vectors else reuse[u])]
                else:
                    row = [(keys[u], by_chunk[cid][u]) for u in units.get(cid, [])]
                per_chunk.append(row)
                report.units += len(row)
            vecs = [
                _chunk_vector(c.text_content, row, vectors, reuse)
                for c, row in zip(chunks, per_chunk, strict=True)
            ]
            writes.append(NodeWrite(node, chunks, vecs, per_chunk))
        return writes

    # ------------------------------------------------------------------ relations
    def sync_relations(self, uris: Iterable[str], report: SyncReport | None = None) -> SyncReport:
        """Replace the replica edges of each URI with its `.relations.json` edges (none when
        the node is gone from the FS)."""
        report = report or SyncReport()
        edges: dict[str, list[RelationEdge]] = {}
        for uri in dict.fromkeys(node_uri(u) for u in uris):
            try:
                edges[uri] = self.relations.get_edges(uri)
            except NodeNotFoundError:
                edges[uri] = []
            except Exception as exc:  # noqa: BLE001
                report.errors[RELATIONS_KEY + uri] = exc
        started = time.perf_counter()
        report.relations += self.replica.replace_edges(edges)
        report.add_time("relations", started)
        return report

    def move(self, from_uri: str, to_uri: str, report: SyncReport | None = None) -> SyncReport:
        """MOVE_CONTEXT: the rows under `from_uri` go, the FS nodes under `to_uri` come (their
        stored vectors reused when the chunk texts are unchanged), edges follow."""
        report = report or SyncReport()
        old = self.replica.uris_under(node_uri(from_uri))
        new = [uri for uri, _ in self.fs.walk_nodes(to_uri)]
        reuse = self.replica.chunk_vectors(old, self.model_name)
        self.sync_nodes([*old, *new], reuse=reuse, report=report)
        self.sync_relations([*old, *new], report=report)
        return report


def _chunk_vector(
    text: str,
    unit_vecs: list[tuple[str, Any]],
    encoded: dict[str, Any],
    reuse: dict[str, Any],
) -> Any:
    """The chunk's own encoding when there is one (encoded now or kept from before), else the
    normalised mean of its units' vectors (`ChunkingConfig.chunk_vectors="units"`)."""
    own = encoded.get(text, reuse.get(text))
    if own is not None or not unit_vecs:
        return own
    mean = np.stack([np.asarray(v, dtype=np.float32) for _, v in unit_vecs]).mean(axis=0)
    return normalised(mean)


__all__ = ["RELATIONS_KEY", "Indexer", "SyncReport", "decide"]
