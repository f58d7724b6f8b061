-- 001_init: the index replica of the ContextFS (PostgreSQL + pgvector).
-- Placeholders (validated by ctxpipe.storage.migrations): {{schema}}, {{embedding_dim}}.
-- The replica is rebuildable from the FS at any time; outbox_events drives the sync.

CREATE EXTENSION IF NOT EXISTS vector;

CREATE SCHEMA IF NOT EXISTS {{schema}};

-- One row per FS node (metadata copy; L0 text for quick listing).
CREATE TABLE {{schema}}.context_nodes (
    uri            varchar(512)  PRIMARY KEY,
    account_id     varchar(64)   NOT NULL,
    parent_uri     varchar(512),
    context_type   varchar(32)   DEFAULT 'memory',
    category       varchar(32)   NOT NULL DEFAULT '',
    owner_space    varchar(256)  NOT NULL,
    abstract_text  text,
    version        integer       NOT NULL,
    content_hash   varchar(64)   NOT NULL DEFAULT '',
    source_refs    jsonb         NOT NULL DEFAULT '[]',
    metadata       jsonb         NOT NULL DEFAULT '{}',
    fs_path        varchar(1024),
    created_at     timestamptz,
    updated_at     timestamptz,
    indexed_at     timestamptz   DEFAULT now()
);

CREATE INDEX idx_context_nodes_parent   ON {{schema}}.context_nodes (parent_uri);
CREATE INDEX idx_context_nodes_owner    ON {{schema}}.context_nodes (account_id, owner_space);
CREATE INDEX idx_context_nodes_category ON {{schema}}.context_nodes (category);
CREATE INDEX idx_context_nodes_updated  ON {{schema}}.context_nodes (updated_at);
CREATE INDEX idx_context_nodes_metadata ON {{schema}}.context_nodes USING gin (metadata);

-- Text chunks of L0/L1/L2 with their embedding and full-text vector.
-- chunk_id = stable hash of (uri, level, chunk_index).
CREATE TABLE {{schema}}.context_chunks (
    chunk_id      varchar(64)   PRIMARY KEY,
    uri           varchar(512)  NOT NULL
                  REFERENCES {{schema}}.context_nodes (uri) ON DELETE CASCADE,
    account_id    varchar(64)   NOT NULL,
    parent_uri    varchar(512),
    level         smallint      NOT NULL,  -- 0 = L0 abstract, 1 = L1 overview, 2 = L2 content
    chunk_index   smallint      NOT NULL DEFAULT 0,
    text_content  text          NOT NULL,
    embedding     vector({{embedding_dim}}),
    tsv           tsvector      GENERATED ALWAYS AS (to_tsvector('english', text_content)) STORED,
    context_type  varchar(32),
    category      varchar(32),
    owner_space   varchar(256),
    source_refs   jsonb         NOT NULL DEFAULT '[]',
    metadata      jsonb         NOT NULL DEFAULT '{}',
    node_version  integer       NOT NULL DEFAULT 0,
    created_at    timestamptz   DEFAULT now(),
    updated_at    timestamptz   DEFAULT now()
);

CREATE INDEX idx_chunks_embedding ON {{schema}}.context_chunks
    USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64);
CREATE INDEX idx_chunks_tsv      ON {{schema}}.context_chunks USING gin (tsv);
CREATE INDEX idx_chunks_owner    ON {{schema}}.context_chunks (account_id, owner_space);
CREATE INDEX idx_chunks_uri      ON {{schema}}.context_chunks (uri);
CREATE INDEX idx_chunks_level    ON {{schema}}.context_chunks (level);
CREATE INDEX idx_chunks_category ON {{schema}}.context_chunks (category);

-- Replica of the .relations.json files.
CREATE TABLE {{schema}}.relation_edges (
    id             varchar(64)   PRIMARY KEY,
    account_id     varchar(64)   NOT NULL,
    from_uri       varchar(512)  NOT NULL,
    to_uri         varchar(512)  NOT NULL,
    relation_type  varchar(64)   NOT NULL DEFAULT 'related_to',
    reason         text,
    weight         real          NOT NULL DEFAULT 1.0,
    metadata       jsonb         NOT NULL DEFAULT '{}',
    created_at     timestamptz   DEFAULT now(),
    UNIQUE (from_uri, to_uri, relation_type)
);

CREATE INDEX idx_relation_from ON {{schema}}.relation_edges (from_uri);
CREATE INDEX idx_relation_to   ON {{schema}}.relation_edges (to_uri);
CREATE INDEX idx_relation_type ON {{schema}}.relation_edges (relation_type);

-- The only table the commit path writes (best effort). Claimed with FOR UPDATE SKIP LOCKED.
CREATE TABLE {{schema}}.outbox_events (
    event_id         varchar(64)   PRIMARY KEY,
    event_type       varchar(32)   NOT NULL,
    uri              varchar(512)  NOT NULL,
    account_id       varchar(64)   NOT NULL DEFAULT '',
    payload          jsonb         NOT NULL DEFAULT '{}',
    status           varchar(16)   NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'claimed', 'done', 'failed', 'dead')),
    worker_id        varchar(128),
    retry_count      smallint      NOT NULL DEFAULT 0,
    max_retries      smallint      NOT NULL DEFAULT 5,
    error_message    text,
    lease_until      timestamptz,
    next_attempt_at  timestamptz   NOT NULL DEFAULT now(),
    created_at       timestamptz   NOT NULL DEFAULT now(),
    updated_at       timestamptz   NOT NULL DEFAULT now(),
    done_at          timestamptz
);

CREATE INDEX idx_outbox_due ON {{schema}}.outbox_events (status, next_attempt_at)
    WHERE status IN ('pending', 'claimed', 'failed');
CREATE INDEX idx_outbox_uri ON {{schema}}.outbox_events (uri);

-- Replica of session archives (ctx://{account}/sessions/{sid}/archives/{n}).
CREATE TABLE {{schema}}.session_archives (
    archive_id     varchar(128)  PRIMARY KEY,
    account_id     varchar(64)   NOT NULL DEFAULT '',
    session_id     varchar(128)  NOT NULL,
    archive_uri    varchar(512)  NOT NULL,
    summary        text,
    message_count  integer       NOT NULL DEFAULT 0,
    stats          jsonb         NOT NULL DEFAULT '{}',
    created_at     timestamptz   DEFAULT now()
);

CREATE INDEX idx_archives_session ON {{schema}}.session_archives (account_id, session_id);
CREATE INDEX idx_archives_created ON {{schema}}.session_archives (created_at);

-- One row per repair scan (FS vs replica).
CREATE TABLE {{schema}}.repair_runs (
    id             bigserial         PRIMARY KEY,
    started_at     timestamptz       NOT NULL DEFAULT now(),
    finished_at    timestamptz,
    mode           varchar(16),
    missing        integer           NOT NULL DEFAULT 0,
    stale          integer           NOT NULL DEFAULT 0,
    orphaned       integer           NOT NULL DEFAULT 0,
    fs_nodes       integer           NOT NULL DEFAULT 0,
    replica_nodes  integer           NOT NULL DEFAULT 0,
    last_fs_mtime  double precision
);

CREATE INDEX idx_repair_runs_started ON {{schema}}.repair_runs (started_at);
