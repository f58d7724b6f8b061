-- name: chunks_exist_for_owner
SELECT EXISTS (
    SELECT 1 FROM {{schema}}.context_chunks
    WHERE account_id = %(account_id)s AND owner_space = %(owner_space)s
      AND category = %(category)s AND level = 0 AND embedding IS NOT NULL
)
