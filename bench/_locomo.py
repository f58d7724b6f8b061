"""LoCoMo conversations as ctxpipe sessions (the data is read in place, never copied).

One account per conversation; speaker_a is the user, speaker_b the agent (both named); a turn's
`dia_id` is its message id; the session date is every message's timestamp (one second apart);
a shared image is kept as its caption.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared/data/locomo/locomo_dev.json"


_ID_RE = re.compile(r"D\d+:\d+")


def evidence_ids(raw: Sequence[str]) -> set[str]:
    """Normalised evidence turn ids ('D:11:26' -> 'D11:26', 'D9:1 D4:4' -> two ids)."""
    out: set[str] = set()
    for item in raw:
        for part in re.split(r"[\s,;]+", str(item)):
            part = re.sub(r"^D:(\d+):", r"D\1:", part.strip())
            if _ID_RE.fullmatch(part):
                out.add(part)
    return out


def load(path: Path | None = None) -> list[dict[str, Any]]:
    return json.loads((path or DEFAULT_DATA).read_text(encoding="utf-8"))


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "x"


def turn_text(turn: dict[str, Any]) -> str:
    text = str(turn.get("text", "")).strip()
    caption = turn.get("blip_caption")
    if caption:
        text = f"{text} (shared a photo: {caption})".strip()
    return text


def parse_date(text: str) -> datetime:
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y")


def sessions_of(conv: dict[str, Any]) -> list[tuple[int, datetime, list[dict[str, Any]]]]:
    out = []
    for key, turns in conv.items():
        m = re.fullmatch(r"session_(\d+)", key)
        if m and isinstance(turns, list) and turns:
            out.append((int(m.group(1)), parse_date(conv[f"{key}_date_time"]), turns))
    return sorted(out)


def session_inputs(sample: dict[str, Any]) -> list[dict[str, Any]]:
    """Every session of one conversation as the session JSON a producer commits, in order."""
    conv = sample["conversation"]
    a, b = conv["speaker_a"], conv["speaker_b"]
    account = slug(f"locomo-{sample['sample_id']}")
    out = []
    for n, date, items in sessions_of(conv):
        sid = f"{slug(sample['sample_id'])}-s{n}"
        messages = [
            {
                "id": t["dia_id"],
                "role": "user" if t["speaker"] == a else "assistant",
                "name": t["speaker"],
                "content": turn_text(t),
                "created_at": (date + timedelta(seconds=i)).isoformat(),
            }
            for i, t in enumerate(items)
        ]
        out.append(
            {
                "account_id": account,
                "user_id": slug(a),
                "agent_id": slug(b),
                "session_id": sid,
                "commit_id": f"locomo-{sid}",
                "messages": messages,
            }
        )
    return out
