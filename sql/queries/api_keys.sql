-- Queries of ctxpipe.api.keys (placeholder {{schema}}).

-- name: api_key_insert
INSERT INTO {{schema}}.api_keys
    (key_id, secret_hash, account_id, user_id, agent_id, scopes, name)
VALUES (%(key_id)s, %(secret_hash)s, %(account_id)s, %(user_id)s, %(agent_id)s, %(scopes)s,
        %(name)s)
RETURNING created_at

-- name: api_key_get
SELECT key_id, secret_hash, account_id, user_id, agent_id, scopes, name, created_at,
       revoked_at, last_used_at
FROM {{schema}}.api_keys
WHERE key_id = %(key_id)s

-- name: api_key_list
SELECT key_id, account_id, user_id, agent_id, scopes, name, created_at, revoked_at,
       last_used_at
FROM {{schema}}.api_keys
WHERE (%(account_id)s::text IS NULL OR account_id = %(account_id)s)
  AND (%(all)s OR revoked_at IS NULL)
ORDER BY account_id, created_at, key_id

-- name: api_key_revoke
UPDATE {{schema}}.api_keys SET revoked_at = now()
WHERE key_id = %(key_id)s AND revoked_at IS NULL
RETURNING key_id

-- name: api_key_touch
UPDATE {{schema}}.api_keys SET last_used_at = now()
WHERE key_id = %(key_id)s
  AND (last_used_at IS NULL OR last_used_at < now() - interval '60 seconds')
