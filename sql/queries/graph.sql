-- name: graph_incoming
-- edges that point at any of the given URIs (the FS keeps only a node's outgoing edges)
SELECT from_uri, to_uri, relation_type, reason, weight, created_at
FROM {{schema}}.relation_edges
WHERE account_id = %(account_id)s AND to_uri = ANY(%(uris)s)
