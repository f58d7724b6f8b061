-- The claim side of the outbox, used by the index workers.
-- An event is due when it is pending, or failed with its backoff elapsed, or claimed by a
-- worker whose lease expired (that worker is presumed lost: the attempt counts as a failure;
-- the last attempt's expiry is left to outbox_reclaim, which marks it dead).
-- "Now" is the store's clock, %(now)s, when it has one (tests step it instead of sleeping);
-- NULL means the database's now(): one clock for every worker.

-- name: outbox_claim
WITH clock AS (SELECT COALESCE(%(now)s::timestamptz, now()) AS now),
due AS (
    SELECT event_id
    FROM {{schema}}.outbox_events, clock
    WHERE (status IN ('pending', 'failed') AND next_attempt_at <= clock.now)
       OR (status = 'claimed' AND lease_until < clock.now AND retry_count + 1 < max_retries)
    ORDER BY next_attempt_at, created_at, event_id
    LIMIT %(limit)s
    FOR UPDATE OF outbox_events SKIP LOCKED
)
UPDATE {{schema}}.outbox_events AS e
SET status = 'claimed',
    worker_id = %(worker_id)s,
    lease_until = clock.now + make_interval(secs => %(lease_s)s),
    retry_count = e.retry_count + CASE WHEN e.status = 'claimed' THEN 1 ELSE 0 END,
    updated_at = clock.now
FROM due, clock
WHERE e.event_id = due.event_id
RETURNING e.event_id, e.event_type, e.uri, e.payload, e.status, e.retry_count, e.max_retries,
          e.worker_id, e.lease_until, e.next_attempt_at, e.created_at, e.updated_at,
          e.error_message

-- name: outbox_done
WITH clock AS (SELECT COALESCE(%(now)s::timestamptz, now()) AS now)
UPDATE {{schema}}.outbox_events
SET status = 'done', done_at = clock.now, lease_until = NULL, error_message = NULL,
    updated_at = clock.now
FROM clock
WHERE event_id = ANY(%(event_ids)s)
  -- the work is done: also when the lease ran out meanwhile and the event went back to
  -- pending/failed (a slow batch must not end `dead`); never over another worker's live claim
  AND status IN ('claimed', 'pending', 'failed')
  AND (%(worker_id)s::text IS NULL OR status <> 'claimed' OR worker_id = %(worker_id)s::text)
RETURNING event_id

-- name: outbox_fail
WITH clock AS (SELECT COALESCE(%(now)s::timestamptz, now()) AS now)
UPDATE {{schema}}.outbox_events
SET retry_count = retry_count + 1,
    status = CASE WHEN NOT %(retryable)s OR retry_count + 1 >= max_retries
                  THEN 'dead' ELSE 'failed' END,
    next_attempt_at = clock.now + make_interval(
        secs => LEAST(%(backoff_base_s)s * power(2, retry_count), %(backoff_max_s)s)),
    error_message = %(error)s,
    lease_until = NULL,
    updated_at = clock.now
FROM clock
WHERE event_id = %(event_id)s
  AND status = 'claimed'
  AND (%(worker_id)s::text IS NULL OR worker_id = %(worker_id)s::text)
RETURNING status, retry_count, next_attempt_at

-- name: outbox_reclaim
WITH clock AS (SELECT COALESCE(%(now)s::timestamptz, now()) AS now)
UPDATE {{schema}}.outbox_events
SET retry_count = retry_count + 1,
    status = CASE WHEN retry_count + 1 >= max_retries THEN 'dead' ELSE 'pending' END,
    error_message = 'lease expired: worker ' || COALESCE(worker_id, '?') || ' was lost',
    lease_until = NULL,
    next_attempt_at = clock.now,
    updated_at = clock.now
FROM clock
WHERE status = 'claimed' AND lease_until < clock.now
RETURNING event_id, status

-- name: outbox_requeue
WITH clock AS (SELECT COALESCE(%(now)s::timestamptz, now()) AS now)
UPDATE {{schema}}.outbox_events
SET status = 'pending', retry_count = 0, next_attempt_at = clock.now, lease_until = NULL,
    worker_id = NULL, updated_at = clock.now
FROM clock
WHERE status = 'dead' AND (%(all)s OR event_id = ANY(%(event_ids)s))
RETURNING event_id

-- name: outbox_append_rearm
INSERT INTO {{schema}}.outbox_events
    (event_id, event_type, uri, account_id, payload, status, max_retries, next_attempt_at)
VALUES
    (%(event_id)s, %(event_type)s, %(uri)s, %(account_id)s, %(payload)s, 'pending',
     %(max_retries)s, COALESCE(%(now)s::timestamptz, now()))
ON CONFLICT (event_id) DO UPDATE
SET status = 'pending', retry_count = 0, next_attempt_at = EXCLUDED.next_attempt_at,
    lease_until = NULL, worker_id = NULL, error_message = NULL, done_at = NULL,
    payload = EXCLUDED.payload, updated_at = EXCLUDED.next_attempt_at
WHERE {{schema}}.outbox_events.status = 'done'
RETURNING event_id

-- name: outbox_list
SELECT event_id, event_type, uri, payload, status, retry_count, max_retries, worker_id,
       lease_until, next_attempt_at, created_at, updated_at, error_message
FROM {{schema}}.outbox_events
WHERE status = ANY(%(statuses)s)
ORDER BY created_at, event_id
LIMIT %(limit)s

-- name: outbox_get
SELECT event_id, event_type, uri, payload, status, retry_count, max_retries, worker_id,
       lease_until, next_attempt_at, created_at, updated_at, error_message
FROM {{schema}}.outbox_events
WHERE event_id = %(event_id)s

-- name: outbox_counts
SELECT status, count(*) FROM {{schema}}.outbox_events GROUP BY status

-- name: outbox_oldest_pending
SELECT EXTRACT(EPOCH FROM (now() - min(created_at)))::float8
FROM {{schema}}.outbox_events
WHERE status IN ('pending', 'failed')

-- name: outbox_counts_by_type
SELECT status, event_type, count(*) FROM {{schema}}.outbox_events
GROUP BY status, event_type ORDER BY status, event_type
