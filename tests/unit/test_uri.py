"""ctx:// URI semantics and traversal protection."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_examples import examples

from ctxpipe.core.errors import InvalidURIError
from ctxpipe.core.uri import (
    MAX_DEPTH,
    MAX_SEGMENT_LENGTH,
    MAX_URI_LENGTH,
    SCOPES,
    CtxURI,
    node_uri,
    parse_uri,
)

# ---------------------------------------------------------------------------- semantics


def test_parse_components() -> None:
    u = CtxURI.parse("ctx://acme/users/u1/memories/profile")
    assert (u.account, u.scope, u.segments) == ("acme", "users", ("u1", "memories", "profile"))
    assert u.is_dir is False
    assert u.name == "profile"
    assert u.path == "u1/memories/profile"
    assert str(u) == "ctx://acme/users/u1/memories/profile"


@pytest.mark.parametrize(
    "raw", ["CTX://acme/users/u1", "Ctx://acme/users/u1", "cTx://acme/users/u1"]
)
def test_scheme_is_case_insensitive(raw: str) -> None:
    assert str(CtxURI.parse(raw)) == "ctx://acme/users/u1"


@pytest.mark.parametrize("scope", ["USERS", "Users", "uSeRs"])
def test_scope_is_lower_cased(scope: str) -> None:
    u = CtxURI.parse(f"ctx://acme/{scope}/u1/")
    assert u.scope == "users"
    assert str(u) == "ctx://acme/users/u1/"


def test_segments_and_account_keep_their_case() -> None:
    u = CtxURI.parse("ctx://Acme/users/Bob/Notes")
    assert u.account == "Acme"
    assert u.segments == ("Bob", "Notes")


def test_trailing_slash_means_directory() -> None:
    d = CtxURI.parse("ctx://acme/users/u1/notes/")
    f = CtxURI.parse("ctx://acme/users/u1/notes")
    assert d.is_dir and not f.is_dir
    assert d != f
    assert d.segments == f.segments
    assert str(d) == "ctx://acme/users/u1/notes/"


@pytest.mark.parametrize("raw", ["ctx://acme/users", "ctx://acme/users/"])
def test_scope_root_is_always_a_directory(raw: str) -> None:
    u = CtxURI.parse(raw)
    assert u.is_dir and u.is_root
    assert str(u) == "ctx://acme/users/"


def test_parent_of_root_is_itself() -> None:
    root = CtxURI.parse("ctx://acme/skills/")
    assert root.parent == root
    assert root.parent.parent == root


def test_parent_is_a_directory() -> None:
    u = CtxURI.parse("ctx://acme/users/u1/memories/profile")
    assert str(u.parent) == "ctx://acme/users/u1/memories/"
    assert u.parent.is_dir
    assert str(u.parent.parent.parent) == "ctx://acme/users/"


def test_join_rules() -> None:
    base = CtxURI.parse("ctx://acme/users/u1/")
    assert base.join("") is base
    d = base.join("x/")
    assert d.is_dir and str(d) == "ctx://acme/users/u1/x/"
    f = base.join("x")
    assert not f.is_dir and str(f) == "ctx://acme/users/u1/x"
    assert str(base.join("a/b/c")) == "ctx://acme/users/u1/a/b/c"
    # joining onto a file URI joins inside it (as a directory)
    assert str(CtxURI.parse("ctx://acme/users/u1").join("y")) == "ctx://acme/users/u1/y"


@pytest.mark.parametrize("rel", ["../x", "a/../../b", "/etc", "./x", "a//b", ".meta.json"])
def test_join_rejects_escapes(rel: str) -> None:
    with pytest.raises(InvalidURIError):
        CtxURI.parse("ctx://acme/users/u1/").join(rel)


def test_node_identity_drops_trailing_slash() -> None:
    assert node_uri("ctx://acme/users/u1/notes/") == "ctx://acme/users/u1/notes"
    assert node_uri("ctx://acme/users/u1/notes") == "ctx://acme/users/u1/notes"
    assert node_uri("ctx://acme/users") == "ctx://acme/users/"
    u = CtxURI.parse("ctx://acme/users/u1/")
    assert parse_uri(u) is u


def test_unicode_segments_are_nfc_normalised() -> None:
    nfd = "ctx://acme/users/u1/cafe\u0301"
    nfc = "ctx://acme/users/u1/caf\u00e9"
    assert CtxURI.parse(nfd) == CtxURI.parse(nfc)
    assert CtxURI.parse("ctx://acme/users/用户/笔记").segments == ("用户", "笔记")


def test_is_within() -> None:
    base = CtxURI.parse("ctx://acme/users/u1/")
    assert CtxURI.parse("ctx://acme/users/u1/a/b").is_within(base)
    assert not CtxURI.parse("ctx://acme/users/u2/a").is_within(base)
    assert not CtxURI.parse("ctx://other/users/u1/a").is_within(base)


def test_to_path_and_from_path_round_trip(tmp_path: Path) -> None:
    for raw in (
        "ctx://acme/users/u1/memories/profile",
        "ctx://acme/users/u1/memories/",
        "ctx://acme/agents/",
        "ctx://acme/resources/docs/readme.md",
    ):
        u = CtxURI.parse(raw)
        p = u.to_path(tmp_path)
        assert p == tmp_path.resolve().joinpath(u.account, u.scope, *u.segments)
        assert CtxURI.from_path(tmp_path, p, is_dir=u.is_dir) == u


def test_from_path_rejects_paths_outside_root(tmp_path: Path) -> None:
    with pytest.raises(InvalidURIError, match="not under the FS root"):
        CtxURI.from_path(tmp_path / "root", tmp_path / "elsewhere" / "acme" / "users")
    with pytest.raises(InvalidURIError, match="no account/scope"):
        CtxURI.from_path(tmp_path, tmp_path / "acme")
    with pytest.raises(InvalidURIError):
        CtxURI.from_path(tmp_path, tmp_path / "acme" / "users" / "u1" / ".meta.json", False)


def test_from_path_does_not_follow_symlinks_out(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "acme" / "users").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "acme" / "users" / "link").symlink_to(outside)
    with pytest.raises(InvalidURIError, match="not under the FS root"):
        CtxURI.from_path(root, root / "acme" / "users" / "link")


# ---------------------------------------------------------------------------- rejections

REJECTED: dict[str, str] = {
    "dotdot": "ctx://acme/users/u1/../../etc/passwd",
    "dotdot at end": "ctx://acme/users/..",
    "dot": "ctx://acme/users/./u1",
    "three dots": "ctx://acme/users/.../x",
    "empty segment": "ctx://acme/users//u1",
    "double trailing slash": "ctx://acme/users/u1//",
    "absolute path": "/etc/passwd",
    "absolute after scheme": "ctx:///etc",
    "windows drive": "C:\\x",
    "windows drive slash": "C:/Windows/system32",
    "backslash": "ctx://acme/users/u1\\..\\x",
    "NUL": "ctx://acme/users/u1\x00/x",
    "newline": "ctx://acme/users/u1\n",
    "tab": "ctx://acme/users/u\t1",
    "escape char": "ctx://acme/users/u\x1b1",
    "DEL": "ctx://acme/users/u\x7f1",
    "zero width space": "ctx://acme/users/u\u200b1",
    "bidi override": "ctx://acme/users/u\u202e1",
    "line separator": "ctx://acme/users/u\u20281",
    "percent dotdot": "ctx://acme/users/%2e%2e/x",
    "percent slash": "ctx://acme/users/u1%2Fx",
    "percent anything": "ctx://acme/users/a%20b",
    "fullwidth dots": "ctx://acme/users/．．/x",
    "fullwidth dot": "ctx://acme/users/．/x",
    "two dot leader": "ctx://acme/users/\u2025/x",
    "fullwidth solidus": "ctx://acme/users/a／b",
    "fullwidth backslash": "ctx://acme/users/a＼b",
    "unknown scope": "ctx://acme/secrets/u1",
    "bad account chars": "ctx://ac.me/users/u1",
    "account with space": "ctx://ac me/users/u1",
    "account newline": "ctx://acme\n/users/u1",
    "account starting with dash": "ctx://-acme/users/u1",
    "account too long": "ctx://" + "a" * 65 + "/users/u1",
    "missing account": "ctx:///users/u1",
    "over-long segment": "ctx://acme/users/" + "x" * (MAX_SEGMENT_LENGTH + 1),
    "over-long multibyte segment": "ctx://acme/users/" + "é" * (MAX_SEGMENT_LENGTH // 2 + 1),
    "over-long URI": "ctx://acme/users/" + "/".join(["abcdefghij"] * 60),
    "too deep": "ctx://acme/users/" + "/".join(["a"] * (MAX_DEPTH + 1)),
    "hidden meta segment": "ctx://acme/users/u1/.meta.json",
    "hidden segment": "ctx://acme/users/.git/config",
    "wrong scheme": "http://acme/users/u1",
    "file scheme": "file:///etc/passwd",
    "no scheme": "acme/users/u1",
    "missing scope": "ctx://acme",
    "missing scope slash": "ctx://acme/",
    "leading space segment": "ctx://acme/users/ u1",
    "trailing space segment": "ctx://acme/users/u1 /x",
    "nbsp padded": "ctx://acme/users/\u00a0u1",
    "whitespace-only segment": "ctx://acme/users/   /x",
    "leading whitespace": " ctx://acme/users/u1",
    "colon": "ctx://acme/users/c:/x",
    "question mark": "ctx://acme/users/u1?x=1",
    "wildcard": "ctx://acme/users/*",
    "pipe": "ctx://acme/users/a|b",
    "empty": "",
}


@pytest.mark.parametrize("raw", list(REJECTED.values()), ids=list(REJECTED))
def test_rejected_inputs(raw: str) -> None:
    with pytest.raises(InvalidURIError) as info:
        CtxURI.parse(raw)
    assert str(info.value).startswith("invalid URI ")
    assert info.value.why


def test_there_are_many_rejections() -> None:
    assert len(REJECTED) >= 20


def test_non_string_is_rejected() -> None:
    with pytest.raises(InvalidURIError, match="must be a string"):
        CtxURI.parse(b"ctx://acme/users/u1")  # type: ignore[arg-type]


def test_error_messages_say_why() -> None:
    cases = {
        "ctx://acme/users/u1/../x": "relative segment",
        "ctx://acme/users/%2e%2e": "percent-encoding",
        "ctx://acme/nope/x": "unknown scope",
        "ctx://acme/users/.meta.json": "hidden segment",
        "ctx:///etc": "missing account",
        "C:\\x": "absolute filesystem path",
        "http://acme/users": "unknown scheme",
    }
    for raw, why in cases.items():
        with pytest.raises(InvalidURIError, match=why):
            CtxURI.parse(raw)


def test_limits_are_inclusive() -> None:
    ok_segment = "x" * MAX_SEGMENT_LENGTH
    assert CtxURI.parse(f"ctx://acme/users/{ok_segment}").name == ok_segment
    assert (
        len(CtxURI.parse("ctx://acme/users/" + "/".join(["a"] * MAX_DEPTH)).segments) == MAX_DEPTH
    )
    long_ok = "ctx://acme/users/" + "a" * (MAX_URI_LENGTH - len("ctx://acme/users/"))
    with pytest.raises(InvalidURIError, match="segment longer"):
        CtxURI.parse(long_ok)  # within the URI limit, but one over-long segment


# ---------------------------------------------------------------------------- property

_segment_chars = st.characters(
    blacklist_categories=("Cs",), blacklist_characters="/"
)  # everything else, including control chars, dots, backslashes, percent, fullwidth forms
_segment = st.one_of(
    st.text(_segment_chars, min_size=0, max_size=12),
    st.sampled_from(["..", ".", "．．", "%2e%2e", "a\\b", " x", ".meta.json", "‥", "…"]),
)


@settings(max_examples=examples(400), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    account=st.one_of(st.sampled_from(["acme", "A-1", "x_y"]), st.text(max_size=6)),
    scope=st.one_of(st.sampled_from([*SCOPES, "USERS", "Skills"]), st.text(max_size=6)),
    segments=st.lists(_segment, max_size=6),
    trailing=st.booleans(),
)
def test_any_parsed_uri_maps_inside_its_root(
    tmp_path: Path, account: str, scope: str, segments: list[str], trailing: bool
) -> None:
    raw = f"ctx://{account}/{scope}/" + "/".join(segments) + ("/" if trailing else "")
    try:
        u = CtxURI.parse(raw)
    except InvalidURIError:
        return
    base = (tmp_path / u.account / u.scope).resolve()
    p = u.to_path(tmp_path)
    assert p == base or base in p.parents
    assert u.scope in SCOPES
    assert all(
        part not in (".", "..") and not part.startswith(".") for part in p.relative_to(base).parts
    )
    # and the canonical text parses back to the same URI
    assert CtxURI.parse(str(u)) == u
    assert CtxURI.from_path(tmp_path, p, is_dir=u.is_dir) == u
