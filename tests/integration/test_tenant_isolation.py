"""Tenant isolation of the read path: no read API ever returns another account's or another
owner's data. Two accounts, two users in one account, two agents; near-identical content so
that a missing filter would show up in the results."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from service_world import committed_service

from ctxpipe.core.errors import InvalidURIError, TenancyError
from ctxpipe.core.session import RequestContext, SessionInput
from ctxpipe.core.uri import parse_uri
from ctxpipe.retrieval.access import OwnerAccessError
from ctxpipe.retrieval.models import FindFilters
from ctxpipe.service import ContextEngineService

SCHEMA = "rt_tenancy"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ALICE = RequestContext(account_id="acme", user_id="alice", agent_id="helper", session_id="now")
# words only other owners ever said
FOREIGN = ("Okafor", "chemistry", "Zanzibar", "Quetzal", "Leeds")


def session(account: str, user: str, agent: str, sid: str, lines: list[str]) -> SessionInput:
    return SessionInput(
        account_id=account,
        user_id=user,
        agent_id=agent,
        session_id=sid,
        messages=[
            {"id": f"m{i + 1}", "role": "user" if i % 2 == 0 else "assistant", "content": t}
            for i, t in enumerate(lines)
        ],
    )


EXTRA = [
    # the same user id in another account, saying nearly what alice says
    session("globex", "alice", "helper", "globex-alice-1", [
        "Hi, I'm Alice, a data engineer. I moved to Zanzibar last year.",
        "Welcome! How can I help?",
        "My Airflow DAG fails with ModuleNotFoundError: No module named 'psycopg2' again.",
        "Add psycopg2-binary to the scheduler image requirements.",
        "I prefer concise answers with code first.",
    ]),
    # another agent of the same account, serving bob
    session("acme", "bob", "tutor", "bob-tutor-1", [
        "My Quetzal chemistry lab keeps failing the titration step, and my Airflow DAG too.",
        "Calibrate the burette first, then repeat the titration slowly.",
        "That fixed the titration, thanks! I prefer concise answers too.",
    ]),
]  # fmt: skip


@pytest.fixture(scope="module")
def service(
    pg_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ContextEngineService]:
    sessions = [
        SessionInput.model_validate(json.loads(p.read_text(encoding="utf-8")))
        for p in sorted(EXAMPLES.glob("*.json"))  # alice x2 and bob, all with agent helper
    ] + EXTRA
    svc, _ = committed_service(pg_url, tmp_path_factory.mktemp("tenancy"), SCHEMA, sessions)
    yield svc
    svc.close()


def alice_may_see(uri: str, alice_sessions: set[str]) -> bool:
    u = parse_uri(uri)
    if u.account != "acme":
        return False
    owner = u.segments[0] if u.segments else ""
    return (
        (u.scope == "users" and owner == "alice")
        or (u.scope == "agents" and owner == "helper")
        or (u.scope == "sessions" and owner in alice_sessions)
        or u.scope in ("resources", "skills")
    )


@pytest.fixture(scope="module")
def alice_sessions(service: ContextEngineService) -> set[str]:
    found = {s.split("/", 1)[1] for s in service.read_path.user_sessions(ALICE)}
    assert found == {"alice-2026-03-16-airflow", "alice-2026-04-20-new-job"}
    return found | {ALICE.session_id}


QUERIES = [
    "Airflow DAG fails with ModuleNotFoundError psycopg2",
    "where does the user live?",
    "what does the user prefer in answers?",
    "titration chemistry lab",
    "school trip to the Science Museum booking form postcode",
]


@pytest.mark.parametrize("query", QUERIES)
def test_find_and_search_stay_inside_the_requesters_spaces(
    service: ContextEngineService, alice_sessions: set[str], query: str
) -> None:
    for res in (service.find(query, ALICE, 20), service.search(query, ALICE)):
        for h in res.hits:
            assert alice_may_see(h.uri, alice_sessions), h.uri
            assert all(r.split(":", 1)[0] in alice_sessions for r in h.source_refs), h
            assert not any(w in h.returned_text() for w in FOREIGN), h.returned_text()


@pytest.mark.parametrize("query", QUERIES[:3] + ["titration"])
def test_build_context_stays_inside_the_requesters_spaces(
    service: ContextEngineService, alice_sessions: set[str], query: str
) -> None:
    res = service.build_context(query, ALICE, budget=3000, incremental=False)
    assert not any(w in res.text for w in FOREIGN)
    assert all(r.split(":", 1)[0] in alice_sessions for r in res.cited_refs)
    for section in res.sections:
        for item in section.items:
            assert not item.uri or alice_may_see(item.uri, alice_sessions), item.uri


def test_the_same_user_id_in_another_account_is_another_tenant(
    service: ContextEngineService,
) -> None:
    globex = ALICE.model_copy(update={"account_id": "globex"})
    hits = service.find("where does the user live?", globex, 20).hits
    assert hits and all(h.uri.startswith("ctx://globex/") for h in hits)
    assert any("Zanzibar" in h.returned_text() for h in hits)
    acme_hits = service.find("Zanzibar", ALICE, 20).hits
    assert not any("Zanzibar" in h.returned_text() for h in acme_hits)


def test_bob_does_not_see_alice(service: ContextEngineService) -> None:
    bob = RequestContext(account_id="acme", user_id="bob", agent_id="tutor", session_id="x")
    for h in service.find("Airflow DAG psycopg2 Lisbon Helix editor", bob, 20).hits:
        assert "/users/alice/" not in h.uri and "/agents/helper/" not in h.uri
        assert "/sessions/alice-" not in h.uri


OTHER_URIS = [
    "ctx://acme/users/bob/memories/profile",
    "ctx://acme/sessions/bob-2026-03-20-school-trip/archives/1",
    "ctx://acme/agents/tutor/",
    "ctx://acme/users/",
]


@pytest.mark.parametrize("uri", OTHER_URIS)
def test_direct_reads_of_other_owners_are_refused(service: ContextEngineService, uri: str) -> None:
    if uri == "ctx://acme/users/":  # a scope root: listing shows only what alice may see
        assert [c.name for c in service.ls(uri, ALICE)] == ["alice"]
        assert all("/users/alice" in n.uri for n in service.tree(uri, ALICE, depth=2))
        return
    with pytest.raises(OwnerAccessError):
        service.read(uri, ALICE, level=0)
    with pytest.raises(OwnerAccessError):
        service.stat(uri, ALICE)
    with pytest.raises(OwnerAccessError):
        service.ls(uri, ALICE)
    with pytest.raises(OwnerAccessError):
        service.relations(uri, ALICE)
    with pytest.raises(OwnerAccessError):
        service.find("anything", ALICE, 5, scopes=[uri])


def test_other_accounts_are_refused(service: ContextEngineService) -> None:
    uri = "ctx://globex/users/alice/memories/profile"
    for call in (
        lambda: service.read(uri, ALICE, level=0),
        lambda: service.stat(uri, ALICE),
        lambda: service.ls("ctx://globex/users/", ALICE),
        lambda: service.relations(uri, ALICE),
        lambda: service.find("x", ALICE, 5, scopes=["ctx://globex/users/alice/"]),
    ):
        with pytest.raises(TenancyError):
            call()
    with pytest.raises((InvalidURIError, ValueError)):
        service.read("ctx://acme/users/alice/../bob/memories/profile", ALICE)
    with pytest.raises(ValueError, match="outside account"):
        FindFilters(account_id="acme", uri_prefixes=["ctx://globex/"])


def test_sessions_root_lists_only_the_users_sessions(
    service: ContextEngineService, alice_sessions: set[str]
) -> None:
    names = {c.name for c in service.ls("ctx://acme/sessions/", ALICE)}
    assert names == alice_sessions - {ALICE.session_id}


def test_relations_never_point_at_other_owners(
    service: ContextEngineService, alice_sessions: set[str]
) -> None:
    seen = 0
    for node in service.tree("ctx://acme/users/alice/", ALICE, depth=4):
        if node.is_dir and node.version:
            for e in service.relations(node.uri, ALICE):
                seen += 1
                assert alice_may_see(e.to_uri, alice_sessions), e.to_uri
    assert seen > 0


def test_agents_memories_do_not_leak_other_users_turns(
    service: ContextEngineService, alice_sessions: set[str]
) -> None:
    # the helper agent learned from bob's session too; alice sees its knowledge, not bob's ids
    res = service.find("booking form postcode validation error phone line", ALICE, 20)
    helper = [h for h in res.hits if "/agents/helper/" in h.uri]
    for h in helper:
        assert all(not r.startswith("bob-") for r in h.source_refs)
    raw: Any = service.read_path.finder.find(
        "booking form postcode validation error phone line",
        FindFilters(account_id="acme", owner_spaces=["agents/helper"]),
        20,
        record=False,
    )
    assert any(r.startswith("bob-") for h in raw.hits for r in h.source_refs) or not helper


def test_an_incremental_build_never_reuses_another_agents_snapshot(
    service: ContextEngineService,
) -> None:
    """Same user, same session, same query — but another agent: the snapshot built for
    `helper` (with its cases) must not be handed to `other`."""
    query = "how was the Airflow psycopg2 error fixed?"
    shared = ALICE.model_copy(update={"session_id": "snapshot-check"})
    first = service.build_context(query, shared, budget=3000)
    assert any("/agents/helper/" in i.uri for s in first.sections for i in s.items if i.uri)
    other = shared.model_copy(update={"agent_id": "other"})
    second = service.build_context(query, other, budget=3000)
    uris = [i.uri for s in second.sections for i in s.items if i.uri]
    assert not any("/agents/helper/" in u for u in uris), uris


def test_a_blank_query_is_refused_not_answered_with_arbitrary_hits(
    service: ContextEngineService,
) -> None:
    for blank in ("", "   "):
        with pytest.raises(ValueError, match="empty"):
            service.find(blank, ALICE)
        with pytest.raises(ValueError, match="empty"):
            service.search(blank, ALICE)


ALICE_SESSION = "alice-2026-03-16-airflow"
# bob names alice's session as his own: the session id gives him nothing of hers
BOB_IN_ALICES_SESSION = RequestContext(
    account_id="acme", user_id="bob", agent_id="helper", session_id=ALICE_SESSION
)


def test_naming_another_users_session_id_reads_nothing_of_it(
    service: ContextEngineService,
) -> None:
    bob = BOB_IN_ALICES_SESSION
    archive = f"ctx://acme/sessions/{ALICE_SESSION}/archives/1"
    assert service.read(archive, ALICE, level=0)  # alice herself may
    for call in (
        lambda: service.read(archive, bob, level=2),
        lambda: service.stat(archive, bob),
        lambda: service.ls(f"ctx://acme/sessions/{ALICE_SESSION}/", bob),
        lambda: service.tree(f"ctx://acme/sessions/{ALICE_SESSION}/", bob),
        lambda: service.relations(archive, bob),
        lambda: service.find("Airflow", bob, 5, scopes=[archive]),
    ):
        with pytest.raises(OwnerAccessError):
            call()
    assert ALICE_SESSION not in {c.name for c in service.ls("ctx://acme/sessions/", bob)}
    for res in (
        service.find("Airflow DAG psycopg2 ModuleNotFoundError", bob, 20),
        service.search("Airflow DAG psycopg2 ModuleNotFoundError", bob),
    ):
        for h in res.hits:
            assert f"/sessions/{ALICE_SESSION}/" not in h.uri
            assert not any(r.startswith(f"{ALICE_SESSION}:") for r in h.source_refs)
    ctx_res = service.build_context("Airflow DAG psycopg2", bob, budget=3000, incremental=False)
    assert not any(r.startswith(f"{ALICE_SESSION}:") for r in ctx_res.cited_refs)
    uris = [i.uri for s in ctx_res.sections for i in s.items if i.uri]
    assert not any(f"/sessions/{ALICE_SESSION}/" in u for u in uris), uris


def test_a_commit_naming_another_users_session_is_refused_and_writes_nothing(
    service: ContextEngineService,
) -> None:
    from ctxpipe.core.errors import CommitError

    root = service.runtime.settings.fs_root
    before = {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
    req = service.build_request(
        BOB_IN_ALICES_SESSION,
        [{"id": f"b{i}", "role": "user", "content": f"My Quetzal note {i}."} for i in range(4)],
        commit_id="bob-into-alice",
    )
    with pytest.raises(CommitError, match="belongs to another user"):
        service.coordinator.commit_sync(req)
    after = {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
    after = {p: b for p, b in after.items() if ".locks" not in p.parts}
    before = {p: b for p, b in before.items() if ".locks" not in p.parts}
    assert after == before
