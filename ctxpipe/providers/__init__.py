"""Providers: LLM, Embedder and VectorIndex protocols and their real implementations."""
