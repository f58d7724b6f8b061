"""search: intent analysis into typed queries and the hierarchical retrieval of each."""
