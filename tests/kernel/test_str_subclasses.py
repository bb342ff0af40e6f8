"""str subclasses cannot pass for ids or lie about their size (CIS-ID-3, CIS-SIZE-1)."""

from __future__ import annotations

import attrs
import pytest

from invocation_store.adapters import call_key
from invocation_store.kernel import (
    ErrorCode,
    ProjectionReceived,
    RunContext,
    ToolCallEnvelope,
    ToolPolicy,
    check_envelope,
    check_tool_call_id,
    is_safe_id,
    transition,
    utf8_len,
)

from ._helpers import T0, begun, default_limits, projection, with_raw


class _Liar(str):
    """Looks like a safe id to the pattern, but keys, compares and measures as something else."""

    __slots__ = ()

    def __format__(self, spec: str) -> str:
        return "victim"

    def __eq__(self, other: object) -> bool:
        return True

    def __hash__(self) -> int:
        return 0

    def __len__(self) -> int:
        return 1

    def isascii(self) -> bool:
        return True


def test_a_str_subclass_is_never_a_safe_id() -> None:
    """CIS-ID-3, CIS-KEY-3: the id check demands an exact str, so no key is built from a liar."""
    liar = _Liar("call_1")
    assert not is_safe_id(liar)
    assert check_tool_call_id(liar) is ErrorCode.UNSAFE_TOOL_CALL_ID
    assert check_tool_call_id(_Liar("  ")) is ErrorCode.MISSING_TOOL_CALL_ID
    with pytest.raises(ValueError, match="tool_call_id"):
        call_key("cis", "run-1", liar)


def test_sizes_are_measured_on_the_real_characters() -> None:
    """CIS-SIZE-1: an overridden __len__ or isascii does not shrink a value."""
    assert utf8_len(_Liar("x" * 1000)) == 1000
    assert utf8_len(_Liar("é" * 10)) == 20


def test_preflight_and_projection_demand_exact_str() -> None:
    """CIS-PRE-3, CIS-PRE-5, CIS-JSON-1, CIS-SIZE-4: a lying subclass cannot pass a comparison or a size."""
    context = RunContext(run_id="run-1")
    policy = ToolPolicy(name="search", authorized=True, read_only=True)
    good = ToolCallEnvelope(run_id="run-1", tool_call_id="call_1", tool_name="search", arguments='{"q":1}')
    assert check_envelope(context, good, policy, default_limits()) is None
    cases = {
        "run_id": ErrorCode.RUN_MISMATCH,
        "arguments": ErrorCode.INVALID_ARGUMENTS,
        "tool_name": ErrorCode.UNAUTHORIZED,
    }
    for name, code in cases.items():
        forged = attrs.evolve(good, **{name: _Liar(getattr(good, name))})
        assert check_envelope(context, forged, policy, default_limits()) is code, name
    held = with_raw(begun())
    lying = projection(content=_Liar("x" * 100_000))
    result = transition(held, ProjectionReceived(projection=lying, now_ms=T0 + 20), default_limits())
    assert not isinstance(result, ErrorCode)
    assert result.error_code is ErrorCode.PROJECTION_INVALID
