-- Read path (ctxpipe.retrieval). `{where}` / `{vec_order}` are composed with psycopg.sql from
-- fixed column names; every value is a bound parameter.

-- name: retrieval_scope_stats
-- Rows a filtered search may touch (index-only scan on (account_id, owner_space): the plan
-- choice between an exact scan and HNSW) and the mean lexemes per chunk of a sample of them
-- (BM25 length normalisation).
SELECT (SELECT count(*) FROM {{schema}}.context_chunks AS c WHERE {where}),
       (SELECT coalesce(avg(length(s.tsv)), 1)::float8
        FROM (SELECT c.tsv FROM {{schema}}.context_chunks AS c WHERE {where} LIMIT 2000) AS s)

-- name: retrieval_common_lexemes
-- The lexemes more than common_ratio of the scope's rows hold (of its first `sample` rows
-- in a large scope), and the rows counted: the scope's own stopwords.
WITH sample AS MATERIALIZED (
    SELECT c.tsv FROM {{schema}}.context_chunks AS c WHERE {where} LIMIT %(sample)s
),
n AS MATERIALIZED (SELECT count(*) AS n FROM sample)
SELECT l.lexeme, (SELECT n FROM n) AS n
FROM sample CROSS JOIN LATERAL unnest(sample.tsv) AS l(lexeme, positions, weights)
GROUP BY l.lexeme
HAVING count(*) > %(common_ratio)s * (SELECT n FROM n)

-- name: retrieval_text_arm
-- The full-text arm, BM25-style: the IDF of each query term within the scope (computed by the
-- caller), binary term frequency, length normalisation. It reads only chunks matching the
-- selective terms, at most text_rows of them. {tsv} is the bare column (GIN index, large
-- scopes) or an expression the index cannot serve (a scan of a small owner's rows). The
-- ranked chunks come with their text, refs, type and node version (read for those n_txt rows
-- only): find splits them into lines and sentences, and fetches the stored vectors of their
-- units, while the fused statement runs.
WITH qterms AS MATERIALIZED (
    SELECT array_agg(to_tsquery('english', t.term)) AS tqs, array_agg(t.idf) AS idfs
    FROM unnest(%(terms)s::text[], %(idfs)s::float8[]) AS t(term, idf)
),
matched AS (
    SELECT c.chunk_id, c.tsv
    FROM {{schema}}.context_chunks AS c
    WHERE {where} AND {tsv} @@ to_tsquery('english', %(tsq)s)
    LIMIT %(text_rows)s
),
ranked AS (
    SELECT m.chunk_id,
           (SELECT coalesce(sum(x.idf), 0)
            FROM qterms, unnest(qterms.tqs, qterms.idfs) AS x(tq, idf)
            WHERE m.tsv @@ x.tq)
           * (%(k1)s + 1) / (1 + %(k1)s * (1 - %(b)s + %(b)s * length(m.tsv) / %(avgdl)s))
           AS bm25
    FROM matched AS m
    ORDER BY bm25 DESC, m.chunk_id
    LIMIT %(n_txt)s
)
SELECT r.chunk_id, r.bm25, coalesce(c.text_content, '') AS text_content,
       ARRAY(SELECT jsonb_array_elements_text(c.source_refs)) AS source_refs,
       coalesce(c.context_type, '') AS context_type, coalesce(c.node_version, 0) AS node_version
FROM ranked AS r
JOIN {{schema}}.context_chunks AS c ON c.chunk_id = r.chunk_id
ORDER BY r.bm25 DESC, r.chunk_id

-- name: retrieval_text_arm_cold
-- The full-text arm of a small scope whose statistics are not cached yet, in one pass: the
-- scope's row count (an index-only count; above max_rows only the mean below is read and the
-- caller takes the large-scope path), its mean lexemes per chunk (on its first 2000 rows, as
-- retrieval_scope_stats), the document frequency of each query term (as
-- retrieval_term_df_scan), and the ranking of retrieval_text_arm with those IDFs (with the
-- ranked chunks' text, refs, type and node version as [text, refs, type, version] arrays, in
-- order). {scope} is
-- the account/owner filter, {where} the request's whole filter, both over ``c``.
WITH cnt AS MATERIALIZED (
    SELECT count(*) AS n FROM {{schema}}.context_chunks AS c WHERE {scope}
),
scoped AS MATERIALIZED (
    SELECT c.chunk_id, c.tsv, ({where}) AS wanted
    FROM {{schema}}.context_chunks AS c
    WHERE {scope} AND (SELECT n FROM cnt) <= %(max_rows)s
),
stats AS MATERIALIZED (
    SELECT (SELECT n FROM cnt) AS n,
           coalesce(
               (SELECT avg(length(s.tsv)) FROM (SELECT tsv FROM scoped LIMIT 2000) AS s),
               (SELECT avg(length(s.tsv))  -- a large scope: its first rows all the same
                FROM (SELECT c.tsv FROM {{schema}}.context_chunks AS c WHERE {scope}
                      LIMIT 2000) AS s),
               1)::float8 AS avgdl
),
q AS MATERIALIZED (
    SELECT t.term, t.ord, to_tsquery('english', t.term) AS tq
    FROM unnest(%(terms)s::text[]) WITH ORDINALITY AS t(term, ord)
    WHERE numnode(to_tsquery('english', t.term)) > 0
),
df AS MATERIALIZED (
    SELECT q.term, q.ord, q.tq, count(r.chunk_id) AS df
    FROM q LEFT JOIN scoped AS r ON r.tsv @@ q.tq
    GROUP BY q.term, q.ord, q.tq
),
idf AS MATERIALIZED (
    SELECT df.term, df.ord, df.tq, df.df,
           ln(1::float8 + ((greatest(stats.n, df.df) - df.df)::float8 + 0.5::float8)
                          / (df.df::float8 + 0.5::float8)) AS idf
    FROM df, stats
    WHERE df.df > 0
),
tsq AS MATERIALIZED (
    SELECT to_tsquery('english', string_agg(idf.term, ' | ' ORDER BY idf.ord)) AS tq FROM idf
),
matched AS (
    SELECT r.chunk_id, r.tsv
    FROM scoped AS r
    WHERE r.wanted AND r.tsv @@ (SELECT tq FROM tsq)
    LIMIT %(text_rows)s
),
ranked AS (
    SELECT m.chunk_id,
           (SELECT coalesce(sum(i.idf ORDER BY i.ord), 0) FROM idf AS i WHERE m.tsv @@ i.tq)
           * (%(k1)s + 1) / (1 + %(k1)s * (1 - %(b)s + %(b)s * length(m.tsv) / greatest(
               (SELECT avgdl FROM stats), 1.0))) AS bm25
    FROM matched AS m
    ORDER BY bm25 DESC, m.chunk_id
    LIMIT %(n_txt)s
)
SELECT stats.n, stats.avgdl,
       (SELECT array_agg(df.term ORDER BY df.ord) FROM df) AS terms,
       (SELECT array_agg(df.df ORDER BY df.ord) FROM df) AS dfs,
       (SELECT array_agg(r.chunk_id ORDER BY r.bm25 DESC, r.chunk_id) FROM ranked AS r) AS ids,
       (SELECT array_agg(r.bm25 ORDER BY r.bm25 DESC, r.chunk_id) FROM ranked AS r) AS scores,
       (SELECT jsonb_agg(jsonb_build_array(coalesce(c.text_content, ''), c.source_refs,
                                           coalesce(c.context_type, ''),
                                           coalesce(c.node_version, 0))
                         ORDER BY r.bm25 DESC, r.chunk_id)
        FROM ranked AS r JOIN {{schema}}.context_chunks AS c ON c.chunk_id = r.chunk_id)
       AS sources
FROM stats

-- name: retrieval_fused
-- The vector arm (cosine; exact scan or HNSW by the ORDER BY expression) fused with the
-- full-text arm's ranking (given as arrays, best first) by reciprocal rank fusion, with the
-- candidates' rows (the refs as a text array: no JSON to parse per row; a chunk of the text
-- arm, which returned them, comes without its text, refs and type); their vectors only
-- when asked (chunk_vectors), or for a chunk with no
-- stored unit vectors (a replica indexed before them, an archive's summary): the ranking
-- reads the stored unit vectors instead, and some 50 vectors are most of the rows' bytes,
-- but a chunk that is one line without them would be encoded at query time.
WITH vec AS MATERIALIZED (
    SELECT c.chunk_id, c.embedding <=> %(q)s::vector AS dist
    FROM {{schema}}.context_chunks AS c
    WHERE {where} AND c.embedding IS NOT NULL
    ORDER BY {vec_order}
    LIMIT %(n_vec)s
),
vec_ranked AS (
    SELECT chunk_id, dist, row_number() OVER (ORDER BY dist, chunk_id) AS r FROM vec
),
txt_ranked AS (
    SELECT t.chunk_id, t.bm25, t.r
    FROM unnest(%(txt_ids)s::text[], %(txt_scores)s::float8[]) WITH ORDINALITY
         AS t(chunk_id, bm25, r)
),
fused AS (
    SELECT coalesce(v.chunk_id, t.chunk_id) AS chunk_id, v.r AS vr, t.r AS tr,
           coalesce(t.bm25, 0) AS bm25,
           coalesce(%(wv)s / (%(k)s + v.r), 0) + coalesce(%(wt)s / (%(k)s + t.r), 0) AS rrf
    FROM vec_ranked AS v FULL OUTER JOIN txt_ranked AS t ON t.chunk_id = v.chunk_id
)
SELECT f.chunk_id, f.rrf, f.vr, f.tr, f.bm25,
       1 - (c.embedding <=> %(q)s::vector) AS sim,
       c.uri, c.level, c.chunk_index,
       CASE WHEN f.tr IS NULL THEN coalesce(c.text_content, '') END AS text_content,
       CASE WHEN f.tr IS NULL THEN coalesce(c.context_type, '') END AS context_type,
       coalesce(c.category, '') AS category,
       coalesce(c.owner_space, '') AS owner_space, coalesce(c.parent_uri, '') AS parent_uri,
       CASE WHEN f.tr IS NULL
            THEN coalesce(c.refs, ARRAY(SELECT jsonb_array_elements_text(c.source_refs)))
       END AS source_refs,
       coalesce(c.node_version, 0) AS node_version,
       -- the node's L0 line and dates, and whether the chunk has stored unit vectors, are on
       -- the chunk's row; a row written before they were (unit_count NULL) reads them where
       -- they are
       coalesce(CASE WHEN c.unit_count IS NULL
                     THEN (SELECT n.abstract_text FROM {{schema}}.context_nodes AS n
                           WHERE n.uri = c.uri AND n.account_id = c.account_id)
                     ELSE c.node_abstract END, '') AS abstract_text,
       CASE WHEN c.unit_count IS NULL
            THEN (SELECT n.metadata ->> 'event_time' FROM {{schema}}.context_nodes AS n
                  WHERE n.uri = c.uri AND n.account_id = c.account_id)
            ELSE c.event_time END AS event_time,
       CASE WHEN c.unit_count IS NULL
            THEN (SELECT n.metadata ->> 'observed_at' FROM {{schema}}.context_nodes AS n
                  WHERE n.uri = c.uri AND n.account_id = c.account_id)
            ELSE c.observed_at END AS observed_at,
       CASE WHEN %(chunk_vectors)s
                 OR coalesce(c.unit_count = 0,
                             NOT EXISTS (SELECT 1 FROM {{schema}}.chunk_units AS u
                                         WHERE u.chunk_id = c.chunk_id))
            THEN c.embedding END AS embedding
FROM fused AS f
JOIN {{schema}}.context_chunks AS c ON c.chunk_id = f.chunk_id
ORDER BY f.rrf DESC, f.chunk_id

-- name: retrieval_unit_vectors
-- The index-time vectors of the lines and sentences of the dense candidate chunks.
SELECT u.chunk_id, u.unit_key, u.embedding
FROM {{schema}}.chunk_units AS u
WHERE u.chunk_id = ANY(%(ids)s)

-- name: retrieval_term_df
-- Document frequency of each query term within a large scope, estimated on a sample of its
-- rows (scaled by the caller); terms that are stopwords for the english configuration are
-- left out. Exact counts would read every match of a common term.
WITH sample AS MATERIALIZED (
    SELECT c.tsv FROM {{schema}}.context_chunks AS c WHERE {where} LIMIT %(sample)s
),
q AS MATERIALIZED (
    SELECT t.term, to_tsquery('english', t.term) AS tq
    FROM unnest(%(terms)s::text[]) AS t(term)
    WHERE numnode(to_tsquery('english', t.term)) > 0
)
SELECT q.term, count(*) FILTER (WHERE sample.tsv @@ q.tq) AS df, count(*) AS n
FROM q CROSS JOIN sample
GROUP BY q.term

-- name: retrieval_term_df_scan
-- The same for a small scope: one pass over the owner's rows (a GIN lookup of a common term
-- would read its matches in every owner).
WITH scope AS MATERIALIZED (
    SELECT c.tsv FROM {{schema}}.context_chunks AS c WHERE {where}
),
q AS MATERIALIZED (
    SELECT t.term, to_tsquery('english', t.term) AS tq
    FROM unnest(%(terms)s::text[]) AS t(term)
    WHERE numnode(to_tsquery('english', t.term)) > 0
)
SELECT q.term, count(*) FILTER (WHERE scope.tsv @@ q.tq) AS df, count(*) AS n
FROM q CROSS JOIN scope
GROUP BY q.term

-- name: retrieval_exact_neighbours
-- Exact top-k by cosine (no index): the ground truth of recall tests and benchmarks.
SELECT c.chunk_id, 1 - (c.embedding <=> %(q)s::vector) AS sim
FROM {{schema}}.context_chunks AS c
WHERE {where} AND c.embedding IS NOT NULL
ORDER BY (c.embedding <=> %(q)s::vector) + 0, c.chunk_id
LIMIT %(n)s

-- name: retrieval_user_sessions
-- The user's sessions: archives that record the user (metadata.user_id), and the sessions the
-- user's own memories were derived from (their source refs are qualified session:message).
SELECT DISTINCT n.owner_space
FROM {{schema}}.context_nodes AS n
WHERE n.account_id = %(account)s AND n.context_type = 'session'
  AND n.metadata @> %(owner)s::jsonb
UNION
SELECT DISTINCT 'sessions/' || split_part(r.ref, ':', 1)
FROM {{schema}}.context_nodes AS n
CROSS JOIN LATERAL jsonb_array_elements_text(n.source_refs) AS r(ref)
WHERE n.account_id = %(account)s AND n.owner_space = %(space)s AND position(':' IN r.ref) > 1

-- name: retrieval_profile_nodes
-- The user's profile and preference memories (query-independent, so the section is a stable
-- prompt prefix across turns): newest first.
SELECT n.uri, n.category, n.abstract_text, n.source_refs, n.version
FROM {{schema}}.context_nodes AS n
WHERE n.account_id = %(account)s AND n.owner_space = %(space)s
  AND n.category = ANY(%(categories)s)
ORDER BY n.category = 'profile' DESC, n.updated_at DESC NULLS LAST, n.uri
LIMIT %(limit)s

-- name: retrieval_edges_among
-- The relation edges (either direction) between the seed nodes and the other candidates of a
-- find: the graph signal (graph distance, one hop).
SELECT from_uri, to_uri
FROM {{schema}}.relation_edges
WHERE account_id = %(account)s
  AND ((from_uri = ANY(%(seeds)s) AND to_uri = ANY(%(uris)s))
    OR (to_uri = ANY(%(seeds)s) AND from_uri = ANY(%(uris)s)))
