"""is_well_formed: the states transitions can produce, and nothing else (CIS-STORE-6)."""

from __future__ import annotations

import attrs
import pytest

from invocation_store.kernel import (
    ErrorCode,
    EvidenceStatus,
    Failed,
    InvocationStatus,
    is_well_formed,
    transition,
)

from ._helpers import T0, begun, default_limits, errored, ready


def test_every_state_the_kernel_produces_is_well_formed() -> None:
    """CIS-LIFE-5, CIS-EVID-1: PROJECTING, READY and ERROR records from transitions pass."""
    record = begun()
    failed = transition(record, Failed(code=ErrorCode.EXECUTION_FAILED, now_ms=T0 + 5), default_limits())
    assert not isinstance(failed, ErrorCode)
    for state in (record, ready(record), failed):
        assert is_well_formed(state), state.status


@pytest.mark.parametrize(
    "changes",
    [
        {"evidence_status": EvidenceStatus.EVIDENCE_FOUND},  # PROJECTING with evidence
        {"status": InvocationStatus.READY},  # READY without evidence or result
        {"status": InvocationStatus.ERROR},  # ERROR without evidence or code
        {"status": InvocationStatus.ERROR, "evidence_status": EvidenceStatus.ERROR},  # ERROR without a code
        {
            "status": InvocationStatus.ERROR,
            "error_code": ErrorCode.EXECUTION_FAILED,
        },  # evidence not ERROR
        {"status": InvocationStatus.READY, "agent_result": "r", "scope": "s"},  # READY without evidence
        {"sequence": 0},
        {"expires_at_ms": T0},  # expiring at (or before) creation
        {"tool_call_id": "call 1"},
    ],
)
def test_states_no_transition_produces_are_not(changes: dict[str, object]) -> None:
    """CIS-STORE-6, CIS-EVID-1: a tampered or corrupt record is recognised as such."""
    assert not is_well_formed(attrs.evolve(begun(), **changes))


def test_ready_with_an_error_code_is_not_well_formed() -> None:
    """CIS-EVID-1: READY never carries an error code, ERROR never a result."""
    done = ready(begun())
    assert not is_well_formed(attrs.evolve(done, error_code=ErrorCode.EXECUTION_FAILED))
    assert not is_well_formed(attrs.evolve(done, agent_result=None))


def test_error_needs_its_code_and_nothing_else() -> None:
    """CIS-EVID-1, CIS-STORE-6: ERROR without a code (or with a non-ErrorCode one) is not well-formed.

    The same record with its code is; evidence other than ERROR, a result or a scope breaks it too.
    """
    failed = errored(begun())
    assert is_well_formed(failed)
    assert not is_well_formed(attrs.evolve(failed, error_code=None))
    assert not is_well_formed(attrs.evolve(failed, error_code="EXECUTION_FAILED"))
    assert not is_well_formed(attrs.evolve(failed, evidence_status=EvidenceStatus.NO_EVIDENCE))
    assert not is_well_formed(attrs.evolve(failed, agent_result="partial"))
    assert not is_well_formed(attrs.evolve(failed, scope="inbox"))
