"""units: the lines and sentences find ranks — splitting and lexical scoring, their vectors
(encoded at index time or at query time), the ranking of a chunk's sentences, snippets."""
