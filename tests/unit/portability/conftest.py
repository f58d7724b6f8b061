"""The populated ContextFS the export / import tests work on (`portability_world`)."""

from __future__ import annotations

import pytest
from portability_world import populate

from ctxpipe.fs import ContextFS


@pytest.fixture
def populated(fs: ContextFS) -> ContextFS:
    return populate(fs)
