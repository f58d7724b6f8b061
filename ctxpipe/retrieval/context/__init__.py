"""context: build_context — the token budget, the candidates of each section, their
placement, incremental snapshots."""
