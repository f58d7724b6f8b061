-- The index replica written by the index workers (ctxpipe.index.replica).

-- name: index_node_states
SELECT uri, version, content_hash
FROM {{schema}}.context_nodes
WHERE uri = ANY(%(uris)s)

-- name: index_all_node_states
SELECT uri, version, content_hash
FROM {{schema}}.context_nodes

-- name: index_upsert_node
-- Never regresses: an existing row is replaced only by a newer version, or by the same version
-- with other content (the FS node was recreated) or when rewriting (reindex); an older
-- version only with `replace` (repair found the FS behind the replica).
INSERT INTO {{schema}}.context_nodes AS n
    (uri, account_id, parent_uri, context_type, category, owner_space, abstract_text, version,
     content_hash, source_refs, metadata, fs_path, created_at, updated_at, indexed_at)
VALUES
    (%(uri)s, %(account_id)s, %(parent_uri)s, %(context_type)s, %(category)s, %(owner_space)s,
     %(abstract_text)s, %(version)s, %(content_hash)s, %(source_refs)s, %(metadata)s,
     %(fs_path)s, %(created_at)s, %(updated_at)s, now())
ON CONFLICT (uri) DO UPDATE
SET account_id = EXCLUDED.account_id,
    parent_uri = EXCLUDED.parent_uri,
    context_type = EXCLUDED.context_type,
    category = EXCLUDED.category,
    owner_space = EXCLUDED.owner_space,
    abstract_text = EXCLUDED.abstract_text,
    version = EXCLUDED.version,
    content_hash = EXCLUDED.content_hash,
    source_refs = EXCLUDED.source_refs,
    metadata = EXCLUDED.metadata,
    fs_path = EXCLUDED.fs_path,
    created_at = EXCLUDED.created_at,
    updated_at = EXCLUDED.updated_at,
    indexed_at = now()
WHERE %(replace)s
   OR n.version < EXCLUDED.version
   OR (n.version = EXCLUDED.version
       AND (%(rewrite)s OR n.content_hash IS DISTINCT FROM EXCLUDED.content_hash))
RETURNING uri

-- name: index_delete_chunks
DELETE FROM {{schema}}.context_chunks WHERE uri = ANY(%(uris)s)

-- name: index_copy_chunks
-- With what find reads of the chunk's node and units (migration 012): how many unit vectors
-- are written with it, its refs as a text array, the node's L0 line and the dates of its
-- metadata (`metadata ->> 'event_time'`, `->> 'observed_at'`).
COPY {{schema}}.context_chunks
    (chunk_id, uri, account_id, parent_uri, level, chunk_index, text_content, embedding,
     context_type, category, owner_space, source_refs, metadata, node_version,
     unit_count, refs, node_abstract, event_time, observed_at)
FROM STDIN (FORMAT BINARY)

-- name: index_copy_units
COPY {{schema}}.chunk_units (chunk_id, unit_key, embedding) FROM STDIN (FORMAT BINARY)

-- name: index_unit_vectors
-- Stored unit vectors with the text of their chunk, of chunks embedded by `model` (the units of
-- an unchanged chunk text of an updated or moved node are not embedded again; a unit's vector
-- is pooled from its chunk's reading, so it is reused only with its whole chunk).
SELECT c.text_content, u.unit_key, u.embedding
FROM {{schema}}.chunk_units AS u
JOIN {{schema}}.context_chunks AS c ON c.chunk_id = u.chunk_id
WHERE c.uri = ANY(%(uris)s) AND c.metadata ->> 'model' = %(model)s

-- name: index_delete_nodes
DELETE FROM {{schema}}.context_nodes WHERE uri = ANY(%(uris)s) RETURNING uri

-- name: index_delete_edges_from
DELETE FROM {{schema}}.relation_edges WHERE from_uri = ANY(%(uris)s)

-- name: index_insert_edge
INSERT INTO {{schema}}.relation_edges
    (id, account_id, from_uri, to_uri, relation_type, reason, weight, created_at)
VALUES
    (%(id)s, %(account_id)s, %(from_uri)s, %(to_uri)s, %(relation_type)s, %(reason)s,
     %(weight)s, COALESCE(%(created_at)s, now()))
ON CONFLICT (id) DO UPDATE
SET to_uri = EXCLUDED.to_uri, relation_type = EXCLUDED.relation_type,
    reason = EXCLUDED.reason, weight = EXCLUDED.weight, created_at = EXCLUDED.created_at

-- name: index_edge_ids
SELECT from_uri, id FROM {{schema}}.relation_edges

-- name: index_chunk_vectors
SELECT text_content, embedding
FROM {{schema}}.context_chunks
WHERE uri = ANY(%(uris)s) AND embedding IS NOT NULL AND metadata ->> 'model' = %(model)s

-- name: index_uris_under
SELECT uri FROM {{schema}}.context_nodes
WHERE uri = %(uri)s OR uri LIKE %(prefix)s ESCAPE '\'

-- name: index_vector_dim
SELECT a.atttypmod
FROM pg_attribute AS a
WHERE a.attrelid = to_regclass(%(table)s) AND a.attname = 'embedding' AND NOT a.attisdropped

-- name: index_counts
SELECT (SELECT count(*) FROM {{schema}}.context_nodes),
       (SELECT count(*) FROM {{schema}}.context_chunks),
       (SELECT count(*) FROM {{schema}}.relation_edges),
       (SELECT count(*) FROM {{schema}}.chunk_units)

-- name: index_truncate
TRUNCATE {{schema}}.chunk_units, {{schema}}.context_chunks, {{schema}}.context_nodes,
         {{schema}}.relation_edges

-- name: index_vector_index_drop
-- A clean reindex loads every row first and builds the HNSW index of the chunks' vectors once
-- after: pgvector updates it row by row otherwise, which on a GPU worker is most of the write.
DROP INDEX IF EXISTS {{schema}}.idx_chunks_embedding

-- name: index_vector_index_build
-- The HNSW index of the chunks' vectors as migration 001 made it (same name, same parameters).
CREATE INDEX IF NOT EXISTS idx_chunks_embedding ON {{schema}}.context_chunks
    USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)

-- name: index_repair_last
SELECT id, started_at, finished_at, mode, missing, stale, orphaned, relations, compared,
       in_flight, events_queued, fs_nodes, replica_nodes, last_fs_mtime
FROM {{schema}}.repair_runs
WHERE finished_at IS NOT NULL AND mode IN ('incremental', 'full')
ORDER BY id DESC
LIMIT 1

-- name: index_repair_record
INSERT INTO {{schema}}.repair_runs
    (started_at, finished_at, mode, missing, stale, orphaned, relations, compared, in_flight,
     events_queued, fs_nodes, replica_nodes, last_fs_mtime)
VALUES
    (%(started_at)s, now(), %(mode)s, %(missing)s, %(stale)s, %(orphaned)s, %(relations)s,
     %(compared)s, %(in_flight)s, %(events_queued)s, %(fs_nodes)s, %(replica_nodes)s,
     %(last_fs_mtime)s)
RETURNING id

-- name: index_inflight_uris
SELECT DISTINCT uri FROM {{schema}}.outbox_events
WHERE status IN ('pending', 'claimed', 'failed')
