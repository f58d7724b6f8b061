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

-- name: ledger_state
SELECT c.request, c.created_at, c.phase, NULL::int AS deliveries, o.phase_key, o.payload
FROM {{schema}}.commits AS c
LEFT JOIN {{schema}}.commit_outputs AS o
       ON o.commit_id = c.commit_id AND o.phase_key = ANY(%(keys)s)
WHERE c.commit_id = %(commit_id)s

-- name: ledger_state_deliver
-- ledger_state that also counts the delivery of the task reading it, in the same statement,
-- while its step has not finished (no output %(done)s yet): attempts[%(delivery)s] + 1, the
-- key naming the task and its retry number ("plan#0"). A finished step's redelivery writes
-- nothing. updated_at stays: a task that keeps losing its worker is no progress.
WITH d AS (
    UPDATE {{schema}}.commits
    SET attempts = jsonb_set(attempts, ARRAY[%(delivery)s::text],
                             to_jsonb(COALESCE((attempts ->> %(delivery)s)::int, 0) + 1))
    WHERE commit_id = %(commit_id)s
      AND NOT EXISTS (SELECT 1 FROM {{schema}}.commit_outputs
                      WHERE commit_id = %(commit_id)s AND phase_key = %(done)s)
    RETURNING (attempts ->> %(delivery)s)::int AS deliveries
)
SELECT c.request, c.created_at, c.phase, (SELECT deliveries FROM d), o.phase_key, o.payload
FROM {{schema}}.commits AS c
LEFT JOIN {{schema}}.commit_outputs AS o
       ON o.commit_id = c.commit_id AND o.phase_key = ANY(%(keys)s)
WHERE c.commit_id = %(commit_id)s

-- name: ledger_complete
-- One statement, so one round trip and one transaction: store a phase output (the first
-- writer wins) and advance the commit as ledger_advance does. With %(extracted_when)s an
-- extractor's report also moves the commit on to 'extracted' once that many extractors have
-- reported. They are counted on the commit row, which the UPDATE locks and re-reads, so two
-- extractors finishing at once never both miss it (a count of commit_outputs would: both
-- statements' snapshots may predate the other's insert). NULL when a concurrent run of the
-- same step inserted the output after this statement's snapshot (read it with output_get).
WITH ins AS (
    INSERT INTO {{schema}}.commit_outputs (commit_id, phase_key, payload)
    VALUES (%(commit_id)s, %(phase_key)s, %(payload)s)
    ON CONFLICT (commit_id, phase_key) DO NOTHING
    RETURNING payload
), stored AS (
    SELECT payload FROM ins
    UNION ALL
    SELECT payload FROM {{schema}}.commit_outputs
    WHERE commit_id = %(commit_id)s AND phase_key = %(phase_key)s
    LIMIT 1
), adv AS (
    UPDATE {{schema}}.commits AS c
    SET phase = CASE WHEN %(extracted_when)s::int IS NOT NULL
                          AND (SELECT count(*) FROM jsonb_object_keys(
                                   c.extractors || %(extractors)s))
                              >= %(extracted_when)s::int
                     THEN 'extracted' ELSE %(phase)s::text END,
        status = COALESCE(%(status)s, c.status),
        extractors = c.extractors || %(extractors)s,
        timings = c.timings || %(timings)s,
        result = CASE WHEN %(with_result)s THEN COALESCE((SELECT payload FROM stored), c.result)
                      ELSE c.result END,
        -- progress to a later phase resets the sweeper's re-drive count
        attempts = CASE WHEN c.phase::text <> (
                            CASE WHEN %(extracted_when)s::int IS NOT NULL
                                      AND (SELECT count(*) FROM jsonb_object_keys(
                                               c.extractors || %(extractors)s))
                                          >= %(extracted_when)s::int
                                 THEN 'extracted' ELSE %(phase)s::text END)
                        THEN c.attempts - 'sweep' ELSE c.attempts END,
        updated_at = now()
    WHERE c.commit_id = %(commit_id)s
      AND c.phase <> 'failed'
      AND array_position(%(order)s::text[], c.phase::text)
          <= array_position(%(order)s::text[], %(phase)s::text)
    RETURNING 1
)
SELECT (SELECT payload FROM stored)

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
