"""check-history within a budget: the hard cases decided in few states, undecided named, many runs.

Speed is measured by ``benchmarks/bench_history.py``; here the number of configurations
each check explores (``HistoryReport.states``, deterministic) stands for the work, and
the budget's limits give their distinct outcome (exit 3) with the run and the window.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from attrs import evolve

from invocation_store.cli import main
from invocation_store.codec import record_from_obj
from invocation_store.history import Budget, check_history_lines
from invocation_store.history._report import difference
from invocation_store.history._spec import rule_of
from invocation_store.history._synthetic import (
    admissions_read,
    competing_creates,
    double_completes,
    merge,
    overlapping_completes,
    overlapping_creates,
    same_key_creates,
    unknown_completes,
    unknown_completes_reread,
)

Builder = Callable[..., list[str]]


@pytest.mark.parametrize("p", [16, 64])
@pytest.mark.parametrize("forged", [False, True])
@pytest.mark.parametrize("build", [overlapping_completes, overlapping_creates], ids=["completes", "creates"])
def test_fully_overlapping_operations_are_decided_in_few_states(build: Builder, forged: bool, p: int) -> None:
    """CIS-HIST-2: P fully overlapping operations, one of them with an impossible result or none, are
    decided (exit 1 or 0) with a number of configurations linear in P, explanation included, where an
    unpruned search visits every subset."""
    report = check_history_lines(build(p, forged=forged))
    assert report.exit_code == (1 if forged else 0)
    assert report.undecided == ()
    assert report.states <= 5 * p
    if forged:
        assert report.violation is not None
        assert report.violation.window[-1].op_id == report.violation.first_unexplained.op_id


def test_a_forged_completion_is_refuted_by_its_key_alone() -> None:
    """CIS-HIST-2, CIS-STORE-3: among 16 commuting completions, the one claiming another content is
    refuted by its own key's operations (P-compositionality): the window is that completion."""
    violation = check_history_lines(overlapping_completes(16, forged=True)).violation
    assert violation is not None
    assert (violation.key, violation.rule, violation.minimal) == ("call_15", "CIS-STORE-3", True)
    assert [op.name for op in violation.window] == ["complete"]
    assert "key call_15" in violation.render()


def test_an_impossible_admission_is_shown_alone() -> None:
    """CIS-HIST-2, CIS-PRE-8: a create claiming a sequence no order gives is refuted by the one state its
    answer allows, and the window is that create."""
    violation = check_history_lines(overlapping_creates(16, forged=True)).violation
    assert violation is not None
    assert [op.name for op in violation.window] == ["create"]
    assert "in the only state its answer allows, the kernel returns" in violation.orders[0].reason


def test_a_run_beyond_the_state_budget_is_undecided_with_its_window() -> None:
    """CIS-HIST-2: completions of unknown outcome (every subset a state), a run read needing all of
    them and a record read needing one missing (no usage bound sees it) exceed a budget of 500
    configurations: exit 3, the run named, the limit, the window of operations not placed where the
    search stopped (the two reads)."""
    report = check_history_lines(unknown_completes_reread(12, forged=True), Budget(max_states=500))
    assert report.violation is None
    assert report.exit_code == 3
    (undecided,) = report.undecided
    assert (undecided.run_id, undecided.limit) == ("run-1", "states")
    assert [op.name for op in undecided.window] == ["get_run", "get"]
    text = undecided.render()
    assert "undecided within the budget [CIS-HIST-2] in run run-1" in text
    assert "the states budget ran out" in text
    assert report.as_json()["undecided"][0]["window"][0]["op"] == "get_run"


def test_a_run_beyond_the_time_budget_is_undecided() -> None:
    """CIS-HIST-2: the same shape, 20 completions, and a CPU budget of 50 ms: undecided, limit seconds."""
    report = check_history_lines(unknown_completes_reread(20, forged=True), Budget(max_seconds=0.05))
    assert report.exit_code == 3
    assert report.undecided[0].limit == "seconds"


def test_the_budget_decides_what_it_can() -> None:
    """CIS-HIST-2: the same history is decided within the default budget when small enough, and a
    linearizable one with every completion of unknown outcome is cheap (each placed where needed)."""
    report = check_history_lines(unknown_completes_reread(6, forged=True))
    assert report.exit_code == 1
    assert report.violation is not None
    assert [op.name for op in report.violation.window] == ["get_run", "get"]
    for build in (unknown_completes, unknown_completes_reread):
        report = check_history_lines(build(64, forged=False))
        assert report.exit_code == 0
        assert report.states <= 5 * 64 + 5


def test_budget_values_are_checked() -> None:
    """CIS-HIST-2: a budget is positive numbers; zero, negative and boolean values are refused."""
    for bad in ({"max_states": 0}, {"max_seconds": -1.0}, {"max_states": True}):
        with pytest.raises(ValueError, match="positive"):
            Budget(**bad)  # type: ignore[arg-type]


def test_cli_exit_3_and_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """CIS-HIST-2: `check-history --max-states N` exits 3 with the undecided run on stdout; --json gives
    status undecided; a bad budget value is a usage error (exit 2)."""
    path = tmp_path / "h.jsonl"
    path.write_text("".join(unknown_completes_reread(10, forged=True)), encoding="utf-8")
    assert main(["check-history", "--max-states", "500", str(path)]) == 3
    assert "undecided within the budget" in capsys.readouterr().out
    assert main(["check-history", "--max-states", "500", "--json", str(path)]) == 3
    verdict = json.loads(capsys.readouterr().out)
    assert (verdict["status"], verdict["undecided"][0]["limit"]) == ("undecided", "states")
    assert main(["check-history", str(path)]) == 1  # the default budget decides it
    with pytest.raises(SystemExit) as exited:
        main(["check-history", "--max-seconds", "0", str(path)])
    assert exited.value.code == 2
    capsys.readouterr()


# -- several runs (issue 23, item 3) ----------------------------------------------------


def _runs(forged_at: int, count: int = 3, *, unknown: bool = False) -> list[list[str]]:
    """``count`` runs, the one at ``forged_at`` with a forged completion; the others correct, with
    completions of unknown outcome when ``unknown``."""
    histories = []
    for n in range(count):
        run_id = f"run-{n}"
        if n == forged_at:
            histories.append(overlapping_completes(3, forged=True, run_id=run_id))
        elif unknown:
            histories.append(unknown_completes(3, forged=False, run_id=run_id))
        else:
            histories.append(overlapping_completes(3, forged=False, run_id=run_id))
    return histories


@pytest.mark.parametrize("unknown", [False, True], ids=["known", "unknown-elsewhere"])
@pytest.mark.parametrize("interleave", [False, True], ids=["one-after-another", "interleaved"])
@pytest.mark.parametrize("forged_at", [0, 1, 2], ids=["first", "middle", "last"])
def test_the_violation_is_found_in_any_run(forged_at: int, interleave: bool, unknown: bool) -> None:
    """CIS-HIST-2: with three runs, the one run that is not linearizable is found and named wherever it
    is (first, middle, last), whether the runs follow each other or their lines interleave, and when
    the other runs hold operations of unknown outcome."""
    lines = merge(_runs(forged_at, unknown=unknown), interleave=interleave)
    report = check_history_lines(lines)
    assert report.runs == 3
    assert report.violation is not None
    assert report.violation.run_id == f"run-{forged_at}"
    assert report.exit_code == 1


@pytest.mark.parametrize("interleave", [False, True])
def test_every_run_linearizable_with_unknown_outcomes(interleave: bool) -> None:
    """CIS-HIST-2: three runs, all linearizable, two with completions of unknown outcome: exit 0."""
    histories = [
        unknown_completes(3, forged=False, run_id="run-0"),
        overlapping_completes(3, forged=False, run_id="run-1"),
        unknown_completes(3, forged=False, run_id="run-2"),
    ]
    report = check_history_lines(merge(histories, interleave=interleave))
    assert (report.exit_code, report.runs, report.unknown) == (0, 3, 6)


def test_an_undecided_run_does_not_hide_a_violation_in_another() -> None:
    """CIS-HIST-2: a first run the state budget cannot decide and a later run that is not linearizable:
    exit 1 for the later run, and the undecided one listed with it."""
    histories = [
        unknown_completes_reread(12, forged=True, run_id="run-0"),
        overlapping_completes(3, forged=True, run_id="run-1"),
    ]
    report = check_history_lines(merge(histories, interleave=True), Budget(max_states=500))
    assert report.violation is not None
    assert report.violation.run_id == "run-1"
    assert [run.run_id for run in report.undecided] == ["run-0"]
    assert report.exit_code == 1
    assert report.as_json()["undecided"][0]["run_id"] == "run-0"


# -- two operations competing for one state (issue 22) -----------------------------------

#: (builder, the rule a forged history breaks, the window's operation names).
COMPETING: list[tuple[Builder, str, list[str]]] = [
    (competing_creates, "CIS-RUN-5", ["create", "create"]),
    (same_key_creates, "CIS-ID-5", ["create", "create"]),
    (double_completes, "CIS-STORE-3", ["complete", "complete"]),
    (admissions_read, "CIS-PROG-1", ["calls"]),
]


@pytest.mark.parametrize("p", [4, 16, 64])
@pytest.mark.parametrize(("build", "rule", "names"), COMPETING, ids=[b.__name__ for b, _r, _n in COMPETING])
def test_two_answers_competing_for_one_state_are_explained_minimally(
    build: Builder, rule: str, names: list[str], p: int
) -> None:
    """CIS-HIST-2: P fully overlapping operations where two answers each fit a state alone and not
    together (two creates claiming the last budget slot, two admissions of one key, two completions of
    one record, a read listing both claimants) are decided and explained within a number of
    configurations linear in P: the window is the contradicting pair (or the read alone), minimal,
    every order of it tried, the kernel rule named once beside CIS-HIST-2."""
    report = check_history_lines(build(p, forged=True))
    assert report.exit_code == 1
    violation = report.violation
    assert violation is not None
    assert (violation.rule, violation.minimal) == (rule, True)
    assert sorted(op.name for op in violation.window) == names
    assert violation.orders_tried == violation.orders_total == len(violation.orders)
    assert all(tried.failed_op is not None or "returned before" in tried.reason for tried in violation.orders)
    assert violation.render().startswith(f"check-history: not linearizable [CIS-HIST-2, {rule}]")
    assert report.states <= 12 * p
    linearizable = check_history_lines(build(p, forged=False))
    assert (linearizable.exit_code, linearizable.states <= 2 * p + 2) == (0, True)


@pytest.mark.parametrize("p", [16, 64])
def test_two_admissions_of_a_key_not_checked_alone_are_refuted_at_once(p: int) -> None:
    """CIS-HIST-2, CIS-ID-5: two fresh admissions of one key whose usage fits both, with a third create
    of the key unanswered (so the key's operations are not checked alone): no order fits them, since a
    record stays under its key until it expires; decided and explained within a number of
    configurations linear in P, each order saying why."""
    report = check_history_lines(same_key_creates(p, forged=True, retried=True))
    assert report.exit_code == 1
    violation = report.violation
    assert violation is not None
    assert (violation.rule, violation.key) == ("CIS-ID-5", None)
    assert [op.name for op in violation.window] == ["create", "create"]
    assert {op.args[0].tool_call_id for op in violation.window} == {f"call_{p - 2}"}
    for tried in violation.orders:
        assert "the kernel returns CALL_IN_PROGRESS" in tried.reason
        assert "a record stays until it expires" in tried.reason
    assert report.states <= 12 * p + 200  # and the one search of the first operation alone, capped at 200
    assert check_history_lines(same_key_creates(p, forged=False, retried=True)).exit_code == 0


def test_two_creates_claiming_the_last_slot_say_why() -> None:
    """CIS-HIST-2, CIS-RUN-5: for each order of the two claimants, the kernel's answer to the second
    (TOOL_BUDGET_EXHAUSTED) and why no later state helps: the run's usage after the first, which only
    grows."""
    violation = check_history_lines(competing_creates(16, forged=True)).violation
    assert violation is not None
    assert [op.op_id for op in violation.window] == [15, 16]
    for tried in violation.orders:
        assert "the kernel returns TOOL_BUDGET_EXHAUSTED" in tried.reason
        assert "the run holds 15 calls" in tried.reason
        assert "usage only grows" in tried.reason
        assert tried.expected == "TOOL_BUDGET_EXHAUSTED"


# -- unknown outcomes and a run read the usage rules out (issue 22) -----------------------


@pytest.mark.parametrize("p", [16, 64])
@pytest.mark.parametrize("within", [False, True], ids=["above-every-sum", "between-the-sums"])
def test_a_run_read_no_usage_gives_is_refuted_at_once(p: int, within: bool) -> None:
    """CIS-HIST-2, CIS-RUN-6: P completions of unknown outcome and a run read whose bytes_used no subset
    of them gives (one byte above all of them, or one byte below: between the sums, each charge being
    more than a byte) are refuted before any search, explained by the read alone, in a number of
    configurations linear in P (without the usage invariants every subset of the completions is a
    state: undecided from P = 16)."""
    report = check_history_lines(unknown_completes(p, forged=True, within=within))
    assert report.exit_code == 1
    violation = report.violation
    assert violation is not None
    assert [op.name for op in violation.window] == ["get_run"]
    assert (violation.rule, violation.minimal) == ("CIS-RUN-6", True)
    (tried,) = violation.orders
    assert "they differ in bytes_used" in tried.reason
    assert ("no set of them adds" in tried.reason) is within
    assert report.states <= 7 * p


def test_a_run_read_below_what_returned_creates_charged_is_refuted() -> None:
    """CIS-HIST-2: a run read showing one byte less than the creates that returned before it charged
    (all completions of unknown outcome) is refuted at once: usage only grows."""
    lines = [json.loads(line) for line in unknown_completes(16, forged=False)]
    admitted = [line["result"]["run"] for line in lines if line.get("result", {}).get("replayed") is False]
    lines[-1]["result"]["run"]["bytes_used"] = admitted[-1]["bytes_used"] - 1
    report = check_history_lines([json.dumps(line) + "\n" for line in lines])
    assert report.exit_code == 1
    assert report.violation is not None
    assert [op.name for op in report.violation.window] == ["get_run"]
    assert report.states <= 7 * 16


# -- what an explanation shows (issue 22) --------------------------------------------------


def test_a_forged_completion_names_the_differing_field_without_its_content() -> None:
    """CIS-HIST-2, CIS-STORE-3: when the kernel's record and the observed one summarise alike, the
    reason names the field that differs (agent_result) with its sizes, never its text."""
    violation = check_history_lines(overlapping_completes(16, forged=True)).violation
    assert violation is not None
    (tried,) = violation.orders
    assert "they differ in agent_result (7 bytes vs 6 bytes)" in tried.reason
    text = violation.render()
    assert "fact 15" not in text
    assert "forged" not in text


def test_equal_sizes_are_told_apart_by_a_short_hash() -> None:
    """CIS-HIST-2: payload fields of equal size differ by an 8-digit SHA-256 prefix; ids, statuses and
    times by their values; identical results by nothing."""
    lines = [json.loads(line) for line in overlapping_completes(2, forged=False)]
    first = next(
        line
        for line in lines
        if line.get("result", {}).get("record")
        and line["type"] == "ok"
        and line["result"]["record"]["status"] == "READY"
    )
    kernel = record_from_obj(first["result"]["record"])
    observed = evolve(kernel, agent_result="fact X", updated_at_ms=kernel.updated_at_ms + 1)
    text = difference(kernel, observed)
    assert text.startswith("agent_result (6 bytes vs 6 bytes, sha256 ")
    assert "fact" not in text
    assert f"updated_at_ms ({kernel.updated_at_ms} vs {kernel.updated_at_ms + 1})" in text
    assert difference(kernel, kernel) == ""


def test_the_rule_is_named_when_no_order_was_tried_and_never_twice() -> None:
    """CIS-HIST-2: the kernel rule of an operation's own kind stands in when no order was tried (the
    budget ran out first), and a report never prints CIS-HIST-2 twice."""
    violation = check_history_lines(competing_creates(4, forged=True)).violation
    assert violation is not None
    create = violation.window[-1]
    assert rule_of(create, None) == "CIS-PRE-8"
    bare = evolve(violation, rule="CIS-HIST-2", orders=(), orders_tried=0)
    header = bare.render().splitlines()[0]
    assert header == "check-history: not linearizable [CIS-HIST-2] in run run-1"
