"""search (intent → typed queries → hierarchical retrieval) and build_context on real
PostgreSQL/pgvector with the real model, over the example sessions committed through the
pipeline; the service facade's read methods."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from service_world import committed_service

from ctxpipe.client import SearchRequest
from ctxpipe.core.errors import LLMError
from ctxpipe.core.session import Message, RequestContext, SessionInput
from ctxpipe.retrieval.context.context_request import ContextRequest
from ctxpipe.retrieval.context.snapshots import UpdateStrategy
from ctxpipe.retrieval.read_path import ReadPath
from ctxpipe.service import ContextEngineService

SCHEMA = "rt_search"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ALICE = RequestContext(account_id="acme", user_id="alice", agent_id="helper", session_id="live")


class BrokenLLM:
    name = "broken"

    async def complete_json(self, *a: Any, **k: Any) -> Any:
        raise LLMError("down")

    def complete_json_sync(self, *a: Any, **k: Any) -> Any:
        raise LLMError("down")


@pytest.fixture(scope="module")
def service(
    pg_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ContextEngineService]:
    sessions = [
        SessionInput.model_validate(json.loads(path.read_text(encoding="utf-8")))
        for path in sorted(EXAMPLES.glob("alice_*.json"))
    ]
    svc, _ = committed_service(pg_url, tmp_path_factory.mktemp("search"), SCHEMA, sessions)
    yield svc
    svc.close()


@pytest.fixture(scope="module")
def read(service: ContextEngineService) -> ReadPath:
    return service.read_path


def cited(hits: list[Any]) -> set[str]:
    return {r for h in hits for r in h.source_refs}


def test_search_splits_the_question_and_drills_down(read: ReadPath) -> None:
    res = read.search(
        SearchRequest(query="Why did the Airflow DAG fail and what editor does Alice use now?"),
        ALICE,
    )
    assert res.intent_source == "llm" and len(res.queries) == 2
    first, second = res.queries
    assert first.priority < second.priority
    for q in res.queries:
        kinds = [s.kind for s in q.trajectory]
        assert kinds[0] == "global" and {"directory", "node"} & set(kinds)
        assert q.rounds == len(q.trajectory) - 1 and q.hits
        alpha = read.searcher.config.alpha
        for step in q.trajectory[1:]:
            for _key, child, final in step.children:
                assert final == pytest.approx(alpha * child + (1 - alpha) * step.parent_score)
        assert all(0.0 <= h.score <= 1.0 for h in q.hits)
    refs = cited(res.hits)
    assert "alice-2026-03-16-airflow:m3" in refs or "alice-2026-03-16-airflow:m4" in refs
    assert "alice-2026-04-20-new-job:m5" in refs  # "I'd rather use Helix than VS Code"
    assert set(res.groups) <= {"memory", "session"}


def test_chitchat_retrieves_nothing(read: ReadPath) -> None:
    res = read.search(SearchRequest(query="thanks, great!"), ALICE)
    assert res.queries == [] and res.hits == []


def test_a_failing_llm_falls_back_to_the_raw_query(read: ReadPath, service: Any) -> None:
    rt = service.runtime
    broken = ReadPath(rt.db, rt.embedder, rt.fs, BrokenLLM(), schema=SCHEMA)  # type: ignore[arg-type]
    res = broken.search(SearchRequest(query="psycopg2 ModuleNotFoundError in the scheduler"), ALICE)
    assert res.intent_source == "fallback" and len(res.queries) == 1
    assert "alice-2026-03-16-airflow:m3" in cited(res.hits)


def test_typed_skill_query_looks_at_the_agents_memories(read: ReadPath) -> None:
    res = read.search(SearchRequest(query="how do I use the dbt_cli tool?"), ALICE)
    (q,) = res.queries
    assert q.context_type == "skill"
    assert q.hits and all("/agents/helper/" in h.uri or "/skills/" in h.uri for h in q.hits)


def test_build_context_cites_the_answer_within_budget(read: ReadPath) -> None:
    ctx = ALICE.model_copy(update={"session_id": "ctx-1"})
    res = read.build_context(
        ContextRequest(query="How was the dbt orders model timeout fixed?", budget=600), ctx
    )
    assert res.total_tokens <= 600 and res.total_tokens == read.counter.count(res.text)
    assert "alice-2026-04-20-new-job:m4" in res.cited_refs
    assert any(s.name == "user_prefs" and s.items for s in res.sections)  # profile, prefs
    assert res.delta.strategy == UpdateStrategy.FULL_REBUILD


def test_incremental_builds_survive_across_processes(read: ReadPath, service: Any) -> None:
    ctx = ALICE.model_copy(update={"session_id": "ctx-2"})
    talk = [
        Message(id="t1", role="user", content="I need to speed up the orders model."),
        Message(id="t2", role="assistant", content="Let's look at how it is materialised."),
    ]
    query = "How was the dbt orders model timeout fixed?"
    first = read.build_context(ContextRequest(query=query, messages=talk, budget=900), ctx)
    rt = service.runtime
    other = ReadPath(rt.db, rt.embedder, rt.fs, rt.llm, schema=SCHEMA)  # a fresh process
    more = [*talk, Message(id="t3", role="user", content="And the index on updated_at?")]
    second = other.build_context(ContextRequest(query=query, messages=more, budget=900), ctx)
    d = second.delta
    assert d.strategy == UpdateStrategy.APPEND_ONLY and d.retrieval_reused
    assert d.new_messages == ["t3"] and d.tokens_saved > 0
    assert d.tokens_saved + d.delta_tokens == second.total_tokens <= 900
    cut = first.text.index("## Conversation")
    assert second.text[:cut] == first.text[:cut]


def test_context_items_record_recalls(read: ReadPath) -> None:
    ctx = ALICE.model_copy(update={"session_id": "ctx-3"})
    res = read.build_context(ContextRequest(query="Where does Alice live?", budget=500), ctx)
    uris = sorted({i.uri for s in res.sections for i in s.items if i.uri})
    stats = read.recall_stats.get("acme", uris)
    assert uris and set(stats) == set(uris)


def test_service_read_methods(service: ContextEngineService) -> None:
    found = service.find("psycopg2 scheduler error", ALICE, 5)
    assert found.hits and found.hits[0].uri.startswith("ctx://acme/")
    searched = service.search("what does Alice prefer in answers?", ALICE)
    assert searched.hits
    built = service.build_context("what does Alice prefer?", ALICE, budget=300)
    assert built.total_tokens <= 300
    archive = "ctx://acme/sessions/alice-2026-03-16-airflow/archives/1"
    assert "[m3]" in service.read(archive, ALICE, level=2)
    assert service.stat(archive, ALICE).exists
    assert [c.name for c in service.ls("ctx://acme/users/alice/", ALICE)] == ["memories"]
    tree = service.tree("ctx://acme/users/alice/", ALICE, depth=3)
    assert any(n.uri.endswith("/memories/profile") for n in tree)
    profile = "ctx://acme/users/alice/memories/profile"
    edges = service.relations(profile, ALICE)
    assert all(e.from_uri == profile for e in edges)


def test_cli_commands(service: ContextEngineService) -> None:
    from typer.testing import CliRunner

    from ctxpipe.cli import app

    s = service.runtime.settings
    env = {
        "CTXPIPE_FS_ROOT": str(s.fs_root),
        "CTXPIPE_DATABASE_URL": s.database_url,
        "CTXPIPE_DB_SCHEMA": SCHEMA,
        "CTXPIPE_REDIS_URL": s.redis_url,
        "COLUMNS": "160",
    }
    who = ["-a", "acme", "-u", "alice", "--agent", "helper"]
    runner = CliRunner()

    res = runner.invoke(app, ["find", "psycopg2 scheduler", *who, "--json"], env=env)
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["groups"] and data["plan"] == "exact"
    res = runner.invoke(app, ["find", "psycopg2 scheduler", *who, "-k", "3"], env=env)
    assert res.exit_code == 0 and "plan exact" in res.output

    res = runner.invoke(app, ["search", "where does Alice live?", *who, "--trajectory"], env=env)
    assert res.exit_code == 0 and "global" in res.output, res.output

    res = runner.invoke(
        app, ["context", "dbt timeout fix", *who, "-b", "300", "--json", "-s", "cli-1"], env=env
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["total_tokens"] <= 300
    res = runner.invoke(app, ["context", "dbt timeout fix", *who, "-b", "300", "-s", "cli-1"],
                        env=env)  # fmt: skip
    assert res.exit_code == 0 and "append_only" in res.output

    archive = "ctx://acme/sessions/alice-2026-03-16-airflow/archives/1"
    res = runner.invoke(app, ["read", archive, *who, "-l", "2"], env=env)
    assert res.exit_code == 0 and "[m3]" in res.output
    res = runner.invoke(app, ["relations", "ctx://acme/users/alice/memories/profile", *who],
                        env=env)  # fmt: skip
    assert res.exit_code == 0

    res = runner.invoke(app, ["read", "ctx://acme/users/bob/memories/profile", *who], env=env)
    assert res.exit_code == 2 and "another owner" in res.output

    # one identity rule: a URI that names the account and the user stands for -a and -u
    profile = "ctx://acme/users/alice/memories/profile"
    implied = runner.invoke(app, ["read", profile, "--agent", "helper", "-l", "0"], env=env)
    explicit = runner.invoke(app, ["read", profile, *who, "-l", "0"], env=env)
    assert implied.exit_code == 0 and explicit.exit_code == 0, implied.output
    assert implied.output == explicit.output and implied.output.strip()
    res = runner.invoke(
        app, ["find", "psycopg2 scheduler", "--scope", "ctx://acme/users/alice/", "--json"], env=env
    )
    assert res.exit_code == 0, res.output
    assert all(h["uri"].startswith(profile.rsplit("/", 2)[0]) for h in _hits(res.output))
    res = runner.invoke(app, ["tags", "--json"], env=env)
    assert res.exit_code == 2 and "name the account" in res.output


def _hits(output: str) -> list[dict[str, object]]:
    return [h for hits in json.loads(output)["groups"].values() for h in hits]


def test_relation_graph_to_a_depth(service: ContextEngineService) -> None:
    from typer.testing import CliRunner

    from ctxpipe.cli import app

    profile = "ctx://acme/users/alice/memories/profile"
    near = service.graph(profile, ALICE, depth=1)
    archives = [n for n in near if "/archives/" in n.uri]
    assert archives and all(n.distance == 1 and n.score == 0.5 for n in near)
    assert all(n.direction == "out" and n.relation_type == "derived_from" for n in archives)
    far = service.graph(profile, ALICE, depth=2)
    second = [n for n in far if n.distance == 2]
    # two hops: the other memories derived from the same archives (edges that point *at* them)
    assert second and all(n.score == pytest.approx(1 / 3) for n in second)
    assert any(n.direction == "in" and "/memories/" in n.uri for n in second)
    assert all(n.uri.startswith(("ctx://acme/users/alice/", "ctx://acme/sessions/",
                                 "ctx://acme/agents/helper/")) for n in far)  # fmt: skip
    assert {n.uri for n in near} <= {n.uri for n in far}

    s = service.runtime.settings
    env = {
        "CTXPIPE_FS_ROOT": str(s.fs_root),
        "CTXPIPE_DATABASE_URL": s.database_url,
        "CTXPIPE_DB_SCHEMA": SCHEMA,
        "CTXPIPE_REDIS_URL": s.redis_url,
    }
    who = ["-a", "acme", "-u", "alice", "--agent", "helper"]
    res = CliRunner().invoke(app, ["relations", profile, *who, "--depth", "2", "--json"], env=env)
    assert res.exit_code == 0, res.output
    assert {n["uri"] for n in json.loads(res.output)} == {n.uri for n in far}
    bob = ["-a", "acme", "-u", "bob", "--agent", "helper"]
    res = CliRunner().invoke(app, ["relations", profile, *bob, "--depth", "2"], env=env)
    assert res.exit_code == 2 and "another owner" in res.output


def test_history_through_the_service_respects_tenancy(service: ContextEngineService) -> None:
    from ctxpipe.retrieval.access import OwnerAccessError

    profile = "ctx://acme/users/alice/memories/profile"
    entries = service.history(profile, ALICE)
    assert entries and entries[0].action == "create"
    assert [e.version for e in entries] == list(range(1, len(entries) + 1))
    bob = RequestContext(account_id="acme", user_id="bob", agent_id="helper", session_id="x")
    with pytest.raises(OwnerAccessError):
        service.history(profile, bob)


def test_tags_lookup_and_find_filter(service: ContextEngineService) -> None:
    from typer.testing import CliRunner

    from ctxpipe.cli import app

    tags = service.find_tags(ALICE)
    assert tags and all(t.nodes >= 1 for t in tags)
    assert [t.nodes for t in tags] == sorted((t.nodes for t in tags), reverse=True)
    top = tags[0].tag
    assert all(t.tag.startswith(top[:2]) for t in service.find_tags(ALICE, top[:2]))
    tagged = service.find("what does Alice do?", ALICE, 20, tags=[top])
    uris = {h.uri for hits in tagged.groups.values() for h in hits}
    assert uris
    for uri in uris:
        assert top in service.runtime.fs.read_node(uri, include_content=False).metadata["tags"]
    nothing = service.find("what does Alice do?", ALICE, 20, tags=["no-such-tag-anywhere"])
    assert not nothing.groups
    bob = RequestContext(account_id="acme", user_id="bob", agent_id="nobody", session_id="x")
    assert service.find_tags(bob) == []  # tags of what bob may not see stay hidden

    s = service.runtime.settings
    env = {
        "CTXPIPE_FS_ROOT": str(s.fs_root),
        "CTXPIPE_DATABASE_URL": s.database_url,
        "CTXPIPE_DB_SCHEMA": SCHEMA,
        "CTXPIPE_REDIS_URL": s.redis_url,
        "COLUMNS": "160",
    }
    who = ["-a", "acme", "-u", "alice", "--agent", "helper"]
    res = CliRunner().invoke(app, ["tags", *who, "--json"], env=env)
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)[0]["tag"] == top
    res = CliRunner().invoke(app, ["find", "what does Alice do?", *who, "--tag", top], env=env)
    assert res.exit_code == 0, res.output
