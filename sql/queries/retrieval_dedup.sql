-- name: chunks_exist_for_owner
SELECT EXISTS (
    SELECT 1 FROM {{schema}}.context_chunks
    WHERE account_id = %(account_id)s AND owner_space = %(owner_space)s
      AND category = %(category)s AND level = 0 AND embedding IS NOT NULL
)

-- name: outbox_unindexed_uris
-- Nodes under a URI prefix written to the FS whose upsert the index worker has not applied
-- yet (the replica lags the FS): the dedup prefilter compares a candidate with them too.
SELECT DISTINCT uri FROM {{schema}}.outbox_events
WHERE account_id = %(account_id)s
  AND status IN ('pending', 'claimed', 'failed')
  AND event_type = 'UPSERT_CONTEXT'
  AND left(uri, length(%(prefix)s)) = %(prefix)s
ORDER BY uri
LIMIT %(limit)s
