"""The steps of the canvas without a chord on the ledger: `prepare` (archive, extractors and plan
as one step), `finish` (write, then register) and `run` (a whole commit), each resuming after
the last output stored when redelivered."""

from __future__ import annotations

from ledger_world import Ledger, MakeComponents, files_of, make_req, row_of

from ctxpipe.commit import steps
from ctxpipe.commit.memory_ledger import InMemoryLedger
from ctxpipe.extraction.extractors import EXTRACTOR_NAMES


def test_prepare_runs_archive_extractors_and_plan_as_one_step(
    ledger: Ledger, make_components: MakeComponents
) -> None:
    """The canvas without a chord: the same outputs as the separate steps, and a redelivery
    after a crash half-way resumes after the last phase stored."""
    a, b = make_components(), make_components()
    separate = InMemoryLedger()  # the reference run
    req = make_req("steps-prepare")
    steps.submit(separate, req)
    steps.archive_step(a, separate, req.commit_id)
    for name in EXTRACTOR_NAMES:
        steps.extract_step(a, separate, req.commit_id, name)
    expected = steps.plan_step(a, separate, req.commit_id)
    steps.submit(ledger, req)
    steps.archive_step(b, ledger, req.commit_id)
    steps.extract_step(b, ledger, req.commit_id, EXTRACTOR_NAMES[0])  # then the worker died
    planned = steps.prepare_step(b, ledger, req.commit_id, steps.Delivery("prepare", 0))
    assert planned.items and planned.items == expected.items
    row = row_of(ledger, req.commit_id)
    assert row.phase == "planned" and set(row.extractors) == set(EXTRACTOR_NAMES)
    assert {"archive_ms", "plan_ms"} <= set(row.timings)
    assert ledger.load_output(req.commit_id, "plan") == planned.model_dump(mode="json")
    assert steps.prepare_step(b, ledger, req.commit_id) == planned  # redelivered: replayed


def test_prepare_then_finish_run_a_commit_in_two_steps(
    ledger: Ledger, make_components: MakeComponents
) -> None:
    c = make_components()
    req = make_req("steps-two")
    steps.submit(ledger, req)
    planned = steps.prepare_step(c, ledger, req.commit_id, steps.Delivery("prepare", 0))
    assert steps.prepare_step(c, ledger, req.commit_id, steps.Delivery("prepare", 0)) == planned
    result = steps.finish_step(c, ledger, req.commit_id, steps.Delivery("finish", 0))
    row = row_of(ledger, req.commit_id)
    assert row.phase == "registered" and result.status == "success"
    assert row.result == result.model_dump(mode="json")
    assert row.attempts == {"prepare#0": 1, "write#0": 1, "register#0": 1}
    assert steps.finish_step(c, ledger, req.commit_id, steps.Delivery("finish", 0)) == result
    assert row_of(ledger, req.commit_id).attempts == row.attempts  # a replay writes nothing


def test_finish_writes_then_registers_and_a_redelivery_only_registers(
    ledger: Ledger, make_components: MakeComponents
) -> None:
    c = make_components()
    req = make_req("steps-finish")
    steps.submit(ledger, req)
    steps.prepare_step(c, ledger, req.commit_id)
    steps.write_step(c, ledger, req.commit_id, steps.Delivery("write", 0))  # then it died
    files = files_of(c)
    result = steps.finish_step(c, ledger, req.commit_id, steps.Delivery("finish", 0))
    row = row_of(ledger, req.commit_id)
    assert row.phase == "registered" and row.result == result.model_dump(mode="json")
    after = {k: v for k, v in files_of(c).items() if "/.commits/" not in k}
    assert after == files  # the write was replayed, not re-run (register adds its journal)
    assert row.attempts == {"write#0": 1, "register#0": 1}  # each step counts its own
    assert steps.finish_step(c, ledger, req.commit_id, steps.Delivery("finish", 1)) == result
    assert row_of(ledger, req.commit_id).attempts == row.attempts


def test_run_is_a_whole_commit_and_a_redelivery_resumes_where_it_stopped(
    ledger: Ledger, make_components: MakeComponents
) -> None:
    """The one task of a commit without a chord: a redelivery after a crash past the plan
    writes and registers only, and one after the end changes nothing."""
    c = make_components()
    req = make_req("steps-run")
    steps.submit(ledger, req)
    steps.prepare_step(c, ledger, req.commit_id, steps.Delivery("prepare", 0))  # then it died
    result = steps.run_step(c, ledger, req.commit_id, steps.Delivery("run", 0))
    row = row_of(ledger, req.commit_id)
    assert row.phase == "registered" and row.result == result.model_dump(mode="json")
    assert result.stats.nodes_created >= 1
    assert row.attempts == {"prepare#0": 1, "write#0": 1, "register#0": 1}
    files = files_of(c)
    assert steps.run_step(c, ledger, req.commit_id, steps.Delivery("run", 0)) == result
    assert files_of(c) == files
