"""The kernel's small scope, explored exhaustively (issue 14, point 3).

The CI size (depth 8, 310,495 states) takes 40-60 s on one core of a loaded machine;
``INVOCATION_STORE_MODEL_CHECK=large`` runs the larger scope instead.
"""

from __future__ import annotations

import ast
import json
import os
from collections.abc import Callable
from pathlib import Path

import attrs
import pytest
from attrs import evolve

from invocation_store import kernel
from invocation_store.cli import main
from invocation_store.testing import _modelcheck as modelcheck
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
    _plant_overspending(monkeypatch)
    found = model_check(SMALL).counterexample
    assert found is not None
    assert found.invariant == "CIS-RUN-5"
    assert found.events == (("open", 0, 1), ("admit", 0, 0), ("admit", 0, 1))
    assert "1. open run r0 with tool-call budget 1" in found.render()


def test_planted_duplicate_fault_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """CIS-HIST-4, CIS-ID-5: an admit that ignores the live record admits a second invocation of the
    key (invariant 5); the budget must allow two calls, so the shortest run has budget 2."""
    _plant_duplicate(monkeypatch)
    found = model_check(SMALL).counterexample
    assert found is not None
    assert found.invariant == "invariant 5"
    assert found.events == (("open", 0, 2), ("admit", 0, 0), ("admit", 0, 0))


def test_planted_terminal_fault_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """CIS-HIST-4, CIS-LIFE-3: a transition that lets a failure overwrite a terminal record breaks
    invariant 1 after four events."""
    _plant_terminal_failure(monkeypatch)
    found = model_check(SMALL).counterexample
    assert found is not None
    assert found.invariant == "invariant 1"
    assert len(found.events) == 4
    assert found.events[-1][0] == "fail"


def test_planted_ttl_fault_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """CIS-HIST-4, CIS-TTL-2: a raw transition that slides the expiry breaks invariant 2."""
    _plant_sliding_expiry(monkeypatch)
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
    _plant_raising_cancel(monkeypatch)
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


# -- one planted kernel fault per invariant (issue 23, item 4) ------------------------------


def _plant_admit_renaming(monkeypatch: pytest.MonkeyPatch) -> None:
    """admit stores the record under a re-cased id: a fallback id (invariant 3)."""
    original = kernel.admit

    def admit(run, existing, request, limits, now_ms):  # type: ignore[no-untyped-def]
        result = original(run, existing, request, limits, now_ms)
        if isinstance(result, kernel.Admission) and not result.replayed:
            return evolve(
                result, record=evolve(result.record, tool_call_id=result.record.tool_call_id.upper())
            )
        return result

    monkeypatch.setattr(kernel, "admit", admit)


def _plant_raw_limit_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    """RawReceived judged with roomy limits: a raw response over raw_bytes is stored (invariant 4)."""
    original = kernel.transition

    def transition(record, event, limits):  # type: ignore[no-untyped-def]
        if isinstance(event, kernel.RawReceived):
            limits = attrs.evolve(limits, raw_bytes=1_000, record_bytes=1_000)
        return original(record, event, limits)

    monkeypatch.setattr(kernel, "transition", transition)


def _plant_raw_in_result(monkeypatch: pytest.MonkeyPatch) -> None:
    """A projection whose agent result is the raw response itself (invariant 6)."""
    original = kernel.transition

    def transition(record, event, limits):  # type: ignore[no-untyped-def]
        result = original(record, event, limits)
        ready = isinstance(result, kernel.CanonicalRecord) and result.status is kernel.InvocationStatus.READY
        if isinstance(event, kernel.ProjectionReceived) and ready:
            return evolve(result, agent_result=result.raw_response, scope="s")
        return result

    monkeypatch.setattr(kernel, "transition", transition)


def _plant_error_with_evidence(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure leaving evidence FOUND on the ERROR record: status and evidence disagree (invariant 7)."""
    original = kernel.transition

    def transition(record, event, limits):  # type: ignore[no-untyped-def]
        result = original(record, event, limits)
        if isinstance(event, kernel.Failed) and isinstance(result, kernel.CanonicalRecord):
            return evolve(result, evidence_status=kernel.EvidenceStatus.EVIDENCE_FOUND)
        return result

    monkeypatch.setattr(kernel, "transition", transition)


def _plant_last_fact_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    """A progress projection that drops its last fact (invariant 8)."""
    original = kernel.project_progress

    def project_progress(run_id, identities, records, now_ms, limits):  # type: ignore[no-untyped-def]
        report = original(run_id, identities, records, now_ms, limits)
        return evolve(report, facts=report.facts[:-1])

    monkeypatch.setattr(kernel, "project_progress", project_progress)


def _plant_overspending(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernel, "admit", _overspending_admit(kernel.admit))


def _plant_duplicate(monkeypatch: pytest.MonkeyPatch) -> None:
    original = kernel.admit
    monkeypatch.setattr(
        kernel, "admit", lambda run, _existing, req, limits, now: original(run, None, req, limits, now)
    )


def _plant_terminal_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    original = kernel.transition

    def transition(record, event, limits):  # type: ignore[no-untyped-def]
        if record is not None and record.terminal and isinstance(event, kernel.Failed):
            return evolve(record, updated_at_ms=event.now_ms + 1)
        return original(record, event, limits)

    monkeypatch.setattr(kernel, "transition", transition)


def _plant_sliding_expiry(monkeypatch: pytest.MonkeyPatch) -> None:
    original = kernel.transition

    def transition(record, event, limits):  # type: ignore[no-untyped-def]
        result = original(record, event, limits)
        if isinstance(event, kernel.RawReceived) and isinstance(result, kernel.CanonicalRecord):
            return evolve(result, expires_at_ms=result.expires_at_ms + 1)
        return result

    monkeypatch.setattr(kernel, "transition", transition)


def _plant_raising_cancel(monkeypatch: pytest.MonkeyPatch) -> None:
    original = kernel.cancel_run

    def cancel_run(run, now_ms):  # type: ignore[no-untyped-def]
        if run is not None and run.status is kernel.RunStatus.CANCELLED:
            raise ValueError("cancelled twice")
        return original(run, now_ms)

    monkeypatch.setattr(kernel, "cancel_run", cancel_run)


#: For every invariant the model checker enforces, a planted kernel fault it must find.
PLANTED: dict[str, Callable[[pytest.MonkeyPatch], None]] = {
    "invariant 1": _plant_terminal_failure,
    "invariant 2": _plant_sliding_expiry,
    "invariant 3": _plant_admit_renaming,
    "invariant 4": _plant_raw_limit_ignored,
    "invariant 5": _plant_duplicate,
    "invariant 6": _plant_raw_in_result,
    "invariant 7": _plant_error_with_evidence,
    "invariant 8": _plant_last_fact_dropped,
    "CIS-RUN-5": _plant_overspending,
    "CIS-KERN-2": _plant_raising_cancel,
}


def _invariants_raised() -> set[str]:
    """The invariant names the model checker's code raises violations of (its _InvariantError calls)."""
    tree = ast.parse(Path(modelcheck.__file__).read_text(encoding="utf-8"))
    return {
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "_InvariantError"
        and node.args
        and isinstance(node.args[0], ast.Constant)
    }


def test_every_invariant_has_a_planted_fault() -> None:
    """CIS-HIST-4, CIS-STATE-2: the invariants the checker raises are exactly those it lists, and each
    has a planted kernel fault below; an invariant added without one fails here."""
    raised = _invariants_raised()
    assert raised == set(modelcheck.INVARIANTS)
    assert set(PLANTED) == set(modelcheck.INVARIANTS)


@pytest.mark.parametrize("invariant", sorted(PLANTED))
def test_each_planted_fault_is_found_as_its_invariant(
    monkeypatch: pytest.MonkeyPatch, invariant: str
) -> None:
    """CIS-HIST-4: each planted kernel fault breaks its invariant, and the breadth-first search reports
    that invariant first, with a counterexample of at most five events."""
    PLANTED[invariant](monkeypatch)
    found = model_check(SMALL).counterexample
    assert found is not None
    assert found.invariant == invariant, found.render()
    assert 1 <= len(found.events) <= SMALL.depth
