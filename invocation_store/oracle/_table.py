"""The lifecycle table as the language-neutral document ``spec/transitions.json`` (CIS-SPEC-2).

Built from :data:`~invocation_store.kernel.TABLE` (rows: next phases, the codes
returned instead of a record, the codes an ERROR may carry), the run lifecycle
:data:`~invocation_store.kernel.RUN_TRANSITIONS`, the failure codes and the
preflight order. ``scripts/generate_transitions.py`` writes it; a test fails when
the file and this document differ, so the spec's copy cannot drift from the code.
"""

from __future__ import annotations

import json
from typing import Any

from ..kernel import (
    FAILURE_CODES,
    PREFLIGHT_ORDER,
    RUN_TRANSITIONS,
    TABLE,
    ErrorCode,
    Phase,
    RunStatus,
)

__all__ = ["PHASE_STATUS", "dump_table_document", "table_document"]

#: The stored status of a record in each phase (``None``: no live record).
PHASE_STATUS: dict[Phase, str | None] = {
    Phase.ABSENT: None,
    Phase.AWAITING_RAW: "PROJECTING",
    Phase.AWAITING_PROJECTION: "PROJECTING",
    Phase.READY: "READY",
    Phase.ERROR: "ERROR",
}

_DESCRIPTION = (
    "Lifecycle table of the canonical invocation record, generated from "
    "invocation_store.kernel.TABLE by scripts/generate_transitions.py and kept identical "
    "by tests/kernel/test_transition_table.py (CIS-SPEC-2). transitions: (phase, event) -> "
    "phases the event may lead to ('next'), the codes the kernel may return instead of a "
    "record ('returns', the record then unchanged), and the codes an ERROR result may carry "
    "('error_codes'). A (phase, event) pair not listed returns 'illegal' and leaves the "
    "record unchanged. phase_status: the stored status of a record in each phase (null: no "
    "live record). run_transitions: the run lifecycle. preflight_order: codes of the "
    "preflight checks, earliest first."
)


def _codes(codes: frozenset[ErrorCode]) -> list[str]:
    return sorted(code.value for code in codes)


def table_document() -> dict[str, Any]:
    """The ``spec/transitions.json`` document: a JSON object of lists, strings and ``null``."""
    events = sorted({event.__name__ for _phase, event in TABLE})
    rows = [
        {
            "error_codes": _codes(row.error_codes),
            "event": event.__name__,
            "next": sorted(phase.value for phase in row.next_phases),
            "phase": phase.value,
            "returns": _codes(row.returns),
        }
        for (phase, event), row in sorted(
            TABLE.items(), key=lambda item: (item[0][0].value, item[0][1].__name__)
        )
    ]
    status_order = list(RunStatus)
    run_rows = [
        {"next": target.value, "operation": operation.value, "status": status.value}
        for (status, operation), target in sorted(
            RUN_TRANSITIONS.items(), key=lambda item: (status_order.index(item[0][0]), item[0][1].value)
        )
    ]
    return {
        "description": _DESCRIPTION,
        "events": events,
        "failure_codes": _codes(FAILURE_CODES),
        "illegal": ErrorCode.INVALID_TRANSITION.value,
        "phase_status": {phase.value: status for phase, status in PHASE_STATUS.items()},
        "phases": sorted(phase.value for phase in Phase),
        "preflight_order": [code.value for code in PREFLIGHT_ORDER],
        "run_transitions": run_rows,
        "transitions": rows,
    }


def dump_table_document(document: dict[str, Any] | None = None) -> str:
    """``document`` (default: :func:`table_document`) as sorted, 2-space-indented JSON + newline."""
    return json.dumps(table_document() if document is None else document, indent=2, sort_keys=True) + "\n"
