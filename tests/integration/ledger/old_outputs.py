"""What the commit steps stored for a one-message commit while their outputs were plain dicts.

The same JSON as today's models dump (their field names are its keys): a commit in flight
across an upgrade has these in the ledger, and the steps must read them back unchanged
(`test_ledger_old_outputs.py`).
"""

from __future__ import annotations

from typing import Any

OLD_MESSAGE = {"id": "m1", "role": "user", "content": "I'm a nurse in Porto."}
OLD_OUTPUTS: dict[str, Any] = {
    "archive": {
        "archive": {
            "session_id": "s-old",
            "archive_uri": None,
            "summary": "",
            "key_topics": [],
            "key_decisions": [],
            "unresolved": [],
            "recent_messages": [
                {
                    "id": "m1",
                    "role": "user",
                    "name": None,
                    "content": "I'm a nurse in Porto.",
                    "created_at": None,
                    "injected": False,
                }
            ],
            "used_contexts": [],
            "used_tools": [],
            "stats": {
                "total_turns": 1,
                "total_tokens": 5,
                "compression_count": 0,
                "memories_extracted": 0,
            },
            "persisted": False,
            "skipped_reason": "short session: 1 messages < threshold 3",
        },
        "usage": {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "retries": 0},
        "duration_ms": 0,
    },
    "extract:profile": {
        "report": {
            "extractor": "profile",
            "status": "ok",
            "candidates": 1,
            "reason": "",
            "duration_ms": 184,
            "started_at": 1795702435.8335311,
            "finished_at": 1795702436.0182292,
        },
        "usage": {"calls": 1, "prompt_tokens": 9, "completion_tokens": 30, "retries": 0},
        "candidates": [
            {
                "kind": "memory",
                "category": "profile",
                "owner_scope": "user",
                "routing_key": "profile",
                "abstract": "rita: The user is a nurse in Porto",
                "overview": "- The user is a nurse in Porto. [m1]",
                "content": "- The user is a nurse in Porto. [m1]",
                "confidence": 0.7,
                "source_refs": ["m1"],
                "language": "en",
                "event_time": None,
                "observed_at": None,
            }
        ],
    },
    "extract:preferences": {
        "report": {
            "extractor": "preferences",
            "status": "empty",
            "candidates": 0,
            "reason": "nothing for preferences in 1 messages (1 from the user)",
            "duration_ms": 0,
            "started_at": 1795702436.0184584,
            "finished_at": 1795702436.0188026,
        },
        "usage": {"calls": 1, "prompt_tokens": 9, "completion_tokens": 0, "retries": 0},
        "candidates": [],
    },
    "extract:entity_event": {
        "report": {
            "extractor": "entity_event",
            "status": "ok",
            "candidates": 1,
            "reason": "",
            "duration_ms": 0,
            "started_at": 1795702436.0188224,
            "finished_at": 1795702436.0191596,
        },
        "usage": {"calls": 1, "prompt_tokens": 9, "completion_tokens": 30, "retries": 0},
        "candidates": [
            {
                "kind": "memory",
                "category": "entities",
                "owner_scope": "user",
                "routing_key": "porto",
                "abstract": "Porto: The user is a nurse in Porto",
                "overview": "- The user is a nurse in Porto. [m1]",
                "content": "- The user is a nurse in Porto. [m1]",
                "confidence": 0.7,
                "source_refs": ["m1"],
                "language": "en",
                "event_time": None,
                "observed_at": None,
            }
        ],
    },
    "extract:procedure": {
        "report": {
            "extractor": "procedure",
            "status": "empty",
            "candidates": 0,
            "reason": "nothing for cases, patterns, skills in 1 messages (1 from the user)",
            "duration_ms": 0,
            "started_at": 1795702436.0191839,
            "finished_at": 1795702436.019302,
        },
        "usage": {"calls": 1, "prompt_tokens": 9, "completion_tokens": 0, "retries": 0},
        "candidates": [],
    },
    "plan": {
        "items": [
            {
                "plan": {
                    "action": "create",
                    "target_uri": "ctx://acme/users/rita/memories/entities/porto",
                    "category": "entities",
                    "owner_space": "",
                    "node_patch": {
                        "abstract": "Porto: The user is a nurse in Porto",
                        "overview": "- The user is a nurse in Porto. [s-old:m1]",
                        "content": "- The user is a nurse in Porto. [s-old:m1]",
                    },
                    "relation_ops": [],
                    "reason": "new topic; no vector index configured; created without prefilter",
                    "metadata_patch": {"routing_key": "porto", "confidence": 0.7},
                    "source_refs": ["s-old:m1"],
                    "expected_version": 0,
                    "dedup": {
                        "decision": "create",
                        "merge_target": None,
                        "score": None,
                        "reason": "no vector index configured; created without prefilter",
                    },
                },
                "candidates": [
                    {
                        "kind": "memory",
                        "category": "entities",
                        "owner_scope": "user",
                        "routing_key": "porto",
                        "abstract": "Porto: The user is a nurse in Porto",
                        "overview": "- The user is a nurse in Porto. [s-old:m1]",
                        "content": "- The user is a nurse in Porto. [s-old:m1]",
                        "confidence": 0.7,
                        "source_refs": ["m1"],
                        "language": "en",
                        "event_time": None,
                        "observed_at": None,
                    }
                ],
            },
            {
                "plan": {
                    "action": "create",
                    "target_uri": "ctx://acme/users/rita/memories/profile",
                    "category": "profile",
                    "owner_space": "",
                    "node_patch": {
                        "abstract": "rita: The user is a nurse in Porto",
                        "overview": "- The user is a nurse in Porto. [s-old:m1]",
                        "content": "- The user is a nurse in Porto. [s-old:m1]",
                    },
                    "relation_ops": [],
                    "reason": "first profile facts for this user",
                    "metadata_patch": {"routing_key": "profile", "confidence": 0.7},
                    "source_refs": ["s-old:m1"],
                    "expected_version": 0,
                    "dedup": None,
                },
                "candidates": [
                    {
                        "kind": "memory",
                        "category": "profile",
                        "owner_scope": "user",
                        "routing_key": "profile",
                        "abstract": "rita: The user is a nurse in Porto",
                        "overview": "- The user is a nurse in Porto. [s-old:m1]",
                        "content": "- The user is a nurse in Porto. [s-old:m1]",
                        "confidence": 0.7,
                        "source_refs": ["m1"],
                        "language": "en",
                        "event_time": None,
                        "observed_at": None,
                    }
                ],
            },
        ],
        "skipped": [],
        "extractors": [
            {
                "extractor": "profile",
                "status": "ok",
                "candidates": 1,
                "reason": "",
                "duration_ms": 184,
                "started_at": 1795702435.8335311,
                "finished_at": 1795702436.0182292,
            },
            {
                "extractor": "preferences",
                "status": "empty",
                "candidates": 0,
                "reason": "nothing for preferences in 1 messages (1 from the user)",
                "duration_ms": 0,
                "started_at": 1795702436.0184584,
                "finished_at": 1795702436.0188026,
            },
            {
                "extractor": "entity_event",
                "status": "ok",
                "candidates": 1,
                "reason": "",
                "duration_ms": 0,
                "started_at": 1795702436.0188224,
                "finished_at": 1795702436.0191596,
            },
            {
                "extractor": "procedure",
                "status": "empty",
                "candidates": 0,
                "reason": "nothing for cases, patterns, skills in 1 messages (1 from the user)",
                "duration_ms": 0,
                "started_at": 1795702436.0191839,
                "finished_at": 1795702436.019302,
            },
        ],
        "candidates_extracted": 2,
        "usage": {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "retries": 0},
        "warnings": [],
        "duration_ms": 0,
    },
    "write": {
        "archive": {
            "session_id": "s-old",
            "archive_uri": None,
            "summary": "",
            "key_topics": [],
            "key_decisions": [],
            "unresolved": [],
            "recent_messages": [
                {
                    "id": "m1",
                    "role": "user",
                    "name": None,
                    "content": "I'm a nurse in Porto.",
                    "created_at": None,
                    "injected": False,
                }
            ],
            "used_contexts": [],
            "used_tools": [],
            "stats": {
                "total_turns": 1,
                "total_tokens": 5,
                "compression_count": 0,
                "memories_extracted": 0,
            },
            "persisted": False,
            "skipped_reason": "short session: 1 messages < threshold 3",
        },
        "write_results": [
            {
                "uri": "ctx://acme/users/rita/memories/entities/porto",
                "action": "create",
                "node_version": 1,
                "created": True,
                "updated": False,
                "error": None,
            },
            {
                "uri": "ctx://acme/users/rita/memories/profile",
                "action": "create",
                "node_version": 1,
                "created": True,
                "updated": False,
                "error": None,
            },
        ],
        "relation_edges": [],
        "failed": [],
        "usage": {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "retries": 0},
        "duration_ms": 9,
    },
}
# the row's `extractors`, one entry per extractor as its output was stored
OLD_EXTRACTORS: dict[str, Any] = {
    "profile": {"status": "ok", "candidates": 1, "reason": "", "duration_ms": 184},
    "preferences": {
        "status": "empty",
        "candidates": 0,
        "reason": "nothing for preferences in 1 messages (1 from the user)",
        "duration_ms": 0,
    },
    "entity_event": {"status": "ok", "candidates": 1, "reason": "", "duration_ms": 0},
    "procedure": {
        "status": "empty",
        "candidates": 0,
        "reason": "nothing for cases, patterns, skills in 1 messages (1 from the user)",
        "duration_ms": 0,
    },
}
