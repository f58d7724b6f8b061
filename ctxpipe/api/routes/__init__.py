"""The /v1 routes, by area."""
