-- name: ledger_create
-- a new commit is recorded only while fewer than %(max_pending)s commits are in flight
-- (0: no cap); the count stops at the cap, so it costs at most that many index entries
INSERT INTO {{schema}}.commits
    (commit_id, account_id, user_id, agent_id, session_id, phase, request)
SELECT %(commit_id)s, %(account_id)s, %(user_id)s, %(agent_id)s, %(session_id)s, 'enqueued',
       %(request)s
WHERE %(max_pending)s <= 0
   OR (SELECT count(*) FROM (
           SELECT 1 FROM {{schema}}.commits
           WHERE phase NOT IN ('registered', 'failed')
           LIMIT %(max_pending)s
       ) AS in_flight) < %(max_pending)s
ON CONFLICT (commit_id) DO NOTHING
RETURNING commit_id

-- name: ledger_get
SELECT commit_id, account_id, user_id, agent_id, session_id, phase, status, extractors,
       timings, attempts, error, error_phase, request, result, created_at, updated_at
FROM {{schema}}.commits
WHERE commit_id = %(commit_id)s

-- name: ledger_advance
UPDATE {{schema}}.commits
SET phase = %(phase)s,
    status = COALESCE(%(status)s, status),
    extractors = extractors || %(extractors)s,
    timings = timings || %(timings)s,
    result = COALESCE(%(result)s, result),
    -- progress to a later phase resets the sweeper's re-drive count
    attempts = CASE WHEN phase <> %(phase)s THEN attempts - 'sweep' ELSE attempts END,
    updated_at = now()
WHERE commit_id = %(commit_id)s
  AND phase <> 'failed'
  AND array_position(%(order)s::text[], phase::text) <= array_position(%(order)s::text[], %(phase)s::text)

-- name: ledger_fail
UPDATE {{schema}}.commits
SET phase = 'failed', status = 'failed', error = %(error)s, error_phase = %(error_phase)s,
    updated_at = now()
WHERE commit_id = %(commit_id)s AND phase <> 'registered'

-- name: ledger_bump_attempt
UPDATE {{schema}}.commits
SET attempts = jsonb_set(attempts, ARRAY[%(key)s::text],
                         to_jsonb(COALESCE((attempts ->> %(key)s)::int, 0) + 1)),
    updated_at = updated_at
WHERE commit_id = %(commit_id)s
RETURNING (attempts ->> %(key)s)::int

-- name: ledger_touch
UPDATE {{schema}}.commits SET updated_at = now() WHERE commit_id = %(commit_id)s

-- name: ledger_stuck
SELECT commit_id, phase, attempts
FROM {{schema}}.commits
WHERE phase NOT IN ('registered', 'failed')
  AND updated_at < now() - make_interval(secs => %(older_than_s)s)
ORDER BY updated_at
LIMIT %(limit)s

-- name: ledger_accepted_before
-- commits in flight that were accepted more than %(age_s)s seconds ago
SELECT commit_id, phase, attempts
FROM {{schema}}.commits
WHERE phase NOT IN ('registered', 'failed')
  AND created_at < now() - make_interval(secs => %(age_s)s)
ORDER BY created_at
LIMIT %(limit)s

-- name: ledger_counts
SELECT phase, count(*) FROM {{schema}}.commits GROUP BY phase

-- name: ledger_backlog
-- commits accepted but not finished, the age of the oldest one (seconds), and how many
-- finished (registered or failed) in the last %(window_s)s seconds: the drain rate
SELECT (SELECT count(*) FROM {{schema}}.commits
        WHERE phase NOT IN ('registered', 'failed')),
       (SELECT EXTRACT(EPOCH FROM now() - min(created_at))::float8 FROM {{schema}}.commits
        WHERE phase NOT IN ('registered', 'failed')),
       (SELECT count(*) FROM {{schema}}.commits
        WHERE phase IN ('registered', 'failed')
          AND updated_at > now() - make_interval(secs => %(window_s)s))

-- name: ledger_llm_cost
-- what finished commits cost in LLM calls and tokens, per message committed
SELECT count(*),
       COALESCE(sum(jsonb_array_length(request -> 'messages')), 0)::bigint,
       COALESCE(sum((result -> 'stats' ->> 'llm_calls')::bigint), 0)::bigint,
       COALESCE(sum((result -> 'stats' ->> 'llm_prompt_tokens')::bigint), 0)::bigint,
       COALESCE(sum((result -> 'stats' ->> 'llm_completion_tokens')::bigint), 0)::bigint
FROM {{schema}}.commits
WHERE phase = 'registered' AND result IS NOT NULL

-- name: ledger_llm_cost_by_phase
-- the same sums per phase of the commits (archive, extract_<name>, plan, write)
SELECT p.key,
       COALESCE(sum((p.value ->> 'calls')::bigint), 0)::bigint,
       COALESCE(sum((p.value ->> 'prompt_tokens')::bigint), 0)::bigint,
       COALESCE(sum((p.value ->> 'completion_tokens')::bigint), 0)::bigint,
       COALESCE(sum((p.value ->> 'retries')::bigint), 0)::bigint
FROM {{schema}}.commits AS c,
     jsonb_each(COALESCE(c.result -> 'stats' -> 'llm_by_phase', '{}'::jsonb)) AS p
WHERE c.phase = 'registered' AND c.result IS NOT NULL
GROUP BY p.key
ORDER BY p.key

-- name: ledger_recent
SELECT commit_id, account_id, user_id, session_id, phase, status, error, created_at, updated_at
FROM {{schema}}.commits
ORDER BY created_at DESC
LIMIT %(limit)s

-- name: output_get
SELECT payload FROM {{schema}}.commit_outputs
WHERE commit_id = %(commit_id)s AND phase_key = %(phase_key)s

-- name: output_prefix
SELECT phase_key, payload FROM {{schema}}.commit_outputs
WHERE commit_id = %(commit_id)s AND phase_key LIKE %(prefix)s
ORDER BY phase_key

-- name: output_count_prefix
SELECT count(*) FROM {{schema}}.commit_outputs
WHERE commit_id = %(commit_id)s AND phase_key LIKE %(prefix)s

-- name: ledger_state
SELECT c.request, c.created_at, c.phase, o.phase_key, o.payload
FROM {{schema}}.commits AS c
LEFT JOIN {{schema}}.commit_outputs AS o
       ON o.commit_id = c.commit_id AND o.phase_key = ANY(%(keys)s)
WHERE c.commit_id = %(commit_id)s

-- name: output_save_get
WITH ins AS (
    INSERT INTO {{schema}}.commit_outputs (commit_id, phase_key, payload)
    VALUES (%(commit_id)s, %(phase_key)s, %(payload)s)
    ON CONFLICT (commit_id, phase_key) DO NOTHING
    RETURNING payload
)
SELECT payload FROM ins
UNION ALL
SELECT payload FROM {{schema}}.commit_outputs
WHERE commit_id = %(commit_id)s AND phase_key = %(phase_key)s
LIMIT 1
