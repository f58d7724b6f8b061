-- 006_unit_vectors: index-time vectors of the units `find` ranks inside a chunk (its lines and
-- sentences, ctxpipe.retrieval.text.unit_texts), so a query embeds only the question.
-- Placeholders: {{schema}}, {{embedding_dim}}.

-- One row per distinct unit text of a chunk, keyed by a hash of the text (unit_key). Written
-- with the chunk in the indexer's transaction; goes with it (ON DELETE CASCADE).
CREATE TABLE {{schema}}.chunk_units (
    chunk_id   varchar(64)  NOT NULL
               REFERENCES {{schema}}.context_chunks (chunk_id) ON DELETE CASCADE,
    unit_key   varchar(32)  NOT NULL,
    embedding  vector({{embedding_dim}}) NOT NULL,
    PRIMARY KEY (chunk_id, unit_key)
);
