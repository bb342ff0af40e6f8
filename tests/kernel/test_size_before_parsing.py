"""REQUEST_TOO_LARGE is decided on the byte length, before any parsing (CIS-SIZE-2, CIS-PRE-2)."""

from __future__ import annotations

from unittest import mock

from hypothesis import given
from hypothesis import strategies as st

from invocation_store.kernel import (
    PREFLIGHT_ORDER,
    ErrorCode,
    Limits,
    RunContext,
    ToolCallEnvelope,
    ToolPolicy,
    _preflight,
    check_envelope,
    text_bytes,
)
from invocation_store.kernel._sizes import text_exceeds

CONTEXT = RunContext(run_id="run-1")
POLICY = ToolPolicy(name="search", authorized=True, read_only=True)


def test_size_comes_before_the_ijson_check_in_the_order() -> None:
    """CIS-PRE-2: the fixed order puts REQUEST_TOO_LARGE right before INVALID_ARGUMENTS."""
    order = list(PREFLIGHT_ORDER)
    assert order.index(ErrorCode.REQUEST_TOO_LARGE) + 1 == order.index(ErrorCode.INVALID_ARGUMENTS)
    assert order.index(ErrorCode.RUN_MISMATCH) + 1 == order.index(ErrorCode.REQUEST_TOO_LARGE)


def test_oversized_arguments_never_reach_the_parser() -> None:
    """CIS-SIZE-2: over the limit the I-JSON check is never called; within it, it is."""
    envelope = ToolCallEnvelope(run_id="run-1", tool_call_id="call_1", tool_name="search", arguments="[" * 65)
    with mock.patch.object(_preflight, "parse_arguments", wraps=_preflight.parse_arguments) as spy:
        assert (
            check_envelope(CONTEXT, envelope, POLICY, Limits(request_bytes=64)) is ErrorCode.REQUEST_TOO_LARGE
        )
        assert spy.call_count == 0
        assert (
            check_envelope(CONTEXT, envelope, POLICY, Limits(request_bytes=65)) is ErrorCode.INVALID_ARGUMENTS
        )
        assert spy.call_count == 1


@given(
    text=st.text(alphabet=st.sampled_from(["a", "\u00e9", "\u20ac", "\U0001f600", "\ud800"]), max_size=80),
    limit=st.integers(min_value=1, max_value=400),
)
def test_the_shortcut_equals_the_byte_count(text: str, limit: int) -> None:
    """CIS-SIZE-1, CIS-SIZE-2: deciding "over the limit" from the length alone where it can gives
    exactly size(text) > limit, for 1-, 2-, 3- and 4-byte code points and lone surrogates."""
    assert text_exceeds(text, limit) is (text_bytes(text) > limit)


def test_sizes_count_code_points_by_their_utf8_length() -> None:
    """CIS-SIZE-1: 1, 2, 3 and 4 bytes by range; a lone surrogate counts 3."""
    assert [
        text_bytes(c) for c in ("\x7f", "\x80", "\u07ff", "\u0800", "\uffff", "\U00010000", "\ud800")
    ] == [
        1,
        2,
        2,
        3,
        3,
        4,
        3,
    ]
