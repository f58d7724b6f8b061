-- Queries of ctxpipe.sessions.pg_store (placeholder {{schema}}): open sessions, their
-- appended messages and the commits cut from them.

-- name: open_session_open
-- the session's row, created on its first append, locked like FOR UPDATE (one round trip)
INSERT INTO {{schema}}.open_sessions (account_id, session_id, user_id, agent_id)
VALUES (%(account)s, %(session)s, %(user)s, %(agent)s)
ON CONFLICT (account_id, session_id) DO UPDATE SET account_id = EXCLUDED.account_id
RETURNING user_id, agent_id, next_seq, cuts, open_messages, open_tokens, created_at

-- name: open_session_lock
SELECT user_id, agent_id, next_seq, cuts, open_messages, open_tokens, created_at
FROM {{schema}}.open_sessions
WHERE account_id = %(account)s AND session_id = %(session)s
FOR UPDATE

-- name: open_session_lock_idle
SELECT user_id, agent_id, next_seq, cuts, open_messages, open_tokens, created_at
FROM {{schema}}.open_sessions
WHERE account_id = %(account)s AND session_id = %(session)s
  AND open_messages > 0 AND last_append_at <= now() - make_interval(secs => %(idle_s)s)
FOR UPDATE SKIP LOCKED

-- name: open_session_known_ids
SELECT message_id FROM {{schema}}.open_messages
WHERE account_id = %(account)s AND session_id = %(session)s AND message_id = ANY(%(ids)s)

-- name: open_message_insert
INSERT INTO {{schema}}.open_messages
    (account_id, session_id, message_id, seq, role, name, content, injected, original_chars,
     created_at, tokens)
VALUES (%(account)s, %(session)s, %(message_id)s, %(seq)s, %(role)s, %(name)s, %(content)s,
        %(injected)s, %(original_chars)s, %(created_at)s, %(tokens)s)
ON CONFLICT (account_id, session_id, message_id) DO NOTHING

-- name: open_messages_mark
UPDATE {{schema}}.open_messages SET commit_id = %(commit_id)s
WHERE account_id = %(account)s AND session_id = %(session)s AND commit_id IS NULL
  AND seq <= %(upto)s

-- name: open_session_cut_insert
INSERT INTO {{schema}}.open_session_cuts
    (commit_id, account_id, session_id, user_id, agent_id, reason, messages)
VALUES (%(commit_id)s, %(account)s, %(session)s, %(user)s, %(agent)s, %(reason)s, %(messages)s)

-- name: open_session_update
UPDATE {{schema}}.open_sessions
SET next_seq = %(next_seq)s, cuts = %(cuts)s, open_messages = %(open_messages)s,
    open_tokens = %(open_tokens)s,
    last_append_at = CASE WHEN %(touched)s THEN now() ELSE last_append_at END
WHERE account_id = %(account)s AND session_id = %(session)s

-- name: open_sessions_idle
SELECT account_id, session_id FROM {{schema}}.open_sessions
WHERE open_messages > 0 AND last_append_at <= now() - make_interval(secs => %(idle_s)s)
ORDER BY last_append_at
LIMIT %(limit)s

-- name: open_session_cut_get
SELECT commit_id, account_id, session_id, user_id, agent_id, reason, messages, submitted_at
FROM {{schema}}.open_session_cuts
WHERE commit_id = %(commit_id)s

-- name: open_session_cut_messages
SELECT message_id, role, name, content, injected, original_chars, created_at
FROM {{schema}}.open_messages
WHERE commit_id = %(commit_id)s
ORDER BY seq

-- name: open_session_cuts_unsubmitted
SELECT commit_id FROM {{schema}}.open_session_cuts
WHERE submitted_at IS NULL AND created_at <= now() - make_interval(secs => %(older_than_s)s)
ORDER BY created_at
LIMIT %(limit)s

-- name: open_session_cut_submitted
UPDATE {{schema}}.open_session_cuts SET submitted_at = now()
WHERE commit_id = %(commit_id)s AND submitted_at IS NULL

-- name: open_session_state
SELECT user_id, agent_id, cuts, open_messages, open_tokens
FROM {{schema}}.open_sessions
WHERE account_id = %(account)s AND session_id = %(session)s

-- name: erase_open_session_cuts
-- (the right to erasure, ctxpipe.storage.erasure_store) the user's cuts
DELETE FROM {{schema}}.open_session_cuts
WHERE account_id = %(account)s AND (user_id = %(user)s OR session_id = ANY(%(sessions)s))

-- name: erase_open_sessions
-- the user's open sessions; their appended messages go by cascade
DELETE FROM {{schema}}.open_sessions
WHERE account_id = %(account)s AND (user_id = %(user)s OR session_id = ANY(%(sessions)s))
