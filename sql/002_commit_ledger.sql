-- 002_commit_ledger: one row per commit_session call, updated as the Celery chain advances.
-- Placeholders: {{schema}}.

CREATE TABLE {{schema}}.commits (
    commit_id    varchar(128)  PRIMARY KEY,
    account_id   varchar(64)   NOT NULL DEFAULT '',
    user_id      varchar(128)  NOT NULL DEFAULT '',
    agent_id     varchar(128)  NOT NULL DEFAULT '',
    session_id   varchar(128)  NOT NULL DEFAULT '',
    phase        varchar(16)   NOT NULL,
    status       varchar(16),
    extractors   jsonb         NOT NULL DEFAULT '{}',
    timings      jsonb         NOT NULL DEFAULT '{}',
    attempts     jsonb         NOT NULL DEFAULT '{}',
    error        text,
    error_phase  varchar(16),
    request      jsonb         NOT NULL,
    result       jsonb,
    created_at   timestamptz   NOT NULL DEFAULT now(),
    updated_at   timestamptz   NOT NULL DEFAULT now()
);

CREATE INDEX idx_commits_phase_updated ON {{schema}}.commits (phase, updated_at);
CREATE INDEX idx_commits_session ON {{schema}}.commits (account_id, session_id);
