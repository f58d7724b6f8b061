-- name: tags_by_prefix
-- the tags used in the given owner spaces that start with a prefix, most used first
SELECT t.tag, count(*) AS nodes
FROM {{schema}}.context_nodes AS n,
     jsonb_array_elements_text(
         CASE WHEN jsonb_typeof(n.metadata -> 'tags') = 'array' THEN n.metadata -> 'tags'
              ELSE '[]'::jsonb END
     ) AS t(tag)
WHERE n.account_id = %(account)s
  AND n.owner_space = ANY(%(spaces)s)
  AND t.tag LIKE %(prefix)s
GROUP BY t.tag
ORDER BY nodes DESC, t.tag
LIMIT %(limit)s

-- name: tags_nodes
-- nodes of the given owner spaces that carry every one of the tags
SELECT n.uri
FROM {{schema}}.context_nodes AS n
WHERE n.account_id = %(account)s
  AND n.owner_space = ANY(%(spaces)s)
  AND n.metadata -> 'tags' @> %(tags)s
