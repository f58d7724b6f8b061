-- 010_commit_list: the commit list (`commits_of_owner` in queries/commit_list.sql: the latest
-- commits of an account, or of one of its users or agents, newest first) reads an index in its
-- own order and stops after its LIMIT, instead of scanning and sorting every commit of the
-- ledger. One index per kind of API key that lists commits: an account's, a user's (also
-- with an agent), an agent's. The columns end in the query's ORDER BY (created_at DESC,
-- commit_id), so no sort step is left.
-- Building them blocks writes to the ledger while they are built (a migration runs in a
-- transaction, so not CONCURRENTLY): on a large ledger, migrate at a quiet time.
-- Placeholders: {{schema}}.

CREATE INDEX idx_commits_account_recent
    ON {{schema}}.commits (account_id, created_at DESC, commit_id);
CREATE INDEX idx_commits_user_recent
    ON {{schema}}.commits (account_id, user_id, created_at DESC, commit_id);
CREATE INDEX idx_commits_agent_recent
    ON {{schema}}.commits (account_id, agent_id, created_at DESC, commit_id);
