-- 009_open_sessions: sessions that stay open while an agent appends messages to them
-- (ctxpipe.sessions). A commit is cut from a session's uncommitted messages, in order, when
-- the open part reaches its size limits, after an idle time, or on an explicit close.
-- Placeholders: {{schema}}.

-- One row per open session: its owner, the next message's sequence number and the size of
-- its open part. Appends and cuts lock this row (FOR UPDATE), so they are serialised per
-- session and never per table.
CREATE TABLE {{schema}}.open_sessions (
    account_id      varchar(64)   NOT NULL,
    session_id      varchar(128)  NOT NULL,
    user_id         varchar(128)  NOT NULL,
    agent_id        varchar(128)  NOT NULL,
    next_seq        bigint        NOT NULL DEFAULT 1,
    cuts            integer       NOT NULL DEFAULT 0,
    open_messages   integer       NOT NULL DEFAULT 0,
    open_tokens     bigint        NOT NULL DEFAULT 0,
    last_append_at  timestamptz   NOT NULL DEFAULT now(),
    created_at      timestamptz   NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, session_id)
);

-- the idle sweep reads the sessions whose open part waits longest
CREATE INDEX idx_open_sessions_idle ON {{schema}}.open_sessions (last_append_at)
    WHERE open_messages > 0;

-- Every appended message, once per (session, message id); `commit_id` is set by the cut that
-- takes it and never changes again.
CREATE TABLE {{schema}}.open_messages (
    account_id   varchar(64)   NOT NULL,
    session_id   varchar(128)  NOT NULL,
    message_id   varchar(128)  NOT NULL,
    seq          bigint        NOT NULL,
    role         varchar(16)   NOT NULL,
    name         varchar(128),
    content      text          NOT NULL,
    injected     boolean       NOT NULL DEFAULT false,
    original_chars integer,
    created_at   timestamptz,
    appended_at  timestamptz   NOT NULL DEFAULT now(),
    tokens       integer       NOT NULL DEFAULT 0,
    commit_id    varchar(128),
    PRIMARY KEY (account_id, session_id, message_id),
    FOREIGN KEY (account_id, session_id)
        REFERENCES {{schema}}.open_sessions (account_id, session_id) ON DELETE CASCADE
);

CREATE UNIQUE INDEX idx_open_messages_seq ON {{schema}}.open_messages (account_id, session_id, seq);
CREATE INDEX idx_open_messages_open ON {{schema}}.open_messages (account_id, session_id, seq)
    WHERE commit_id IS NULL;
CREATE INDEX idx_open_messages_commit ON {{schema}}.open_messages (commit_id)
    WHERE commit_id IS NOT NULL;

-- One row per cut: written in the transaction that marks its messages, `submitted_at` set once
-- the commit went through the submit path. A cut left unsubmitted (a crash between the two) is
-- submitted again with the same commit id; the ledger keeps one commit per id.
CREATE TABLE {{schema}}.open_session_cuts (
    commit_id     varchar(128)  PRIMARY KEY,
    account_id    varchar(64)   NOT NULL,
    session_id    varchar(128)  NOT NULL,
    user_id       varchar(128)  NOT NULL,
    agent_id      varchar(128)  NOT NULL,
    reason        varchar(16)   NOT NULL,
    messages      integer       NOT NULL,
    created_at    timestamptz   NOT NULL DEFAULT now(),
    submitted_at  timestamptz
);

CREATE INDEX idx_open_session_cuts_unsubmitted ON {{schema}}.open_session_cuts (created_at)
    WHERE submitted_at IS NULL;
