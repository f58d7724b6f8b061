"""Private agent memory, end to end: users A and B commit through one agent (shared mode, the
default); no distinctive word of B's sessions appears in any read A can make — find, search,
build_context, read, node, tree, relations, history, tags."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from lemminflect import getAllLemmas
from service_world import committed_service

from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.session import RequestContext, SessionInput
from ctxpipe.index.reindex import reindex
from ctxpipe.index.wiring import make_indexer
from ctxpipe.service import ContextEngineService

SCHEMA = "rt_agent_privacy"
_RUN = itertools.count(1)

getAllLemmas("word")  # load the lexicon now, not inside a strategy
_SECRET = st.text(alphabet="bcdfghjklmnpqrstvwxz", min_size=7, max_size=10).filter(
    lambda w: not getAllLemmas(w)
)
_B_SAYS = [
    "My {0} export keeps failing with a timeout error when I open {1}. How do I fix it?",
    "Still the same timeout error on {0}, unfortunately.",
    "That worked, thanks! The {0} export is fine now. Call me {1}.",
]
_A_SAYS = [
    "My report export keeps failing with a timeout error. How do I fix it?",
    "That worked, thanks!",
]


@pytest.fixture(scope="module")
def service(
    pg_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ContextEngineService]:
    svc, _ = committed_service(pg_url, tmp_path_factory.mktemp("agent_privacy"), SCHEMA, [])
    yield svc
    svc.close()


def _session(user: str, agent: str, sid: str, says: list[str], tool_input: str) -> SessionInput:
    msgs = []
    for i, text in enumerate(says):
        msgs.append({"id": f"m{2 * i + 1}", "role": "user", "content": text})
        # the assistant echoes what the user said, as assistants do
        msgs.append(
            {"id": f"m{2 * i + 2}", "role": "assistant",
             "content": f"Try raising the export timeout for {text.split()[1]} and retry."}
        )  # fmt: skip
    return SessionInput.model_validate(
        {
            "account_id": "acme", "user_id": user, "agent_id": agent, "session_id": sid,
            "messages": msgs,
            "used_tools": [
                {"name": "web_search", "success": False, "input": tool_input,
                 "error": f"no results for {tool_input}"},
                {"name": "web_search", "success": True, "input": "export timeout fix",
                 "output": f"Raise the timeout. ({tool_input})"},
            ],
        }
    )  # fmt: skip


def _reads(svc: ContextEngineService, a: RequestContext, queries: list[str]) -> Iterator[str]:
    # what comes back, not the query echoed (a query may hold the words alice typed)
    for q in queries:
        yield "\n".join(h.model_dump_json() for h in svc.find(q, a, 20).hits)
        yield "\n".join(h.model_dump_json() for h in svc.search(q, a).hits)
        ctx = svc.build_context(q, a, budget=2000, incremental=False)
        recalled = [x for x in ctx.sections if x.name != "short_term"]  # not alice's own turn
        yield ctx.text.split("\n## Conversation\n")[0]
        yield "\n".join(x.model_dump_json() for x in recalled) + str(ctx.cited_refs)
    yield "\n".join(t.model_dump_json() for t in svc.find_tags(a, "", 200))
    for root in (f"ctx://acme/agents/{a.agent_id}/", f"ctx://acme/users/{a.user_id}/"):
        for n in svc.tree(root, a, depth=8):
            yield n.model_dump_json()
            if not n.version:  # a directory that only groups nodes
                continue
            for level in (0, 1, 2):
                yield svc.read(n.uri, a, level)
            yield svc.node(n.uri, a).model_dump_json()
            yield "\n".join(e.model_dump_json() for e in svc.relations(n.uri, a))
            yield "\n".join(e.model_dump_json() for e in svc.history(n.uri, a))


@settings(
    max_examples=4,
    deadline=None,
    phases=(Phase.explicit, Phase.generate),  # a commit per example: no slow shrinking
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(secrets=st.lists(_SECRET, min_size=3, max_size=3, unique=True))
def test_no_distinctive_word_of_b_reaches_any_read_of_a(
    service: ContextEngineService, secrets: list[str]
) -> None:
    run = next(_RUN)
    agent = f"helper{run}"
    x, y, z = secrets
    b_says = [_B_SAYS[0].format(x.capitalize(), y), _B_SAYS[1].format(x), _B_SAYS[2].format(x, z)]
    sessions = [
        _session("bob", agent, f"b{run}", b_says, f"{x} {y} export timeout"),
        _session("alice", agent, f"a{run}", _A_SAYS, "report export timeout"),
    ]
    for s in sessions:
        res = service.coordinator.commit_sync(CommitRequest.from_session(s))
        assert res.status.value == "success", res
    assert not reindex(make_indexer(service.runtime)).errors
    a = RequestContext(account_id="acme", user_id="alice", agent_id=agent, session_id="now")
    # the agent did learn from bob's session: its memories are there for alice to read
    agent_nodes = [n for n in service.tree(f"ctx://acme/agents/{agent}/", a, depth=8) if n.version]
    assert any("/cases/" in n.uri for n in agent_nodes), [n.uri for n in agent_nodes]
    queries = [*b_says, f"{x} {y} {z}", "export timeout error fix"]
    leaks = re.compile("|".join(rf"(?<![a-z]){s}(?![a-z])" for s in secrets))
    for text in _reads(service, a, queries):
        hit = leaks.search(text.casefold())
        assert hit is None, (hit.group(0), text[max(0, hit.start() - 200) : hit.end() + 200])
