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

from invocation_store.cli import main
from invocation_store.history import Budget, check_history_lines
from invocation_store.history._synthetic import (
    merge,
    overlapping_completes,
    overlapping_creates,
    unknown_completes,
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
    """CIS-HIST-2: completions of unknown outcome (every subset a state) and an impossible run read
    exceed a budget of 500 configurations: exit 3, the run named, the limit, the window of operations
    not placed where the search stopped (the read)."""
    report = check_history_lines(unknown_completes(12, forged=True), Budget(max_states=500))
    assert report.violation is None
    assert report.exit_code == 3
    (undecided,) = report.undecided
    assert (undecided.run_id, undecided.limit) == ("run-1", "states")
    assert [op.name for op in undecided.window] == ["get_run"]
    text = undecided.render()
    assert "undecided within the budget [CIS-HIST-2] in run run-1" in text
    assert "the states budget ran out" in text
    assert report.as_json()["undecided"][0]["window"][0]["op"] == "get_run"


def test_a_run_beyond_the_time_budget_is_undecided() -> None:
    """CIS-HIST-2: the same shape, 20 completions, and a CPU budget of 50 ms: undecided, limit seconds."""
    report = check_history_lines(unknown_completes(20, forged=True), Budget(max_seconds=0.05))
    assert report.exit_code == 3
    assert report.undecided[0].limit == "seconds"


def test_the_budget_decides_what_it_can() -> None:
    """CIS-HIST-2: the same histories are decided within the default budget when small enough, and a
    linearizable one with every completion of unknown outcome is cheap (each placed where needed)."""
    assert check_history_lines(unknown_completes(6, forged=True)).exit_code == 1
    report = check_history_lines(unknown_completes(64, forged=False))
    assert report.exit_code == 0
    assert report.states <= 5 * 64


def test_budget_values_are_checked() -> None:
    """CIS-HIST-2: a budget is positive numbers; zero, negative and boolean values are refused."""
    for bad in ({"max_states": 0}, {"max_seconds": -1.0}, {"max_states": True}):
        with pytest.raises(ValueError, match="positive"):
            Budget(**bad)  # type: ignore[arg-type]


def test_cli_exit_3_and_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """CIS-HIST-2: `check-history --max-states N` exits 3 with the undecided run on stdout; --json gives
    status undecided; a bad budget value is a usage error (exit 2)."""
    path = tmp_path / "h.jsonl"
    path.write_text("".join(unknown_completes(12, forged=True)), encoding="utf-8")
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
        unknown_completes(12, forged=True, run_id="run-0"),
        overlapping_completes(3, forged=True, run_id="run-1"),
    ]
    report = check_history_lines(merge(histories, interleave=True), Budget(max_states=500))
    assert report.violation is not None
    assert report.violation.run_id == "run-1"
    assert [run.run_id for run in report.undecided] == ["run-0"]
    assert report.exit_code == 1
    assert report.as_json()["undecided"][0]["run_id"] == "run-0"
