-- 007_api_keys: keys of the HTTP API and the MCP server (ctxpipe.api.keys).
-- Placeholders: {{schema}}.

-- A key is shown once at creation ("ctx_{key_id}_{secret}"); only the SHA-256 of its secret is
-- kept. A key acts for its account only, and for one user or one agent when bound to it.
CREATE TABLE {{schema}}.api_keys (
    key_id        varchar(32)   PRIMARY KEY,
    secret_hash   bytea         NOT NULL,
    account_id    varchar(64)   NOT NULL,
    user_id       varchar(128),
    agent_id      varchar(128),
    scopes        text[]        NOT NULL,
    name          varchar(128)  NOT NULL DEFAULT '',
    created_at    timestamptz   NOT NULL DEFAULT now(),
    revoked_at    timestamptz,
    last_used_at  timestamptz
);

CREATE INDEX idx_api_keys_account ON {{schema}}.api_keys (account_id, created_at);
