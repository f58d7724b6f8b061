"""Tenancy as a property.

Hypothesis generates commits — through the service, in process — for accounts A and B, users
and agents within them, on session ids that several users may name; the memory is indexed;
then, for generated readers, every read API (find, search, build_context, read, ls, tree, stat,
relations) returns only what the reader may see: nothing of the other account, no other
user's memories or sessions, no other agent's memories. A commit into a session another user
or agent owns is refused. A model of who owns which session is kept beside the real store.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.config import Settings
from ctxpipe.core.errors import CommitError, NodeNotFoundError, TenancyError
from ctxpipe.core.session import RequestContext
from ctxpipe.core.uri import parse_uri
from ctxpipe.index.fs_scan import scan_fs
from ctxpipe.index.wiring import make_worker
from ctxpipe.runtime import Runtime
from ctxpipe.service import ContextEngineService
from ctxpipe.storage.migrations import migrate

SCHEMA = "rt_tenancy_prop"
ACCOUNTS = ("acct-a", "acct-b")
USERS = ("u1", "u2")
AGENTS = ("g1", "g2")
SESSIONS = ("s1", "s2", "s3")  # shared names: users collide on them on purpose
# words only one (account, user) ever says
CITY = {
    ("acct-a", "u1"): "Oslo",
    ("acct-a", "u2"): "Lima",
    ("acct-b", "u1"): "Kyoto",
    ("acct-b", "u2"): "Quito",
}
HOBBY = ("hiking", "chess", "baking", "sailing", "pottery")


@pytest.fixture(scope="module")
def world(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
    migrate(pg_url, schema=SCHEMA, embedding_dim=384)
    root = tmp_path_factory.mktemp("tenancy-property")
    svc = ContextEngineService(
        Runtime(
            Settings(
                fs_root=root / "fs",
                var_dir=root / "var",
                database_url=pg_url,
                redis_url="redis://127.0.0.1:1/0",
                db_schema=SCHEMA,
                embedding_dim=384,
            )
        )
    )
    yield {"svc": svc, "owners": {}, "commits": 0, "refused": 0}
    svc.close()


def messages(account: str, user: str, hobby: str) -> list[dict[str, str]]:
    city = CITY[(account, user)]
    return [
        {"id": "m1", "role": "user", "content": f"Hi, I live in {city} and I love {hobby}."},
        {"id": "m2", "role": "assistant", "content": f"{city} sounds lovely. Noted."},
        {"id": "m3", "role": "user", "content": f"I prefer short answers. {city} is home."},
        {"id": "m4", "role": "assistant", "content": "Short answers it is."},
    ]


writes = st.lists(
    st.tuples(
        st.sampled_from(ACCOUNTS),
        st.sampled_from(USERS),
        st.sampled_from(AGENTS),
        st.sampled_from(SESSIONS),
        st.sampled_from(HOBBY),
    ),
    min_size=1,
    max_size=3,
)
readers = st.lists(
    st.builds(
        RequestContext,
        account_id=st.sampled_from(ACCOUNTS),
        user_id=st.sampled_from(USERS),
        agent_id=st.sampled_from(AGENTS),
        session_id=st.sampled_from((*SESSIONS, "fresh")),
    ),
    min_size=1,
    max_size=2,
)


def allowed(ctx: RequestContext, uri: str, owners: dict[tuple[str, str], tuple[str, str]]) -> bool:
    """The model of the read rules (independent of the code under test)."""
    u = parse_uri(uri)
    if u.account != ctx.account_id:
        return False
    if u.scope in ("resources", "skills"):
        return True
    if not u.segments:
        return False
    owner = u.segments[0]
    if u.scope == "users":
        return owner == ctx.user_id
    if u.scope == "agents":
        return owner == ctx.agent_id
    if u.scope == "sessions":
        who = owners.get((u.account, owner))
        return who[0] == ctx.user_id if who else owner == ctx.session_id
    return False


def check_reader(svc: ContextEngineService, ctx: RequestContext, owners: Any) -> None:
    other_cities = {c for (acct, _), c in CITY.items() if acct != ctx.account_id}
    own_sessions = {
        s for (a, s), w in owners.items() if a == ctx.account_id and w[0] == ctx.user_id
    }
    if (ctx.account_id, ctx.session_id) not in owners:
        own_sessions.add(ctx.session_id)

    def ok_refs(refs: list[str]) -> bool:
        return all(r.split(":", 1)[0] in own_sessions for r in refs if ":" in r)

    # the search APIs
    query = "where does the user live and what do they love?"
    for res in (svc.find(query, ctx, 20), svc.search(query, ctx)):
        for h in res.hits:
            assert allowed(ctx, h.uri, owners), (ctx, h.uri)
            assert ok_refs(h.source_refs), (ctx, h.uri, h.source_refs)
            assert not any(c in h.returned_text() for c in other_cities), (ctx, h.uri)
    built = svc.build_context(query, ctx, budget=2000, incremental=False)
    assert not any(c in built.text for c in other_cities), ctx
    assert ok_refs(built.cited_refs), (ctx, built.cited_refs)
    for section in built.sections:
        for item in section.items:
            assert not item.uri or allowed(ctx, item.uri, owners), (ctx, item.uri)
    # the direct APIs, on every node of the store
    fs = svc.runtime.fs
    for entry in scan_fs(fs):
        uri = entry.uri
        if allowed(ctx, uri, owners):
            assert svc.stat(uri, ctx).uri == uri
            svc.read(uri, ctx, level=0)
            for edge in svc.relations(uri, ctx):
                assert allowed(ctx, edge.to_uri, owners), (ctx, uri, edge.to_uri)
        else:
            with pytest.raises(TenancyError):
                svc.read(uri, ctx, level=2)
            with pytest.raises(TenancyError):
                svc.stat(uri, ctx)
            with pytest.raises(TenancyError):
                svc.relations(uri, ctx)
    for account in ACCOUNTS:
        for scope in ("users", "agents", "sessions"):
            root = f"ctx://{account}/{scope}/"
            if account != ctx.account_id:
                with pytest.raises(TenancyError):
                    svc.ls(root, ctx)
                continue
            try:
                listed = svc.ls(root, ctx) + svc.tree(root, ctx, depth=3)
            except NodeNotFoundError:  # nothing of this scope was written yet
                continue
            for node in listed:
                assert allowed(ctx, node.uri, owners), (ctx, node.uri)


@settings(
    max_examples=4,
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.generate],  # no shrinking: each example costs seconds
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(writes=writes, readers=readers)
def test_every_read_api_stays_inside_what_the_reader_may_see(
    world: dict[str, Any], writes: list[tuple[str, str, str, str, str]], readers: list[Any]
) -> None:
    svc: ContextEngineService = world["svc"]
    owners: dict[tuple[str, str], tuple[str, str]] = world["owners"]
    for account, user, agent, session, hobby in writes:
        ctx = RequestContext(account_id=account, user_id=user, agent_id=agent, session_id=session)
        req = CommitRequest(
            commit_id=uuid.uuid4().hex, ctx=ctx, messages=messages(account, user, hobby)
        )
        who = owners.get((account, session))
        if who is not None and who != (user, agent):
            with pytest.raises(CommitError, match="belongs to another"):
                svc.coordinator.commit_sync(req)
            world["refused"] += 1
            continue
        result = svc.coordinator.commit_sync(req)
        owners[(account, session)] = (user, agent)
        world["commits"] += 1
        for w in result.write_results:
            assert allowed(ctx, w.uri, owners), w.uri  # a commit writes only its own spaces
    make_worker(svc.runtime).drain(max_seconds=60)
    for ctx in readers:
        check_reader(svc, ctx, owners)


def test_the_property_ran_on_real_commits(world: dict[str, Any]) -> None:
    """Runs after the property: it was not vacuous (commits happened and were indexed)."""
    assert world["commits"] > 0
    svc: ContextEngineService = world["svc"]
    assert any(True for _ in scan_fs(svc.runtime.fs))
