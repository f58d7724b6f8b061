-- 008_commit_backlog: the commits in flight (accepted, not registered or failed), oldest first.
-- Back-pressure counts them at every submit and status reports the oldest one's age; the
-- partial index keeps both proportional to the backlog, not to the whole ledger.
-- Placeholders: {{schema}}.

CREATE INDEX idx_commits_in_flight ON {{schema}}.commits (created_at)
    WHERE phase NOT IN ('registered', 'failed');
