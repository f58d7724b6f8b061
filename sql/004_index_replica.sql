-- 004_index_replica: bookkeeping of the index workers and of repair runs (ctxpipe.index).
-- Placeholders: {{schema}}.

-- What a repair run compared and queued, besides the missing/stale/orphaned counts of 001.
ALTER TABLE {{schema}}.repair_runs
    ADD COLUMN relations      integer NOT NULL DEFAULT 0,
    ADD COLUMN compared       integer NOT NULL DEFAULT 0,
    ADD COLUMN in_flight      integer NOT NULL DEFAULT 0,
    ADD COLUMN events_queued  integer NOT NULL DEFAULT 0;

-- `ctxpipe status`: events per status and the oldest waiting one without reading the heap of
-- the (ever growing) done events.
CREATE INDEX idx_outbox_status_created ON {{schema}}.outbox_events (status, created_at);
