-- The latest commits of one account (or of one of its users and/or agents), newest first: what
-- a commit list shows, without the session's messages or the phase outputs. One query per
-- filter shape, chosen by the caller (`ctxpipe.storage.commit_list`), never one query with
-- optional filters such as `(%(user_id)s IS NULL OR user_id = %(user_id)s)`: once a statement
-- is prepared on the server (psycopg does after 5 executions on a connection), PostgreSQL may
-- run a generic plan, where such a predicate cannot be an index condition and the list falls
-- back to the account's rows, filtered and sorted. Each query below seeks its index of migration
-- 010 by its filters (but the agent of a user's list, checked on that user's rows), and the
-- index's columns end in the ORDER BY, so the scan stops at the LIMIT under either plan.

-- name: commits_of_account
-- idx_commits_account_recent
SELECT commit_id, account_id, user_id, agent_id, session_id, phase, status, extractors,
       timings, error, error_phase, result -> 'stats' AS stats, created_at, updated_at
FROM {{schema}}.commits
WHERE account_id = %(account_id)s
ORDER BY created_at DESC, commit_id
LIMIT %(limit)s

-- name: commits_of_user
-- idx_commits_user_recent
SELECT commit_id, account_id, user_id, agent_id, session_id, phase, status, extractors,
       timings, error, error_phase, result -> 'stats' AS stats, created_at, updated_at
FROM {{schema}}.commits
WHERE account_id = %(account_id)s AND user_id = %(user_id)s
ORDER BY created_at DESC, commit_id
LIMIT %(limit)s

-- name: commits_of_agent
-- idx_commits_agent_recent
SELECT commit_id, account_id, user_id, agent_id, session_id, phase, status, extractors,
       timings, error, error_phase, result -> 'stats' AS stats, created_at, updated_at
FROM {{schema}}.commits
WHERE account_id = %(account_id)s AND agent_id = %(agent_id)s
ORDER BY created_at DESC, commit_id
LIMIT %(limit)s

-- name: commits_of_user_agent
-- idx_commits_user_recent (a user has few commits: the agent is filtered on those)
SELECT commit_id, account_id, user_id, agent_id, session_id, phase, status, extractors,
       timings, error, error_phase, result -> 'stats' AS stats, created_at, updated_at
FROM {{schema}}.commits
WHERE account_id = %(account_id)s AND user_id = %(user_id)s AND agent_id = %(agent_id)s
ORDER BY created_at DESC, commit_id
LIMIT %(limit)s
