"""Maintenance jobs over the FS and the replica (forgetting)."""
