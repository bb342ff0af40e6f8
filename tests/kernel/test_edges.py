"""Kernel edges the broader tests pass over: 1-byte charges, compare-and-set corners, messages.

Each test pins one behaviour a plausible slip would change (found by mutation
analysis, see tests/README.md).
"""

from __future__ import annotations

import inspect

import attrs
import pytest

from invocation_store.kernel import (
    CompareAndSet,
    ErrorCode,
    Failed,
    Limits,
    RawReceived,
    ToolCallEnvelope,
    check_envelope,
    decide_complete,
    is_well_formed,
    preflight,
    record_bytes,
    run_usage_after,
)

from ._helpers import (
    ARGS,
    RUN_ID,
    T0,
    TOOL,
    begun,
    default_context,
    default_policy,
    errored,
    make_run,
    ready,
    step,
)


def _envelope(arguments: str = ARGS) -> ToolCallEnvelope:
    return ToolCallEnvelope(run_id=RUN_ID, tool_call_id="call_1", tool_name=TOOL, arguments=arguments)


def test_a_one_byte_completion_is_charged_one_byte() -> None:
    """CIS-RUN-6: a completion that stores one byte more charges exactly one byte; none charges none."""
    record = begun()
    run = make_run()
    one = step(record, RawReceived(raw_response="x", now_ms=T0 + 1))
    assert record_bytes(one) - record_bytes(record) == 1
    assert run_usage_after(run, record, one) == attrs.evolve(run, bytes_used=run.bytes_used + 1)
    assert run_usage_after(run, record, record) == run
    failed = step(record, Failed(code=ErrorCode.EXECUTION_FAILED, now_ms=T0 + 1))
    assert run_usage_after(run, record, failed) == run


def test_a_stored_record_with_the_token_but_another_identity_is_not_before() -> None:
    """CIS-STORE-3, CIS-TTL-2: the same token is not enough: identity fields must match too."""
    record = begun()
    after = ready(record)
    for change in ({"request_json": '{"q": "other"}'}, {"created_at_ms": T0 - 1}, {"sequence": 2}):
        stored = attrs.evolve(record, **change)
        assert decide_complete(stored, record, after, T0 + 30) is ErrorCode.INVALID_TRANSITION
    assert decide_complete(record, record, after, T0 + 30) is CompareAndSet.WRITE


def test_a_replay_needs_the_same_status_code_and_update_time() -> None:
    """CIS-RETRY-2: a terminal record replays only an ``after`` equal in status, code and update time."""
    record = begun()
    stored = errored(record, ErrorCode.EXECUTION_FAILED, now_ms=T0 + 20)
    same = errored(record, ErrorCode.EXECUTION_FAILED, now_ms=T0 + 20)
    assert decide_complete(stored, record, same, T0 + 30) is CompareAndSet.REPLAY
    other_code = errored(record, ErrorCode.EXECUTION_TIMEOUT, now_ms=T0 + 20)
    assert decide_complete(stored, record, other_code, T0 + 30) is ErrorCode.INVALID_TRANSITION
    done = ready(record, now_ms=T0 + 20)
    raw_only = step(record, RawReceived(raw_response="r", now_ms=T0 + 20))
    assert decide_complete(done, record, raw_only, T0 + 30) is ErrorCode.INVALID_TRANSITION


def test_an_identity_change_names_every_changed_field() -> None:
    """CIS-LIFE-6: the programming error lists the changed fields, comma-separated."""
    record = begun()
    changed = attrs.evolve(ready(record), request_json="{}", sequence=7)
    with pytest.raises(ValueError, match=r"may not change sequence, request_json \(CIS-LIFE-6\)"):
        decide_complete(record, record, changed, T0 + 30)


def test_a_status_outside_the_lifecycle_is_not_well_formed() -> None:
    """CIS-STORE-6: a record whose status is no InvocationStatus is never well-formed."""
    for status in ("DONE", "", None):
        assert not is_well_formed(attrs.evolve(begun(), status=status))


def test_the_nesting_limit_is_the_limits_one() -> None:
    """CIS-JSON-5: check_envelope applies ``limits.max_json_depth``, not a default."""
    nested = '{"a": {"b": {"c": 1}}}'  # depth 3
    assert (
        check_envelope(default_context(), _envelope(nested), default_policy(), Limits(max_json_depth=3))
        is None
    )
    assert (
        check_envelope(default_context(), _envelope(nested), default_policy(), Limits(max_json_depth=2))
        is ErrorCode.INVALID_ARGUMENTS
    )


def test_preflight_measures_the_whole_record_with_its_tool_name() -> None:
    """CIS-SIZE-5, CIS-PRE-8: preflight's admission counts the tool name in the whole-record size."""
    run = make_run()
    size = len(RUN_ID) + len("call_1") + len(TOOL) + len(ARGS)
    for limit, expected in ((size, None), (size - 1, ErrorCode.REQUEST_TOO_LARGE)):
        code = preflight(
            default_context(),
            _envelope(),
            default_policy(),
            Limits(record_bytes=limit),
            run=run,
            existing=None,
            now_ms=T0,
        )
        assert code is expected, limit


def test_preflight_without_a_token_never_replays() -> None:
    """CIS-RETRY-2, CIS-ID-5: preflight's default token is the empty one, which replays nothing.

    A call checked without its invocation token meets a live record of the same key as a
    duplicate, whatever token that record carries.
    """
    assert inspect.signature(preflight).parameters["invocation_token"].default == ""
    run = make_run()
    # "XXXX" is the literal mutation tools put in place of a string: the signature check
    # above already pins the default, but a tool that wraps the function hides it.
    for token in ("tok-1", "0f" * 16, "x", "XXXX"):
        existing = begun(token=token)
        code = preflight(
            default_context(),
            _envelope(),
            default_policy(),
            Limits(),
            run=run,
            existing=existing,
            now_ms=T0 + 1,
        )
        assert code is ErrorCode.CALL_IN_PROGRESS, token
