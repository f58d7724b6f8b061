-- name: erase_nodes
-- replica rows of removed or rewritten nodes (chunks and units go with them by cascade)
DELETE FROM {{schema}}.context_nodes
WHERE account_id = %(account)s AND (owner_space = %(space)s OR uri = ANY(%(uris)s))

-- name: erase_edges
DELETE FROM {{schema}}.relation_edges
WHERE account_id = %(account)s
  AND (from_uri = ANY(%(uris)s) OR to_uri = ANY(%(uris)s)
       OR from_uri LIKE %(prefix)s OR to_uri LIKE %(prefix)s)

-- name: erase_outbox
DELETE FROM {{schema}}.outbox_events
WHERE uri = ANY(%(uris)s) OR uri LIKE %(prefix)s

-- name: erase_commits
-- the ledger rows of the user's commits (their phase outputs go by cascade)
DELETE FROM {{schema}}.commits
WHERE account_id = %(account)s AND (user_id = %(user)s OR session_id = ANY(%(sessions)s))

-- name: erase_recall_stats
DELETE FROM {{schema}}.recall_stats
WHERE account_id = %(account)s AND (uri = ANY(%(uris)s) OR uri LIKE %(prefix)s)

-- name: erase_snapshots
DELETE FROM {{schema}}.context_snapshots
WHERE account_id = %(account)s AND (user_id = %(user)s OR session_id = ANY(%(sessions)s))

-- name: erase_archives
DELETE FROM {{schema}}.session_archives
WHERE account_id = %(account)s AND session_id = ANY(%(sessions)s)

-- name: erase_user_sessions
-- sessions the ledger knows the user committed to
SELECT DISTINCT session_id FROM {{schema}}.commits
WHERE account_id = %(account)s AND user_id = %(user)s
