"""Preflight examples, ids and keys: what the kernel decides before anything is written.

Covers the envelope checks of :func:`check_envelope` and :func:`preflight`, the safe-id
rules and the key factory. Hostile inputs live in ``test_hostile.py``; properties
(order, totality, injectivity) in ``test_properties.py``.
"""

from __future__ import annotations

import pytest

from invocation_store.adapters import call_key
from invocation_store.kernel import (
    ERROR_MESSAGES,
    MAX_ID_LENGTH,
    Admission,
    ErrorCode,
    InvocationStatus,
    Limits,
    ToolCallEnvelope,
    ToolPolicy,
    admit,
    check_envelope,
    check_tool_call_id,
    is_safe_id,
    preflight,
)

from ._helpers import (
    ARGS,
    RUN_ID,
    T0,
    TOOL,
    begun,
    default_context,
    default_limits,
    default_policy,
    make_run,
    request,
)

#: Real framework ids that must be accepted unchanged (CIS-ID-1).
PROVIDER_IDS = [
    "call_abc123XYZ",  # OpenAI Chat Completions
    "call_9sKdLq2Vx0pN3mR7tY1uWz4e",
    "fc_67ca09c5efe0819096d0511c92b8c890096610f474011cc0",  # OpenAI Responses item id
    "toolu_01A09q90qw90lq917835lq9",  # Anthropic
    "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q",  # Bedrock Converse
    "D681PevKs",  # Mistral (9 characters)
    "chatcmpl-tool-3f1c7c3e0b3c4f5e9d2a8b7c6d5e4f3a",  # vLLM
    "functions.get_weather:0",  # Kimi-style
    "123e4567-e89b-12d3-a456-426614174000",  # UUID
    "a",
    "x" * MAX_ID_LENGTH,
]


def envelope(**changes: object) -> ToolCallEnvelope:
    """A passing envelope with ``changes`` applied."""
    fields: dict[str, object] = {
        "run_id": RUN_ID,
        "tool_call_id": "call_1",
        "tool_name": TOOL,
        "arguments": ARGS,
    }
    fields.update(changes)
    return ToolCallEnvelope(**fields)  # type: ignore[arg-type]


# -- ids -------------------------------------------------------------------------------


@pytest.mark.parametrize("tool_call_id", PROVIDER_IDS)
def test_real_provider_ids_are_safe(tool_call_id: str) -> None:
    """CIS-ID-1: real framework ids pass the id check and preflight unchanged."""
    assert is_safe_id(tool_call_id)
    assert check_tool_call_id(tool_call_id) is None
    assert (
        check_envelope(
            default_context(), envelope(tool_call_id=tool_call_id), default_policy(), default_limits()
        )
        is None
    )


@pytest.mark.parametrize("tool_call_id", PROVIDER_IDS)
def test_framework_id_is_preserved_exactly(tool_call_id: str) -> None:
    """CIS-ID-4: the record and its key contain the exact supplied id, byte for byte."""
    record = begun(tool_call_id)
    assert record.tool_call_id == tool_call_id
    assert record.tool_call_id.encode() == tool_call_id.encode()
    key = call_key("cis", RUN_ID, tool_call_id)
    assert key == f"cis:{{{RUN_ID}}}:call:{tool_call_id}"
    assert key.endswith(":call:" + tool_call_id)


@pytest.mark.parametrize(
    "value", [None, "", " ", "\t", "\n  \r", 0, 12, 1.5, b"call_1", ["call_1"], {}, True]
)
def test_missing_ids_are_rejected(value: object) -> None:
    """CIS-ID-2: absent, None, non-string, empty or blank ids are MISSING_TOOL_CALL_ID."""
    assert check_tool_call_id(value) is ErrorCode.MISSING_TOOL_CALL_ID
    assert (
        check_envelope(default_context(), envelope(tool_call_id=value), default_policy(), default_limits())
        is ErrorCode.MISSING_TOOL_CALL_ID
    )


@pytest.mark.parametrize(
    "value",
    [" call_1", "call_1 ", "call 1", "call\n1", "call_1\n", "a\x00b", "\u00e9", "call_\u0661", "x" * 129]
    + [f"a{c}b" for c in "{}*?[]/\\@#$%&+=,;'\"<>|~`!^()"],
)
def test_unsafe_ids_are_rejected(value: str) -> None:
    """CIS-ID-3: anything outside 1-128 of A-Z a-z 0-9 _ - . : is UNSAFE_TOOL_CALL_ID, never trimmed."""
    assert not is_safe_id(value)
    assert check_tool_call_id(value) is ErrorCode.UNSAFE_TOOL_CALL_ID
    assert (
        check_envelope(default_context(), envelope(tool_call_id=value), default_policy(), default_limits())
        is ErrorCode.UNSAFE_TOOL_CALL_ID
    )


# -- envelope checks --------------------------------------------------------------------


@pytest.mark.parametrize("run_id", ["run-2", "RUN-1", "run-1 ", "", None, 1, b"run-1"])
def test_cross_run_call_is_rejected(run_id: object) -> None:
    """CIS-PRE-3: an envelope run id other than the RunContext's is RUN_MISMATCH, before any write."""
    assert (
        check_envelope(default_context(), envelope(run_id=run_id), default_policy(), default_limits())
        is ErrorCode.RUN_MISMATCH
    )
    code = preflight(
        default_context(),
        envelope(run_id=run_id),
        default_policy(),
        default_limits(),
        run=make_run(),
        existing=None,
        now_ms=T0,
    )
    assert code is ErrorCode.RUN_MISMATCH


def test_unauthorized_or_writable_tools_are_rejected() -> None:
    """CIS-PRE-4: authorized=false is UNAUTHORIZED, read_only=false is NOT_READ_ONLY; no request is echoed."""
    secret_args = '{"api_key": "sk-SECRET-123"}'
    denied = ToolPolicy(name=TOOL, authorized=False, read_only=True)
    writable = ToolPolicy(name=TOOL, authorized=True, read_only=False)
    env = envelope(arguments=secret_args)
    assert check_envelope(default_context(), env, denied, default_limits()) is ErrorCode.UNAUTHORIZED
    assert check_envelope(default_context(), env, writable, default_limits()) is ErrorCode.NOT_READ_ONLY
    for code in (ErrorCode.UNAUTHORIZED, ErrorCode.NOT_READ_ONLY):
        assert "SECRET" not in ERROR_MESSAGES[code]
        assert "SECRET" not in code.value


@pytest.mark.parametrize("flag", [False, None, "true", "True", "false", "0", "1", 1, 0, 1.0, [True], "yes"])
def test_authorization_fails_closed(flag: object) -> None:
    """CIS-PRE-5: only the literal True authorizes; strings, ints and None are UNAUTHORIZED."""
    policy = ToolPolicy(name=TOOL, authorized=flag, read_only=True)  # type: ignore[arg-type]
    assert check_envelope(default_context(), envelope(), policy, default_limits()) is ErrorCode.UNAUTHORIZED


@pytest.mark.parametrize(
    ("has_policy", "tool_name"),
    [
        (False, TOOL),
        (True, "delete_all"),
        (True, None),
        (True, 7),
        (True, "Search"),
        (True, "search "),
    ],
)
def test_unknown_or_mismatched_tool_is_unauthorized(has_policy: bool, tool_name: object) -> None:
    """CIS-PRE-5: no policy for the tool, or a tool name that is not the policy's, is UNAUTHORIZED."""
    policy = default_policy() if has_policy else None
    assert (
        check_envelope(default_context(), envelope(tool_name=tool_name), policy, default_limits())
        is ErrorCode.UNAUTHORIZED
    )


@pytest.mark.parametrize("flag", [False, None, "true", "false", "0", 1, 0])
def test_read_only_fails_closed(flag: object) -> None:
    """CIS-PRE-6: only the literal True declares read-only; anything else is NOT_READ_ONLY."""
    policy = ToolPolicy(name=TOOL, authorized=True, read_only=flag)  # type: ignore[arg-type]
    assert check_envelope(default_context(), envelope(), policy, default_limits()) is ErrorCode.NOT_READ_ONLY


def test_request_limit_is_utf8_bytes() -> None:
    """CIS-SIZE-2: arguments over the request limit in UTF-8 bytes (not characters) are REQUEST_TOO_LARGE."""
    args = '{"q":"' + "\u20ac" * 10 + '"}'  # 18 characters, 38 bytes
    assert (
        check_envelope(
            default_context(), envelope(arguments=args), default_policy(), Limits(request_bytes=38)
        )
        is None
    )
    too_large = check_envelope(
        default_context(), envelope(arguments=args), default_policy(), Limits(request_bytes=37)
    )
    assert too_large is ErrorCode.REQUEST_TOO_LARGE


def test_preflight_passes_then_admit_creates() -> None:
    """CIS-PRE-1, CIS-PRE-2: a clean envelope passes every check and the same snapshot admits it."""
    run = make_run()
    assert (
        preflight(
            default_context(),
            envelope(),
            default_policy(),
            default_limits(),
            run=run,
            existing=None,
            now_ms=T0,
        )
        is None
    )
    assert isinstance(admit(run, None, request(), default_limits(), T0), Admission)


def test_preflight_run_checks_follow_envelope_checks() -> None:
    """CIS-PRE-1, CIS-PRE-8: with a clean envelope, preflight reports the run checks in the admit order."""
    existing = begun("call_1", token="first")
    spent = make_run(tool_call_budget=0)
    assert (
        preflight(
            default_context(),
            envelope(),
            default_policy(),
            default_limits(),
            run=None,
            existing=None,
            now_ms=T0,
        )
        is ErrorCode.RUN_INACTIVE
    )
    late = preflight(
        default_context(),
        envelope(),
        default_policy(),
        default_limits(),
        run=make_run(deadline_ms=T0),
        existing=None,
        now_ms=T0,
    )
    assert late is ErrorCode.RUN_DEADLINE_EXCEEDED
    dup = preflight(
        default_context(),
        envelope(),
        default_policy(),
        default_limits(),
        run=spent,
        existing=existing,
        now_ms=T0,
        invocation_token="x",
    )
    assert dup is (
        ErrorCode.CALL_IN_PROGRESS
        if existing.status is InvocationStatus.PROJECTING
        else ErrorCode.DUPLICATE_TOOL_CALL
    )
    assert preflight(
        default_context(), envelope(), default_policy(), default_limits(), run=spent, existing=None, now_ms=T0
    ) is (ErrorCode.TOOL_BUDGET_EXHAUSTED)
    poor = make_run(byte_budget=len(ARGS) - 1)
    assert preflight(
        default_context(), envelope(), default_policy(), default_limits(), run=poor, existing=None, now_ms=T0
    ) is (ErrorCode.RUN_BYTES_EXHAUSTED)
