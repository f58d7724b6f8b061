"""The fields every read request shares (`FindRequest`, `SearchRequest`, `ContextRequest`):
the query, refused when blank in the same words wherever it is built, and `as_of`, a day."""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

AS_OF = "profile and preference facts valid on this date (YYYY-MM-DD); omitted: valid now"


def _not_blank(v: object) -> object:
    """A blank query would return arbitrary hits (and count them as recalls). Checked before
    the length, so that "" is refused as empty too, in the same words."""
    if isinstance(v, str) and not v.strip():
        raise ValueError("the query is empty")
    return v


def _day(v: Any) -> Any:
    """A datetime is its day; "" (a form's empty field) is none."""
    if isinstance(v, datetime):
        return v.date()
    return None if v == "" else v


Query = Annotated[str, Field(min_length=1, max_length=8000), BeforeValidator(_not_blank)]
"""What to look for: 1 to 8000 characters, not all blank."""

AsOf = Annotated[date | None, BeforeValidator(_day)]
"""A day (a date, YYYY-MM-DD, or a datetime's day), or None for now."""

__all__ = ["AS_OF", "AsOf", "Query"]
