"""Fixtures of the integration tier (the servers themselves: tests/conftest.py):
world  module-scoped: the API app (`api_world.ApiWorld`) of the asking module, over a
       fresh schema named by the module's `SCHEMA`, with the module's `API_SETTINGS`
       (a dict, optional) over the defaults. A module may override it, or extend it by
       asking for `world` in its own fixture of that name.
world_url  module-scoped: the base URL of `world`'s app served by uvicorn in a thread
       (`api_world.served`), for the clients that speak real HTTP.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from api_world import ApiWorld, api_world, served


@pytest.fixture(scope="module")
def world(
    request: pytest.FixtureRequest,
    pg_url: str,
    redis_url: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ApiWorld]:
    schema = getattr(request.module, "SCHEMA", None)
    if not isinstance(schema, str):
        pytest.fail(f"{request.module.__name__} asks for `world` but names no SCHEMA", False)
    overrides: dict[str, Any] = getattr(request.module, "API_SETTINGS", {})
    with api_world(pg_url, redis_url, tmp_path_factory.mktemp(schema), schema, **overrides) as w:
        yield w


@pytest.fixture(scope="module")
def world_url(world: ApiWorld) -> Iterator[str]:
    with served(world) as url:
        yield url
