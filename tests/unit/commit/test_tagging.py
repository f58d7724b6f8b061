"""Tags: 3-8 atomic lowercase tags per memory, reused before created."""

from __future__ import annotations

from conftest import SESSION_1, SESSION_2, commit, request

from ctxpipe.commit.tagging import MAX_TAGS, candidate_tags, choose_tags, prefix_of
from ctxpipe.retrieval.units.lexical import stem


class Vocab:
    def __init__(self, tags: list[str]) -> None:
        self.tags = list(tags)
        self.lookups: list[str] = []

    def find_tags(self, prefix: str, limit: int = 50) -> list[str]:
        self.lookups.append(prefix)
        return [t for t in self.tags if t.startswith(prefix)][:limit]

    def add(self, tags):  # type: ignore[no-untyped-def]
        self.tags += [t for t in tags if t not in self.tags]


def test_candidate_tags_are_atomic_lowercase_words_names_first():
    tags = candidate_tags(
        "Presented Project Atlas at the Berlin Data Summit with colleague Maria Lopez "
        "[s1:m5]; the summit went well."
    )
    assert all(t == t.lower() and " " not in t and t.isalpha() for t in tags)
    names = {"summit", "project", "atlas", "berlin", "data", "maria", "lopez"}
    assert tags[0] == "summit"  # a name, and the most repeated one
    assert set(tags[:7]) == names  # names before common words ("colleague", "presented")
    assert "the" not in tags and "s1" not in tags and "m5" not in tags  # no stopwords, no refs
    assert tags.count("summit") == 1


def test_an_existing_tag_of_the_same_stem_is_reused():
    vocab = Vocab(["hiking", "berlin"])
    tags = choose_tags("Loves long hikes around Berlin and the Alps", vocab)
    assert "hiking" in tags and "hikes" not in tags and "berlin" in tags
    assert prefix_of("hikes") in vocab.lookups  # looked up by prefix before creating
    assert "alps" in vocab.tags  # new tags join the vocabulary


def test_existing_tags_come_first_and_at_most_eight():
    vocab = Vocab([])
    words = " ".join(f"Topic{chr(97 + i)} word{chr(97 + i)}" for i in range(12))
    tags = choose_tags(words, vocab, existing=["python"])
    assert tags[0] == "python" and len(tags) == MAX_TAGS
    assert len({stem(t) for t in tags}) == len(tags)


def test_committed_memories_carry_tags_and_later_commits_reuse_them(make_components):
    comp = make_components()
    commit(comp, request(SESSION_1, commit_id="c1"))
    later = [
        {
            "id": "h1",
            "role": "user",
            "created_at": "2026-06-01T09:00:00Z",
            "content": "I went on two long hikes in Berlin last month and I prefer tea.",
        },
        {"id": "h2", "role": "assistant", "content": "Sounds lovely."},
    ]
    commit(comp, request(SESSION_2, session="s2", commit_id="c2"))
    commit(comp, request(later, session="s3", commit_id="c3"))
    all_tags: list[str] = []
    for uri, _ in comp.fs.walk_nodes("ctx://acme/users/alice/memories/"):
        tags = comp.fs.read_node(uri, include_content=False).metadata.get("tags")
        assert tags and len(tags) <= MAX_TAGS, uri
        assert all(t == t.lower() and " " not in t for t in tags)
        all_tags += tags
    profile = comp.fs.read_node("ctx://acme/users/alice/memories/profile")
    assert len(profile.metadata["tags"]) >= 3
    assert "berlin" in profile.metadata["tags"]
    by_stem: dict[str, set[str]] = {}
    for t in all_tags:
        by_stem.setdefault(stem(t), set()).add(t)
    assert all(len(v) == 1 for v in by_stem.values()), by_stem  # one spelling per stem
