-- 011_inline_vectors: the values an exact scan reads stay in the row.
-- An exact scan of an owner's chunks (find's plan for a small scope, and the bare top-k) reads
-- the vector of every row, and the text arm the tsvector of every row. pgvector stores its type
-- EXTERNAL: a row over about 2 kB (a 384-dimension vector is 1.5 kB; with its text and tsvector
-- most chunks are over) had its vector moved out of line, and every row of the scan was then a
-- lookup in the TOAST table. PLAIN keeps the vector in the row (the text is moved out instead);
-- only where a vector leaves room for the rest of the row in an 8 kB page (up to 1,536
-- dimensions). MAIN keeps the tsvector in the row, compressed if need be, out of line only
-- as the last resort. A unit vector row is the same case.
-- Rows written before keep their old layout until they are written again: `ctxpipe reindex`
-- rewrites them all (the index worker rewrites a node whenever it changes).
-- Placeholders: {{schema}}, {{embedding_dim}}.

DO $$
BEGIN
    IF {{embedding_dim}} <= 1536 THEN
        ALTER TABLE {{schema}}.context_chunks ALTER COLUMN embedding SET STORAGE PLAIN;
        ALTER TABLE {{schema}}.chunk_units ALTER COLUMN embedding SET STORAGE PLAIN;
    END IF;
END
$$;

ALTER TABLE {{schema}}.context_chunks ALTER COLUMN tsv SET STORAGE MAIN;
