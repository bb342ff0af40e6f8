"""The kernel's small scope, explored exhaustively (issue 14, point 3).

The CI size (depth 8, 310,495 states) takes 40-60 s on one core of a loaded machine;
``INVOCATION_STORE_MODEL_CHECK=large`` runs the larger scope instead.
"""

from __future__ import annotations

import json
import os

import attrs
import pytest
from attrs import evolve

from invocation_store import kernel
from invocation_store.cli import main
from invocation_store.testing._modelcheck import CI_SCOPE, LARGE_SCOPE, Scope, model_check

SCOPE = LARGE_SCOPE if os.environ.get("INVOCATION_STORE_MODEL_CHECK") == "large" else CI_SCOPE
SMALL = Scope(depth=5)


def test_every_reachable_state_keeps_the_invariants() -> None:
    """CIS-HIST-4: every state within the depth satisfies the design invariants; the report counts
    states and transitions and reaches the depth."""
    report = model_check(SCOPE)
    assert report.counterexample is None, report.counterexample.render()
    assert report.depth == SCOPE.depth
    assert report.states > 50_000
    assert report.transitions > report.states


def _overspending_admit(original):  # type: ignore[no-untyped-def]
    """admit with the budget check off by one: a run of budget n admits n + 1 calls."""

    def admit(run, existing, request, limits, now_ms):  # type: ignore[no-untyped-def]
        if run is None:
            return original(run, existing, request, limits, now_ms)
        result = original(
            evolve(run, tool_call_budget=run.tool_call_budget + 1), existing, request, limits, now_ms
        )
        if isinstance(result, kernel.Admission):
            result = evolve(result, run=evolve(result.run, tool_call_budget=run.tool_call_budget))
        return result

    return admit


def test_planted_budget_fault_has_a_shortest_counterexample(monkeypatch: pytest.MonkeyPatch) -> None:
    """CIS-HIST-4, CIS-RUN-5: an off-by-one budget check in the kernel is found, and breadth-first
    search gives the shortest sequence: open with budget 1, two admissions."""
    monkeypatch.setattr(kernel, "admit", _overspending_admit(kernel.admit))
    found = model_check(SMALL).counterexample
    assert found is not None
    assert found.invariant == "CIS-RUN-5"
    assert found.events == (("open", 0, 1), ("admit", 0, 0), ("admit", 0, 1))
    assert "1. open run r0 with tool-call budget 1" in found.render()


def test_planted_duplicate_fault_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """CIS-HIST-4, CIS-ID-5: an admit that ignores the live record admits a second invocation of the
    key (invariant 5); the budget must allow two calls, so the shortest run has budget 2."""
    original = kernel.admit

    def admit(run, existing, request, limits, now_ms):  # type: ignore[no-untyped-def]
        return original(run, None, request, limits, now_ms)

    monkeypatch.setattr(kernel, "admit", admit)
    found = model_check(SMALL).counterexample
    assert found is not None
    assert found.invariant == "invariant 5"
    assert found.events == (("open", 0, 2), ("admit", 0, 0), ("admit", 0, 0))


def test_planted_terminal_fault_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """CIS-HIST-4, CIS-LIFE-3: a transition that lets a failure overwrite a terminal record breaks
    invariant 1 after four events."""
    original = kernel.transition

    def transition(record, event, limits):  # type: ignore[no-untyped-def]
        if record is not None and record.terminal and isinstance(event, kernel.Failed):
            return evolve(record, updated_at_ms=event.now_ms + 1)
        return original(record, event, limits)

    monkeypatch.setattr(kernel, "transition", transition)
    found = model_check(SMALL).counterexample
    assert found is not None
    assert found.invariant == "invariant 1"
    assert len(found.events) == 4
    assert found.events[-1][0] == "fail"


def test_planted_ttl_fault_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """CIS-HIST-4, CIS-TTL-2: a raw transition that slides the expiry breaks invariant 2."""
    original = kernel.transition

    def transition(record, event, limits):  # type: ignore[no-untyped-def]
        result = original(record, event, limits)
        if isinstance(event, kernel.RawReceived) and isinstance(result, kernel.CanonicalRecord):
            return evolve(result, expires_at_ms=result.expires_at_ms + 1)
        return result

    monkeypatch.setattr(kernel, "transition", transition)
    found = model_check(SMALL).counterexample
    assert found is not None
    assert found.invariant == "invariant 2"
    assert found.events == (("open", 0, 1), ("admit", 0, 0), ("raw", 0, 0, 0))


def test_planted_second_execution_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """CIS-HIST-4, CIS-BND-6: a table that accepts a second raw response for one invocation (the
    executor run twice) breaks invariant 5."""
    table = dict(kernel.TABLE)
    awaiting = kernel.Phase.AWAITING_PROJECTION
    raw_row = table[(kernel.Phase.AWAITING_RAW, kernel.RawReceived)]
    table[(awaiting, kernel.RawReceived)] = attrs.evolve(raw_row, next_phases=frozenset({awaiting}))
    monkeypatch.setattr("invocation_store.kernel._state.TABLE", table)
    found = model_check(SMALL).counterexample
    assert found is not None
    assert found.invariant == "invariant 5"
    assert [event[0] for event in found.events] == ["open", "admit", "raw", "raw"]


def test_a_kernel_that_raises_is_a_violation(monkeypatch: pytest.MonkeyPatch) -> None:
    """CIS-HIST-4, CIS-KERN-2: outcomes are values; a kernel raising on a reachable event is reported."""
    original = kernel.cancel_run

    def cancel_run(run, now_ms):  # type: ignore[no-untyped-def]
        if run is not None and run.status is kernel.RunStatus.CANCELLED:
            raise ValueError("cancelled twice")
        return original(run, now_ms)

    monkeypatch.setattr(kernel, "cancel_run", cancel_run)
    found = model_check(SMALL).counterexample
    assert found is not None
    assert found.invariant == "CIS-KERN-2"
    assert found.events == (("open", 0, 1), ("cancel", 0), ("cancel", 0))


def test_model_check_cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """CIS-HIST-4: ``invocation-store model-check`` exits 0 with the counts, 1 with a counterexample,
    2 for a bad depth; ``--json`` gives one object."""
    assert main(["model-check", "--depth", "3"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("model-check: 180 states, 227 transitions, depth 3")
    assert main(["model-check", "--depth", "3", "--json"]) == 0
    verdict = json.loads(capsys.readouterr().out)
    counts = (verdict["states"], verdict["transitions"], verdict["depth"], verdict["violation"])
    assert counts == (180, 227, 3, None)
    assert main(["model-check", "--depth", "0"]) == 2
    monkeypatch.setattr(kernel, "admit", _overspending_admit(kernel.admit))
    assert main(["model-check", "--depth", "4", "--json"]) == 1
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["violation"]["events"] == [["open", 0, 1], ["admit", 0, 0], ["admit", 0, 1]]
