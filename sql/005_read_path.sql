-- 005_read_path: state of the read path (ctxpipe.retrieval).
-- Placeholders: {{schema}}.

-- One row per (account, node) ever returned by find/search/build_context:
-- how often, how well (sum of similarity scores) and when it was last recalled. Retention
-- ranks memories by value = ln(1+count)*w_r + avg_score*w_s + recency*w_t.
-- Not tied to context_nodes: the replica can be rebuilt without losing the statistics.
CREATE TABLE {{schema}}.recall_stats (
    account_id         varchar(64)       NOT NULL,
    uri                varchar(512)      NOT NULL,
    recall_count       bigint            NOT NULL DEFAULT 0,
    total_score        double precision  NOT NULL DEFAULT 0,
    last_score         real,
    first_recalled_at  timestamptz       NOT NULL DEFAULT now(),
    last_recalled_at   timestamptz       NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, uri)
);

CREATE INDEX idx_recall_stats_last ON {{schema}}.recall_stats (account_id, last_recalled_at);

-- The last context built for a session (its ContextSnapshot), so the next build of the
-- same session can be incremental, also from another process.
CREATE TABLE {{schema}}.context_snapshots (
    account_id   varchar(64)   NOT NULL,
    user_id      varchar(128)  NOT NULL,
    session_id   varchar(128)  NOT NULL,
    snapshot     jsonb         NOT NULL,
    updated_at   timestamptz   NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, user_id, session_id)
);
