-- Recall statistics and context snapshots of the read path (sql/005_read_path.sql).

-- name: recall_record
-- One recall per (account, uri) of a result list; arrays are aligned.
INSERT INTO {{schema}}.recall_stats AS r
    (account_id, uri, recall_count, total_score, last_score, first_recalled_at, last_recalled_at)
SELECT %(account)s, x.uri, 1, x.score, x.score, now(), now()
FROM unnest(%(uris)s::text[], %(scores)s::float8[]) AS x(uri, score)
ON CONFLICT (account_id, uri) DO UPDATE
SET recall_count = r.recall_count + 1,
    total_score = r.total_score + excluded.total_score,
    last_score = excluded.last_score,
    last_recalled_at = excluded.last_recalled_at

-- name: recall_get
SELECT uri, recall_count, total_score, last_score, first_recalled_at, last_recalled_at
FROM {{schema}}.recall_stats
WHERE account_id = %(account)s AND uri = ANY(%(uris)s)
ORDER BY uri

-- name: recall_lowest_value
-- The least valuable recalled nodes of an account (retention candidates), by their recall value.
SELECT uri, recall_count, total_score, last_score, first_recalled_at, last_recalled_at,
       ln(1 + recall_count) * %(w_recall)s
       + (total_score / greatest(recall_count, 1)) * %(w_score)s
       + (1.0 / (1.0 + extract(epoch FROM (now() - last_recalled_at)) / 86400.0)) * %(w_recency)s
       AS value
FROM {{schema}}.recall_stats
WHERE account_id = %(account)s
ORDER BY value ASC, uri
LIMIT %(limit)s

-- name: snapshot_get
SELECT snapshot FROM {{schema}}.context_snapshots
WHERE account_id = %(account)s AND user_id = %(user)s AND session_id = %(session)s

-- name: snapshot_put
INSERT INTO {{schema}}.context_snapshots (account_id, user_id, session_id, snapshot, updated_at)
VALUES (%(account)s, %(user)s, %(session)s, %(snapshot)s, now())
ON CONFLICT (account_id, user_id, session_id) DO UPDATE
SET snapshot = excluded.snapshot, updated_at = now()
