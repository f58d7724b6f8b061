"""A worker killed in the middle of an archive's first write leaves its directory with only
staged files; the redelivered commit writes its archive there, with the number it would have
had, instead of failing on a directory that holds no node."""

from __future__ import annotations

from conftest import SESSION_1, TOOLS, commit, request

from ctxpipe.core.enums import CommitStatus
from ctxpipe.fs.atomic import STAGING_PREFIX


def test_a_half_written_archive_directory_is_repaired_by_the_next_write(
    make_components, unit_settings
):  # type: ignore[no-untyped-def]
    comp = make_components()
    husk = unit_settings.fs_root / "acme" / "sessions" / "s1" / "archives" / "1"
    (husk / f"{STAGING_PREFIX}1-killed").mkdir(parents=True)
    (husk / f"{STAGING_PREFIX}1-killed" / "content.md").write_text("half", encoding="utf-8")

    result = commit(comp, request(SESSION_1, tools=TOOLS))

    assert result.status is CommitStatus.SUCCESS, result.reason
    assert result.archive is not None
    assert result.archive.archive_uri == "ctx://acme/sessions/s1/archives/1"
    node = comp.fs.read_node(result.archive.archive_uri)
    assert "[m1]" in node.content and node.version == 1
    assert not any(p.name.startswith(STAGING_PREFIX) for p in husk.iterdir())
