"""What the pages show, shaped from the service's answers (presentation only: every value
comes from a `ContextEngineService` call)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ctxpipe.core.session import RequestContext
from ctxpipe.core.validity import TEMPORAL_CATEGORIES, Validity, split_annotation

PHASES = ("archive", "extract", "plan", "write", "register")


@dataclass(frozen=True)
class Root:
    label: str
    uri: str


def roots(ctx: RequestContext) -> list[Root]:
    """The owner spaces the signed-in key acts in: its user, its agent, the user's sessions,
    and the account's shared scopes."""
    base = f"ctx://{ctx.account_id}"
    return [
        Root(f"user {ctx.user_id}", f"{base}/users/{ctx.user_id}"),
        Root(f"agent {ctx.agent_id}", f"{base}/agents/{ctx.agent_id}"),
        Root("sessions", f"{base}/sessions"),
        Root("resources", f"{base}/resources"),
        Root("skills", f"{base}/skills"),
    ]


@dataclass(frozen=True)
class FactLine:
    text: str
    validity: Validity
    temporal: bool

    @property
    def current(self) -> bool:
        return self.validity.holds()


def fact_lines(content: str, category: str) -> list[FactLine]:
    """The bullet lines of a memory's L2 with when they held (current vs superseded)."""
    temporal = category in TEMPORAL_CATEGORIES
    out: list[FactLine] = []
    for line in content.splitlines():
        stripped = line.strip()
        if not stripped.startswith(("- ", "* ", "• ")):
            continue
        head, validity = split_annotation(stripped[2:])
        out.append(FactLine(head, validity, temporal))
    return out


def tags_of(metadata: Mapping[str, Any]) -> list[str]:
    tags = metadata.get("tags")
    return [str(t) for t in tags] if isinstance(tags, list) else []


def plain_metadata(metadata: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Metadata other than the tags, as (key, short value) rows."""
    rows = []
    for k in sorted(metadata):
        if k == "tags":
            continue
        v = metadata[k]
        text = v if isinstance(v, str) else repr(v)
        rows.append((k, text if len(text) <= 300 else text[:300] + "…"))
    return rows


@dataclass(frozen=True)
class PhaseTime:
    phase: str
    ms: float | None


def phase_times(timings: Mapping[str, int | float]) -> list[PhaseTime]:
    """The duration of each phase of a commit in order (extractors one by one), then the
    total; a phase that has not run has none."""
    out: list[PhaseTime] = []
    for phase in PHASES:
        if phase == "extract":
            names = sorted(k for k in timings if k.startswith("extract_") and k.endswith("_ms"))
            out.extend(PhaseTime(k[: -len("_ms")], float(timings[k])) for k in names)
            continue
        value = timings.get(f"{phase}_ms")
        out.append(PhaseTime(phase, float(value) if value is not None else None))
    total = timings.get("total_ms")
    out.append(PhaseTime("total", float(total) if total is not None else None))
    return out


def total_ms(timings: Mapping[str, int | float]) -> float | None:
    value = timings.get("total_ms")
    return float(value) if value is not None else None


__all__ = [
    "FactLine",
    "PhaseTime",
    "Root",
    "fact_lines",
    "phase_times",
    "plain_metadata",
    "roots",
    "tags_of",
    "total_ms",
]
