"""`ctx://` URIs: parsing, validation, joins, and mapping to paths under the FS root.

Form: ``ctx://{account}/{scope}/{path...}[/]`` with scope one of users, agents, sessions,
resources, skills. Semantics: case-insensitive scheme, scope lower-cased,
directory vs file by trailing slash, the parent of a scope root is itself, join rules) and close
its "no traversal protection" limitation: every segment is validated so that a URI can never
name a path outside ``{fs_root}/{account}/{scope}``.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from ctxpipe.core.errors import InvalidURIError

SCHEME = "ctx"
SCOPES = ("users", "agents", "sessions", "resources", "skills")
MAX_URI_LENGTH = 512
MAX_SEGMENT_LENGTH = 128
MAX_DEPTH = 32

_ACCOUNT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
# Characters that are never allowed in a segment: path separators, Windows-reserved ones,
# percent (no percent-encoding is accepted, so no encoded traversal can slip through).
_FORBIDDEN_CHARS = set('\\:*?"<>|%')


def _check_segment(uri: str, seg: str) -> str:
    if seg == "":
        raise InvalidURIError(uri, "empty path segment ('//')")
    if len(seg.encode("utf-8")) > MAX_SEGMENT_LENGTH:
        raise InvalidURIError(uri, f"segment longer than {MAX_SEGMENT_LENGTH} bytes")
    for ch in seg:
        if ch in _FORBIDDEN_CHARS:
            what = "percent-encoding is not allowed" if ch == "%" else f"character {ch!r}"
            raise InvalidURIError(uri, f"forbidden {what} in segment {seg!r}")
        cat = unicodedata.category(ch)
        if cat.startswith("C") or cat in ("Zl", "Zp"):
            raise InvalidURIError(uri, f"control or invisible character U+{ord(ch):04X}")
    folded = unicodedata.normalize("NFKC", seg)
    if folded in (".", "..") or set(folded) <= {"."}:
        raise InvalidURIError(uri, f"relative segment {seg!r} is not allowed")
    if "/" in folded or "\\" in folded:
        raise InvalidURIError(uri, f"segment {seg!r} folds to a path separator")
    if seg.startswith("."):
        raise InvalidURIError(uri, f"hidden segment {seg!r} is reserved for node files")
    if seg != seg.strip():
        raise InvalidURIError(uri, f"segment {seg!r} has leading or trailing whitespace")
    return unicodedata.normalize("NFC", seg)


@dataclass(frozen=True, slots=True)
class CtxURI:
    """A validated ctx:// URI. Immutable; compare by value."""

    account: str
    scope: str
    segments: tuple[str, ...] = ()
    is_dir: bool = True

    # ---------------------------------------------------------------- parsing
    @classmethod
    def parse(cls, raw: str) -> CtxURI:
        if not isinstance(raw, str):
            raise InvalidURIError(repr(raw), "URI must be a string")
        uri = raw
        if len(uri) > MAX_URI_LENGTH:
            raise InvalidURIError(uri[:80] + "…", f"longer than {MAX_URI_LENGTH} characters")
        if "\x00" in uri:
            raise InvalidURIError(uri, "NUL character")
        m = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$", uri, re.S)
        if not m:
            if uri.startswith("/") or re.match(r"^[A-Za-z]:[\\/]", uri):
                raise InvalidURIError(uri, "absolute filesystem paths are not URIs")
            raise InvalidURIError(uri, "must start with ctx://")
        if m.group(1).lower() != SCHEME:
            raise InvalidURIError(uri, f"unknown scheme {m.group(1)!r} (expected ctx)")
        rest = m.group(2)
        if "\\" in rest:
            raise InvalidURIError(uri, "backslashes are not allowed")
        if rest.startswith("/"):
            raise InvalidURIError(uri, "missing account (absolute path after ctx://)")
        is_dir = rest.endswith("/")
        parts = rest[:-1].split("/") if is_dir else rest.split("/")
        if not parts or parts[0] == "":
            raise InvalidURIError(uri, "missing account")
        account = parts[0]
        if not _ACCOUNT_RE.fullmatch(account):
            raise InvalidURIError(
                uri, f"account {account!r} must be 1-64 chars of letters, digits, '-' or '_'"
            )
        if len(parts) < 2:
            raise InvalidURIError(uri, f"missing scope (one of {', '.join(SCOPES)})")
        scope = parts[1].lower()
        if scope not in SCOPES:
            raise InvalidURIError(uri, f"unknown scope {parts[1]!r} (one of {', '.join(SCOPES)})")
        segs = tuple(_check_segment(uri, s) for s in parts[2:])
        if len(segs) > MAX_DEPTH:
            raise InvalidURIError(uri, f"deeper than {MAX_DEPTH} segments")
        return cls(account, scope, segs, is_dir or not segs)

    @classmethod
    def root(cls, account: str, scope: str) -> CtxURI:
        return cls.parse(f"ctx://{account}/{scope}/")

    # ------------------------------------------------------------ properties
    @property
    def path(self) -> str:
        return "/".join(self.segments)

    @property
    def name(self) -> str:
        return self.segments[-1] if self.segments else self.scope

    @property
    def is_root(self) -> bool:
        return not self.segments

    @property
    def parent(self) -> CtxURI:
        """The containing directory; the parent of a scope root is the root itself."""
        if not self.segments:
            return self
        return CtxURI(self.account, self.scope, self.segments[:-1], True)

    @property
    def node(self) -> CtxURI:
        """The same URI without directory marker: the canonical identity of a node."""
        return CtxURI(self.account, self.scope, self.segments, not self.segments)

    def as_dir(self) -> CtxURI:
        return CtxURI(self.account, self.scope, self.segments, True)

    def join(self, rel: str) -> CtxURI:
        """Join a relative path. ``join("")`` is self; ``"x/"`` is a directory, ``"x"`` a file."""
        if rel == "":
            return self
        if rel.startswith("/"):
            raise InvalidURIError(f"{self}{rel}", "cannot join an absolute path")
        base = str(self.as_dir())
        return CtxURI.parse(base + rel)

    def is_within(self, other: CtxURI) -> bool:
        return (
            self.account == other.account
            and self.scope == other.scope
            and self.segments[: len(other.segments)] == other.segments
        )

    def relative_to_root(self) -> str:
        return "/".join((self.scope, *self.segments))

    # ------------------------------------------------------------ filesystem
    def to_path(self, fs_root: Path | str) -> Path:
        root = Path(fs_root).resolve()
        p = root.joinpath(self.account, self.scope, *self.segments)
        # Defence in depth: the validated segments can never escape, but check anyway.
        if root not in p.parents and p != root:
            raise InvalidURIError(str(self), "resolves outside the FS root")
        return p

    @classmethod
    def from_path(cls, fs_root: Path | str, path: Path | str, is_dir: bool = True) -> CtxURI:
        root = Path(fs_root).resolve()
        p = Path(path).resolve()
        try:
            rel = p.relative_to(root)
        except ValueError as exc:
            raise InvalidURIError(str(path), "path is not under the FS root") from exc
        parts = rel.parts
        if len(parts) < 2:
            raise InvalidURIError(str(path), "path names no account/scope")
        tail = "/".join(parts[2:])
        text = f"ctx://{parts[0]}/{parts[1]}/{tail}"
        if is_dir and tail:
            text += "/"
        return cls.parse(text)

    # ---------------------------------------------------------------- dunder
    def __str__(self) -> str:
        base = f"ctx://{self.account}/{self.scope}/"
        if not self.segments:
            return base
        return base + self.path + ("/" if self.is_dir else "")


def parse_uri(raw: str | CtxURI) -> CtxURI:
    return raw if isinstance(raw, CtxURI) else CtxURI.parse(raw)


def node_uri(raw: str | CtxURI) -> str:
    """Canonical node identity string (no trailing slash except for roots)."""
    return str(parse_uri(raw).node)


_SLUG_RE = re.compile(r"[^\w]+|_+", re.UNICODE)


def slugify(text: str, max_len: int = 64) -> str:
    """A URI-safe slug: lower-case words joined by '-', unicode letters kept."""
    s = unicodedata.normalize("NFKC", text).lower()
    s = _SLUG_RE.sub("-", s).strip("-_")
    s = s[:max_len].rstrip("-_")
    return s or "item"
