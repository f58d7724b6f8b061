"""find: hybrid retrieval over the index replica — the finder, its SQL candidate store and
the recall statistics of what it returns."""
