-- 012_chunk_read_fields: what `find` reads of a chunk's node and units, on the chunk's row.
-- The fused statement joined every candidate with its node (for the node's L0 line and the
-- dates of its metadata), looked up whether the chunk has stored unit vectors, and turned the
-- chunk's refs from JSON into a text array: about 1 ms of a 3.4 ms statement on LoCoMo. The
-- index worker writes a node's row, its chunks and their units in one transaction, and
-- rewrites the chunks whenever it writes the node: these copies are as current as the node's
-- row itself.
-- unit_count is NULL on a row written before this migration: find then reads the node, the
-- units and the JSON refs as before (`ctxpipe reindex` rewrites every row).
-- Placeholders: {{schema}}.

ALTER TABLE {{schema}}.context_chunks
    ADD COLUMN IF NOT EXISTS unit_count    integer,
    ADD COLUMN IF NOT EXISTS refs          text[],
    ADD COLUMN IF NOT EXISTS node_abstract text,
    ADD COLUMN IF NOT EXISTS event_time    text,
    ADD COLUMN IF NOT EXISTS observed_at   text;
