"""Progress views: the nine fields a progress read needs, judged like records (CIS-PERF-3)."""

from __future__ import annotations

from typing import Any

import pytest

from invocation_store.kernel import (
    EvidenceStatus,
    InvocationStatus,
    Limits,
    ProgressView,
    is_well_formed,
    is_well_formed_outcome,
    is_well_formed_view,
    project_progress,
)

from ._helpers import RUN_ID, T0, begun, errored, ready, with_raw


@pytest.mark.parametrize(
    "record",
    [begun(), with_raw(begun()), ready(), ready(evidence=EvidenceStatus.NO_EVIDENCE), errored()],
    ids=["projecting", "with-raw", "ready", "no-evidence", "error"],
)
def test_views_of_kernel_records_are_well_formed(record: object) -> None:
    """CIS-PERF-3, CIS-STORE-6: every record a transition makes has a well-formed view."""
    assert is_well_formed(record)  # type: ignore[arg-type]
    view = ProgressView.of(record)  # type: ignore[arg-type]
    assert is_well_formed_view(view)
    assert is_well_formed_outcome(view)


@pytest.mark.parametrize(
    "change",
    [
        {"evidence_status": EvidenceStatus.ERROR},  # READY with ERROR evidence
        {"evidence_status": None},
        {"agent_result": None},
        {"scope": None},
        {"status": InvocationStatus.ERROR},  # ERROR with a result
        {"status": InvocationStatus.PROJECTING},
        {"sequence": 0},
        {"status": "DONE"},
    ],
)
def test_views_no_transition_makes_are_refused(change: dict[str, object]) -> None:
    """CIS-PERF-3, CIS-STORE-6: a tampered view is not well formed."""
    view = ProgressView.of(ready())._replace(**change)
    assert not is_well_formed_outcome(view)
    assert not is_well_formed_view(view)


@pytest.mark.parametrize("change", [{"run_id": "bad run"}, {"tool_call_id": ""}, {"tool_call_id": "a b"}])
def test_views_with_unsafe_ids_are_refused(change: dict[str, object]) -> None:
    """CIS-PERF-3, CIS-ID-3: the ids of a view must be safe ids."""
    view = ProgressView.of(ready())._replace(**change)
    assert is_well_formed_outcome(view)
    assert not is_well_formed_view(view)


def test_progress_from_views_equals_progress_from_records() -> None:
    """CIS-PERF-3, CIS-PROG-2: the kernel's progress of views is its progress of the records."""
    records = {
        "call_1": ready(begun("call_1")),
        "call_2": errored(begun("call_2")),
        "call_3": ready(begun("call_3"), evidence=EvidenceStatus.NO_EVIDENCE),
        "call_4": begun("call_4"),
        "call_5": None,
    }
    views = {k: None if v is None else ProgressView.of(v) for k, v in records.items()}
    ids = list(records)
    assert project_progress(RUN_ID, ids, views, T0 + 30, Limits()) == project_progress(
        RUN_ID, ids, records, T0 + 30, Limits()
    )


@pytest.mark.parametrize(
    ("status", "change"),
    [
        (InvocationStatus.ERROR, {"evidence_status": EvidenceStatus.EVIDENCE_FOUND}),
        (InvocationStatus.ERROR, {"evidence_status": None}),
        (InvocationStatus.ERROR, {"agent_result": "Paris: 18 C"}),
        (InvocationStatus.ERROR, {"scope": "weather index"}),
        (InvocationStatus.PROJECTING, {"evidence_status": EvidenceStatus.EVIDENCE_FOUND}),
        (InvocationStatus.PROJECTING, {"evidence_status": EvidenceStatus.ERROR}),
        (InvocationStatus.PROJECTING, {"agent_result": "Paris: 18 C"}),
        (InvocationStatus.PROJECTING, {"scope": "weather index"}),
    ],
)
def test_one_stray_field_makes_an_error_or_projecting_view_ill_formed(
    status: InvocationStatus, change: dict[str, Any]
) -> None:
    """CIS-PERF-3, CIS-STORE-6: each outcome field is judged on its own, not only together.

    An ERROR view needs ERROR evidence and neither result nor scope; a PROJECTING view
    needs no evidence, result or scope. Changing any one of them alone is refused.
    """
    base = ProgressView.of(errored() if status is InvocationStatus.ERROR else begun())
    assert is_well_formed_outcome(base) is True
    view = base._replace(**change)
    assert is_well_formed_outcome(view) is False
    assert is_well_formed_view(view) is False
