"""The `Retry-After` header of an HTTP answer (RFC 9110 §10.2.3): a number of seconds or an
HTTP-date, read as seconds from now."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

MAX_RETRY_AFTER_S = 3600.0  # a later date is read as an hour: a bogus header must not park work


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait, from `value` (`"120"`, `"1.5"`, `"Wed, 21 Oct 2015 07:28:00 GMT"`);
    None when the header is absent or unreadable. A date in the past is 0 s; anything over
    an hour is an hour."""
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    seconds: float | None
    try:
        seconds = float(text)
    except ValueError:
        seconds = _from_date(text, now)
    if seconds is None:
        return None
    if not math.isfinite(seconds) or seconds < 0:
        return None
    return min(seconds, MAX_RETRY_AFTER_S)


def _from_date(text: str, now: datetime | None) -> float | None:
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:  # an HTTP-date is always GMT
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


__all__ = ["MAX_RETRY_AFTER_S", "parse_retry_after"]
