-- Vector search over the index replica: the statements `find` and the dedup prefilter share.

-- name: pgvector_version
SELECT extversion FROM pg_extension WHERE extname = 'vector'

-- name: hnsw_tune
-- transaction-local HNSW candidate list size (pgvector < 0.8)
SELECT set_config('hnsw.ef_search', %(ef)s, true)

-- name: hnsw_tune_iterative
-- ...and iterative scans, so that a filtered HNSW search still returns its rows (pgvector >= 0.8)
SELECT set_config('hnsw.ef_search', %(ef)s, true),
       set_config('hnsw.iterative_scan', %(order)s, true),
       set_config('hnsw.max_scan_tuples', %(max_tuples)s, true)

-- name: vector_search_nodes
-- The nearest chunks by cosine with their node (the dedup prefilter: one hit per URI is kept
-- by the caller, hence the oversampled limit).
SELECT c.uri, c.level, c.category, c.owner_space, c.context_type, c.chunk_id,
       c.chunk_index, c.text_content, c.source_refs, c.metadata, c.node_version,
       n.abstract_text, n.version, (c.embedding <=> %(q)s::vector) AS distance
FROM {{schema}}.context_chunks AS c
JOIN {{schema}}.context_nodes AS n ON n.uri = c.uri AND n.account_id = c.account_id
WHERE {where} AND c.embedding IS NOT NULL
ORDER BY c.embedding <=> %(q)s::vector, c.uri, c.chunk_index
LIMIT %(limit)s
