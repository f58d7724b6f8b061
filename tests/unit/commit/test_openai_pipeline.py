"""The commit pipeline on the `openai` provider, against a chat-completions server on
127.0.0.1: a model that answers in schema works end to end (and its token usage lands in the
commit stats); a model that wraps its JSON in prose and fences, as local models do, works
without a retry (its replies counted `repaired` per phase); a model that only ever answers
garbage fails the commit with nothing written."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from conftest import SESSION_1, SESSION_2, commit, request, snapshot

from ctxpipe.core.enums import CommitStatus
from ctxpipe.core.errors import CommitError
from ctxpipe.providers.openai_llm import OpenAICompatibleLLM


def answer(schema_name: str, prompt: str) -> str:
    """A tiny 'model': valid JSON for each prompt kind, citing ids seen in the prompt."""
    if "merge" in schema_name:
        return json.dumps(
            {
                "abstract": "Alice is an ML engineer at Globex in Berlin.",
                "overview": "- ML engineer at Globex\n- lives in Berlin",
                "content": "- works as a machine learning engineer at Globex [n1]\n"
                "- lives in Berlin [m1]",
                "reason": "new employer",
            }
        )
    summary = {
        "summary": "Alice talked about her job and an Airflow error.",
        "key_topics": ["airflow"],
        "key_decisions": [],
        "unresolved": [],
    }
    if "archive" in schema_name:
        return json.dumps(summary)
    if "session" in schema_name:  # the summary and every extractor's memories in one answer
        return json.dumps({**summary, **json.loads(answer("extraction_profile", prompt))})
    if "profile" in schema_name and "[n1]" in prompt:
        return json.dumps(
            {
                "memories": [
                    {
                        "category": "profile",
                        "routing_key": "profile",
                        "abstract": "Alice is a machine learning engineer at Globex.",
                        "content": "- works as a machine learning engineer at Globex [n1]",
                        "confidence": 0.9,
                        "source_refs": ["n1"],
                    }
                ]
            }
        )
    if "profile" in schema_name:
        assert "[m1]" in prompt
        return json.dumps(
            {
                "memories": [
                    {
                        "category": "profile",
                        "routing_key": "profile",
                        "abstract": "Alice is a data engineer at Acme Corp in Berlin.",
                        "overview": "- data engineer at Acme Corp\n- lives in Berlin",
                        "content": "- works as a data engineer at Acme Corp [m1]\n"
                        "- lives in Berlin [m1]",
                        "confidence": 0.9,
                        "source_refs": ["m1"],
                    }
                ]
            }
        )
    if "extraction" in schema_name:
        return json.dumps({"memories": []})
    raise AssertionError(f"unexpected prompt {schema_name}")


@pytest.fixture
def chat_server() -> Iterator[dict[str, Any]]:
    state: dict[str, Any] = {"garbage": False, "calls": 0, "wrap": None}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802
            payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state["calls"] += 1
            name = payload["response_format"]["json_schema"]["name"]
            prompt = payload["messages"][-1]["content"]
            content = "{not json" if state["garbage"] else answer(name, prompt)
            if state["wrap"] is not None:
                content = state["wrap"](name, content)
            body = json.dumps(
                {
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": content},
                        }
                    ],
                    "usage": {"prompt_tokens": 120, "completion_tokens": 30},
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    # a short poll interval: shutdown() waits up to one interval (0.5 s by default)
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    state["url"] = f"http://127.0.0.1:{server.server_address[1]}/v1"
    yield state
    server.shutdown()
    server.server_close()


def openai_llm(settings, url: str) -> OpenAICompatibleLLM:  # type: ignore[no-untyped-def]
    s = settings.model_copy(
        update={"llm_provider": "openai", "llm_base_url": url, "llm_max_retries": 2}
    )
    return OpenAICompatibleLLM(s, retry_wait_s=0.01, retry_wait_max_s=0.02)


def one_call_per_extractor(settings):  # type: ignore[no-untyped-def]
    commit_config = settings.commit.model_copy(update={"extraction_calls": "extractor"})
    return settings.model_copy(update={"commit": commit_config})


def test_commit_on_openai_provider_records_token_usage(make_components, unit_settings, chat_server):
    comp = make_components(llm=openai_llm(unit_settings, chat_server["url"]))
    result = commit(comp, request(SESSION_1))
    assert result.status is CommitStatus.SUCCESS, result.reason
    profile = comp.fs.read_node("ctx://acme/users/alice/memories/profile")
    assert "data engineer" in profile.content and "s1:m1" in profile.source_refs
    # one call: the archive's summary and the four extractors' memories
    assert result.stats.llm_calls == chat_server["calls"] == 1
    assert result.stats.llm_prompt_tokens == 120
    assert result.stats.llm_completion_tokens == 30
    assert set(result.stats.llm_by_phase) == {"archive"}


def test_one_call_per_extractor_records_the_cost_of_each(
    make_components, unit_settings, chat_server
):
    comp = make_components(
        llm=openai_llm(unit_settings, chat_server["url"]),
        settings=one_call_per_extractor(unit_settings),
    )
    result = commit(comp, request(SESSION_1))
    assert result.status is CommitStatus.SUCCESS, result.reason
    profile = comp.fs.read_node("ctx://acme/users/alice/memories/profile")
    assert "data engineer" in profile.content and "s1:m1" in profile.source_refs
    assert result.stats.llm_calls == chat_server["calls"] == 5  # archive + 4 extractors
    assert result.stats.llm_prompt_tokens == 5 * 120
    assert result.stats.llm_completion_tokens == 5 * 30
    # the cost per phase: one call for the archive and one per extractor, summing to the total
    by_phase = result.stats.llm_by_phase
    assert set(by_phase) == {
        "archive",
        "extract_profile",
        "extract_preferences",
        "extract_entity_event",
        "extract_procedure",
    }
    assert all(u.calls == 1 and u.prompt_tokens == 120 for u in by_phase.values())
    assert sum(u.completion_tokens for u in by_phase.values()) == 5 * 30


def test_model_that_only_answers_garbage_fails_cleanly(make_components, unit_settings, chat_server):
    chat_server["garbage"] = True
    comp = make_components(llm=openai_llm(unit_settings, chat_server["url"]))
    with pytest.raises(CommitError) as info:
        commit(comp, request(SESSION_1))
    assert info.value.phase == "archive"
    assert "archive" in str(info.value)
    # one attempt + two retries of the session's call, the same of the summary's own, then a
    # clear error
    assert chat_server["calls"] == 6
    assert snapshot(unit_settings.fs_root) == {}


def local_model_style(_: str, content: str) -> str:
    """How a local model without guided decoding tends to answer a JSON-only prompt."""
    loose = content.replace('"memories": []', '"memories": [],')  # a trailing comma
    return f"Here is the JSON:\n```json\n{loose}\n```\nLet me know if you need anything else!"


def test_prose_wrapped_json_is_repaired_not_retried(make_components, unit_settings, chat_server):
    chat_server["wrap"] = local_model_style
    comp = make_components(llm=openai_llm(unit_settings, chat_server["url"]))
    result = commit(comp, request(SESSION_1))
    assert result.status is CommitStatus.SUCCESS, result.reason
    profile = comp.fs.read_node("ctx://acme/users/alice/memories/profile")
    assert "data engineer" in profile.content
    assert chat_server["calls"] == 1  # one request per call: nothing retried
    by_phase = result.stats.llm_by_phase
    assert set(by_phase) == {"archive"}
    counts = {(u.calls, u.repaired, u.retried, u.failed) for u in by_phase.values()}
    assert counts == {(1, 1, 0, 0)}

    # the plan phase too: a second session's profile is merged into the first by the model
    result = commit(comp, request(SESSION_2, session="s2", commit_id="c2"))
    assert result.status is CommitStatus.SUCCESS, result.reason
    assert "Globex" in comp.fs.read_node("ctx://acme/users/alice/memories/profile").content
    plan = result.stats.llm_by_phase["plan"]
    assert plan.calls >= 1 and plan.repaired == plan.calls and plan.retried == 0
    assert sum(u.retries for u in result.stats.llm_by_phase.values()) == 0


def test_unrepairable_output_counts_retried_and_failed(make_components, unit_settings, chat_server):
    """An extractor whose every reply is a markdown list fails alone; the commit goes on, its
    phase counting the retries and the failure."""

    def markdown_for_preferences(name: str, content: str) -> str:
        return "- prefers Python\n- uses type hints" if "preferences" in name else content

    chat_server["wrap"] = markdown_for_preferences
    comp = make_components(
        llm=openai_llm(unit_settings, chat_server["url"]),
        settings=one_call_per_extractor(unit_settings),
    )
    result = commit(comp, request(SESSION_1))
    assert result.status is CommitStatus.PARTIAL, result.reason
    prefs = result.stats.llm_by_phase["extract_preferences"]
    assert (prefs.calls, prefs.repaired, prefs.retried, prefs.failed) == (1, 0, 2, 1)
    assert result.stats.llm_by_phase["extract_profile"].failed == 0


def test_a_session_call_it_cannot_answer_falls_back_to_one_call_per_extractor(
    make_components, unit_settings, chat_server
):
    """A model that cannot produce the session's combined answer (here: never valid JSON for
    it) still gets the session committed: the summary and each extractor are asked alone."""
    chat_server["wrap"] = lambda name, content: "{not json" if "session" in name else content
    comp = make_components(llm=openai_llm(unit_settings, chat_server["url"]))
    result = commit(comp, request(SESSION_1))
    assert result.status is CommitStatus.SUCCESS, result.reason
    assert "data engineer" in comp.fs.read_node("ctx://acme/users/alice/memories/profile").content
    assert chat_server["calls"] == 3 + 5  # the session call and its two retries, then 1 + 4
    archive = result.stats.llm_by_phase["archive"]
    assert (archive.calls, archive.retried, archive.failed) == (2, 2, 1)
    assert result.stats.llm_by_phase["extract_profile"].calls == 1
