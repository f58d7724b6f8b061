-- 003_commit_outputs: the output of each phase of a commit, written once.
-- A redelivered task finds its output here and returns it unchanged (idempotency keyed by
-- (commit_id, phase_key)); the chord body reads the extractor outputs from here too.
-- Placeholders: {{schema}}.

CREATE TABLE {{schema}}.commit_outputs (
    commit_id   varchar(128) NOT NULL REFERENCES {{schema}}.commits (commit_id) ON DELETE CASCADE,
    phase_key   varchar(64)  NOT NULL,
    payload     jsonb        NOT NULL,
    created_at  timestamptz  NOT NULL DEFAULT now(),
    PRIMARY KEY (commit_id, phase_key)
);
