-- name: commits_of_owner
-- the latest commits of one account (and of one user and/or agent when given), newest first:
-- what a commit list shows, without the session's messages or the phase outputs
SELECT commit_id, account_id, user_id, agent_id, session_id, phase, status, extractors,
       timings, error, error_phase, result -> 'stats' AS stats, created_at, updated_at
FROM {{schema}}.commits
WHERE account_id = %(account_id)s
  AND (%(user_id)s::text IS NULL OR user_id = %(user_id)s::text)
  AND (%(agent_id)s::text IS NULL OR agent_id = %(agent_id)s::text)
ORDER BY created_at DESC, commit_id
LIMIT %(limit)s
