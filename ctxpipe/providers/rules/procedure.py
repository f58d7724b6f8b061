"""`extraction.procedure`: cases (cases.py), patterns (routines.py) and skills (skills.py)."""

from __future__ import annotations

from typing import Any

from ctxpipe.providers.rules.cases import case_memory, find_cases
from ctxpipe.providers.rules.inputs import load_messages, load_tools
from ctxpipe.providers.rules.routines import extract_patterns
from ctxpipe.providers.rules.skills import extract_skills


def extract_procedure(variables: dict[str, Any]) -> dict[str, Any]:
    messages = load_messages(variables.get("messages"))
    tools = load_tools(variables.get("tools"))
    memories: list[dict[str, Any]] = []
    seen: set[str] = set()
    for case in find_cases(messages):
        mem = case_memory(case)
        key = mem["routing_key"]
        n = 2
        while mem["routing_key"] in seen:  # two different problems with the same slug
            mem["routing_key"] = f"{key}-{n}"
            n += 1
        seen.add(mem["routing_key"])
        memories.append(mem)
    memories.extend(extract_patterns(messages, tools))
    memories.extend(extract_skills(messages, tools))
    return {"memories": memories}
