-- Read path (ctxpipe.retrieval). `{where}` / `{vec_order}` are composed with psycopg.sql from
-- fixed column names; every value is a bound parameter.

-- name: retrieval_scope_rows
-- Rows a filtered search may touch (index-only scan on (account_id, owner_space)): the plan
-- choice between an exact scan and HNSW.
SELECT count(*) FROM {{schema}}.context_chunks AS c WHERE {where}

-- name: retrieval_scope_avgdl
-- Mean document length (lexemes) of a sample of the scope, for BM25 length normalisation.
SELECT coalesce(avg(length(s.tsv)), 1)::float8
FROM (SELECT c.tsv FROM {{schema}}.context_chunks AS c WHERE {where} LIMIT 2000) AS s

-- name: retrieval_hybrid
-- Vector arm (cosine; exact scan or HNSW) + full-text arm (BM25-style: IDF of each
-- query term within the scope, binary term frequency, length normalisation), fused by
-- reciprocal rank fusion.
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
terms AS (
    SELECT t.term, to_tsquery('english', t.term) AS tq
    FROM unnest(%(terms)s::text[]) AS t(term)
),
idf AS (
    SELECT terms.term, terms.tq,
           ln(1 + (greatest(%(n_rows)s, d.df) - d.df + 0.5) / (d.df + 0.5)) AS idf
    FROM terms
    CROSS JOIN LATERAL (
        SELECT count(*)::float8 AS df
        FROM {{schema}}.context_chunks AS c
        WHERE {where} AND c.tsv @@ terms.tq
    ) AS d
    WHERE numnode(terms.tq) > 0
),
txt AS (
    SELECT c.chunk_id,
           sum(idf.idf * (%(k1)s + 1)
               / (1 + %(k1)s * (1 - %(b)s + %(b)s * length(c.tsv) / %(avgdl)s))) AS bm25
    FROM {{schema}}.context_chunks AS c
    JOIN idf ON c.tsv @@ idf.tq
    WHERE {where} AND c.tsv @@ to_tsquery('english', %(tsq)s)
    GROUP BY c.chunk_id
    ORDER BY bm25 DESC, c.chunk_id
    LIMIT %(n_txt)s
),
txt_ranked AS (
    SELECT chunk_id, bm25, row_number() OVER (ORDER BY bm25 DESC, chunk_id) AS r FROM txt
),
fused AS (
    SELECT coalesce(v.chunk_id, t.chunk_id) AS chunk_id, v.r AS vr, t.r AS tr,
           coalesce(t.bm25, 0) AS bm25,
           coalesce(%(wv)s / (%(k)s + v.r), 0) + coalesce(%(wt)s / (%(k)s + t.r), 0) AS rrf
    FROM vec_ranked AS v FULL OUTER JOIN txt_ranked AS t ON t.chunk_id = v.chunk_id
)
SELECT f.chunk_id, f.rrf, f.vr, f.tr, f.bm25,
       1 - (c.embedding <=> %(q)s::vector) AS sim,
       c.uri, c.level, c.chunk_index, c.text_content, c.context_type, c.category,
       c.owner_space, c.parent_uri, c.source_refs, c.node_version, n.abstract_text,
       c.embedding,
       (SELECT coalesce(json_object_agg(idf.term, idf.idf), '{{}}') FROM idf) AS idf
FROM fused AS f
JOIN {{schema}}.context_chunks AS c ON c.chunk_id = f.chunk_id
LEFT JOIN {{schema}}.context_nodes AS n ON n.uri = c.uri AND n.account_id = c.account_id
ORDER BY f.rrf DESC, f.chunk_id

-- name: retrieval_vector
-- The vector arm alone (a query without content words).
WITH vec AS MATERIALIZED (
    SELECT c.chunk_id, c.embedding <=> %(q)s::vector AS dist
    FROM {{schema}}.context_chunks AS c
    WHERE {where} AND c.embedding IS NOT NULL
    ORDER BY {vec_order}
    LIMIT %(n_vec)s
),
fused AS (
    SELECT chunk_id, row_number() OVER (ORDER BY dist, chunk_id) AS vr FROM vec
)
SELECT f.chunk_id, %(wv)s / (%(k)s + f.vr) AS rrf, f.vr, NULL::bigint AS tr, 0::float8 AS bm25,
       1 - (c.embedding <=> %(q)s::vector) AS sim,
       c.uri, c.level, c.chunk_index, c.text_content, c.context_type, c.category,
       c.owner_space, c.parent_uri, c.source_refs, c.node_version, n.abstract_text,
       c.embedding, '{{}}'::json AS idf
FROM fused AS f
JOIN {{schema}}.context_chunks AS c ON c.chunk_id = f.chunk_id
LEFT JOIN {{schema}}.context_nodes AS n ON n.uri = c.uri AND n.account_id = c.account_id
ORDER BY rrf DESC, f.chunk_id

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

-- name: retrieval_parents_with_children
-- Which of the given URIs have child nodes (directories worth drilling into).
SELECT DISTINCT n.parent_uri
FROM {{schema}}.context_nodes AS n
WHERE n.account_id = %(account)s AND n.parent_uri = ANY(%(uris)s)

-- name: retrieval_profile_nodes
-- The user's profile and preference memories (query-independent, so the section is a stable
-- prompt prefix across turns): newest first.
SELECT n.uri, n.category, n.abstract_text, n.source_refs, n.version
FROM {{schema}}.context_nodes AS n
WHERE n.account_id = %(account)s AND n.owner_space = %(space)s
  AND n.category = ANY(%(categories)s)
ORDER BY n.category = 'profile' DESC, n.updated_at DESC NULLS LAST, n.uri
LIMIT %(limit)s
