-- name: outbox_append
INSERT INTO {{schema}}.outbox_events
    (event_id, event_type, uri, account_id, payload, status, max_retries, next_attempt_at)
VALUES
    (%(event_id)s, %(event_type)s, %(uri)s, %(account_id)s, %(payload)s, 'pending',
     %(max_retries)s, COALESCE(%(now)s::timestamptz, now()))
ON CONFLICT (event_id) DO NOTHING
RETURNING event_id
