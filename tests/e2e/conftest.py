"""Fixtures of the end-to-end tier:
stack_settings  settings on the suite's PostgreSQL and Redis, both emptied, with the
                FS root and the state directory made
api_stack       `ctxpipe serve` in front of real workers on `stack_settings` (api_stack.py)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from api_stack import ApiStack, served

from ctxpipe.core.config import Settings


@pytest.fixture
def stack_settings(
    make_settings: Callable[..., Settings], clean_db: str, clean_redis: str
) -> Settings:
    s = make_settings()
    s.fs_root.mkdir(parents=True, exist_ok=True)
    s.var_dir.mkdir(parents=True, exist_ok=True)
    return s


@pytest.fixture
def api_stack(stack_settings: Settings, tmp_path: Path) -> Iterator[ApiStack]:
    with served(stack_settings, tmp_path) as stack:
        yield stack
