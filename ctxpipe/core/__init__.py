"""Core: pydantic models, enums, errors, configuration and ctx:// URIs. No I/O."""
