"""Hostile envelopes (issue 2, item 7): each gets its stable code and nothing raises.

Envelopes are given both as Python values and as JSON text decoded through the strict
codec (``invocation_store.codec``), the way an adapter receives them. Flags given as
strings never authorize: the codec rejects them and the caller fails closed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import invocation_store.kernel as kernel
from invocation_store import codec
from invocation_store.codec import CodecError, envelope_from_obj, policy_from_obj, structure
from invocation_store.kernel import (
    Admission,
    CanonicalRecord,
    ErrorCode,
    EvidenceStatus,
    Failed,
    InvocationStatus,
    Limits,
    Phase,
    RunState,
    RunStatus,
    ToolCallEnvelope,
    ToolPolicy,
    admit,
    check_envelope,
    phase_of,
    preflight,
    transition,
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
    errored,
    make_run,
    ready,
    request,
)
from .test_preflight import PROVIDER_IDS

TEN_MB = 10 * 1024 * 1024
#: The package directory, so a child process can import the kernel alone.
PACKAGE_DIR = str(Path(kernel.__file__).resolve().parent.parent)

#: (label, envelope fields to change, expected code)
HOSTILE: list[tuple[str, dict[str, object], ErrorCode]] = [
    # ids
    ("id None", {"tool_call_id": None}, ErrorCode.MISSING_TOOL_CALL_ID),
    ("id empty", {"tool_call_id": ""}, ErrorCode.MISSING_TOOL_CALL_ID),
    ("id blank", {"tool_call_id": "   "}, ErrorCode.MISSING_TOOL_CALL_ID),
    ("id int", {"tool_call_id": 12345}, ErrorCode.MISSING_TOOL_CALL_ID),
    ("id list", {"tool_call_id": ["call_1"]}, ErrorCode.MISSING_TOOL_CALL_ID),
    ("id bytes", {"tool_call_id": b"call_1"}, ErrorCode.MISSING_TOOL_CALL_ID),
    ("id padded", {"tool_call_id": " call_1 "}, ErrorCode.UNSAFE_TOOL_CALL_ID),
    ("id tab-padded", {"tool_call_id": "\tcall_1"}, ErrorCode.UNSAFE_TOOL_CALL_ID),
    ("id open brace", {"tool_call_id": "call{1"}, ErrorCode.UNSAFE_TOOL_CALL_ID),
    ("id close brace", {"tool_call_id": "call}1"}, ErrorCode.UNSAFE_TOOL_CALL_ID),
    ("id hash tag", {"tool_call_id": "{run-2}"}, ErrorCode.UNSAFE_TOOL_CALL_ID),
    ("id space", {"tool_call_id": "call 1"}, ErrorCode.UNSAFE_TOOL_CALL_ID),
    ("id newline", {"tool_call_id": "call_1\nx"}, ErrorCode.UNSAFE_TOOL_CALL_ID),
    ("id trailing newline", {"tool_call_id": "call_1\n"}, ErrorCode.UNSAFE_TOOL_CALL_ID),
    ("id non-ascii", {"tool_call_id": "call_\u00e9"}, ErrorCode.UNSAFE_TOOL_CALL_ID),
    ("id fullwidth", {"tool_call_id": "\uff43\uff41\uff4c\uff4c"}, ErrorCode.UNSAFE_TOOL_CALL_ID),
    ("id 129 chars", {"tool_call_id": "c" * 129}, ErrorCode.UNSAFE_TOOL_CALL_ID),
    ("id 10 MB", {"tool_call_id": "c" * TEN_MB}, ErrorCode.UNSAFE_TOOL_CALL_ID),
    ("id NUL", {"tool_call_id": "call\x001"}, ErrorCode.UNSAFE_TOOL_CALL_ID),
    ("id glob", {"tool_call_id": "call_*"}, ErrorCode.UNSAFE_TOOL_CALL_ID),
    # run ids
    ("run None", {"run_id": None}, ErrorCode.RUN_MISMATCH),
    ("run other", {"run_id": "run-2"}, ErrorCode.RUN_MISMATCH),
    ("run padded", {"run_id": " run-1"}, ErrorCode.RUN_MISMATCH),
    ("run int", {"run_id": 1}, ErrorCode.RUN_MISMATCH),
    # arguments
    ("args None", {"arguments": None}, ErrorCode.INVALID_ARGUMENTS),
    ("args dict", {"arguments": {"q": 1}}, ErrorCode.INVALID_ARGUMENTS),
    ("args empty", {"arguments": ""}, ErrorCode.INVALID_ARGUMENTS),
    ("args two objects", {"arguments": "{}{}"}, ErrorCode.INVALID_ARGUMENTS),
    ("args array", {"arguments": "[]"}, ErrorCode.INVALID_ARGUMENTS),
    ("args null", {"arguments": "null"}, ErrorCode.INVALID_ARGUMENTS),
    ("args BOM", {"arguments": "\ufeff{}"}, ErrorCode.INVALID_ARGUMENTS),
    ("args NaN", {"arguments": '{"a":NaN}'}, ErrorCode.INVALID_ARGUMENTS),
    ("args duplicate keys", {"arguments": '{"a":1,"a":2}'}, ErrorCode.INVALID_ARGUMENTS),
    ("args escaped lone surrogate", {"arguments": '{"q":"\\ud800"}'}, ErrorCode.INVALID_ARGUMENTS),
    ("args raw lone surrogate", {"arguments": '{"q":"\ud800"}'}, ErrorCode.INVALID_ARGUMENTS),
    ("args 100k arrays", {"arguments": "[" * 100_000 + "]" * 100_000}, ErrorCode.INVALID_ARGUMENTS),
    (
        "args 100k objects",
        {"arguments": '{"a":' * 100_000 + "0" + "}" * 100_000},
        ErrorCode.REQUEST_TOO_LARGE,  # 600,001 bytes: refused by size before any parsing
    ),
    ("args 5000 digits", {"arguments": '{"a":' + "1" * 5000 + "}"}, ErrorCode.INVALID_ARGUMENTS),
    ("args 10 MB text", {"arguments": "x" * TEN_MB}, ErrorCode.REQUEST_TOO_LARGE),
    ("args 10 MB brackets", {"arguments": "[" * TEN_MB}, ErrorCode.REQUEST_TOO_LARGE),
    ("args 10 MB invalid UTF-16", {"arguments": "\ud800" * TEN_MB}, ErrorCode.REQUEST_TOO_LARGE),
    ("args 10 MB object", {"arguments": '{"a":"' + "x" * TEN_MB + '"}'}, ErrorCode.REQUEST_TOO_LARGE),
    # tools
    ("tool None", {"tool_name": None}, ErrorCode.UNAUTHORIZED),
    ("tool other", {"tool_name": "delete_everything"}, ErrorCode.UNAUTHORIZED),
    ("tool int", {"tool_name": 0}, ErrorCode.UNAUTHORIZED),
]


#: Hostile texts that the default request limit refuses by size alone, for the parser's
#: own hardening: under a limit they fit in, each is INVALID_ARGUMENTS, never a crash.
HOSTILE_LARGE: list[tuple[str, str]] = [
    ("100k objects", '{"a":' * 100_000 + "0" + "}" * 100_000),
    ("10 MB text", "x" * TEN_MB),
    ("10 MB brackets", "[" * TEN_MB),
    ("10 MB lone surrogates", "\ud800" * TEN_MB),
]


def _envelope(changes: dict[str, object]) -> ToolCallEnvelope:
    fields: dict[str, object] = {
        "run_id": RUN_ID,
        "tool_call_id": "call_1",
        "tool_name": TOOL,
        "arguments": ARGS,
    }
    fields.update(changes)
    return ToolCallEnvelope(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(("label", "changes", "expected"), HOSTILE, ids=[case[0] for case in HOSTILE])
def test_hostile_envelope_gets_its_code(label: str, changes: dict[str, object], expected: ErrorCode) -> None:
    """CIS-PRE-2, CIS-ID-2, CIS-ID-3, CIS-JSON-1: each hostile envelope gets its stable code, never raises."""
    env = _envelope(changes)
    assert check_envelope(default_context(), env, default_policy(), default_limits()) is expected, label
    full = preflight(
        default_context(), env, default_policy(), default_limits(), run=make_run(), existing=None, now_ms=T0
    )
    assert full is expected, label


@pytest.mark.parametrize(("label", "arguments"), HOSTILE_LARGE, ids=[case[0] for case in HOSTILE_LARGE])
def test_hostile_text_within_the_limit_is_invalid_not_a_crash(label: str, arguments: str) -> None:
    """CIS-PRE-2, CIS-JSON-5: with a request limit large enough to let them through the size check,
    the texts that the default limit refuses by size are INVALID_ARGUMENTS, never an exception."""
    roomy = Limits(request_bytes=64 * 1024 * 1024)
    env = _envelope({"arguments": arguments})
    assert (
        check_envelope(default_context(), env, default_policy(), default_limits())
        is ErrorCode.REQUEST_TOO_LARGE
    ), label
    assert check_envelope(default_context(), env, default_policy(), roomy) is ErrorCode.INVALID_ARGUMENTS, (
        label
    )


def _fail_closed_policy(obj: object) -> ToolPolicy | None:
    """What a harness does with a policy decoded from JSON: a codec error means no policy."""
    try:
        return policy_from_obj(obj)
    except CodecError:
        return None


def _from_json(text: str) -> ToolCallEnvelope | ErrorCode:
    return envelope_from_obj(json.loads(text))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"run_id":"run-1","tool_name":"search","arguments":"{}"}', ErrorCode.MISSING_TOOL_CALL_ID),
        (
            '{"run_id":"run-1","tool_call_id":null,"tool_name":"search","arguments":"{}"}',
            ErrorCode.MISSING_TOOL_CALL_ID,
        ),
        (
            '{"run_id":"run-1","tool_call_id":"","tool_name":"search","arguments":"{}"}',
            ErrorCode.MISSING_TOOL_CALL_ID,
        ),
        (
            '{"run_id":"run-1","tool_call_id":42,"tool_name":"search","arguments":"{}"}',
            ErrorCode.MISSING_TOOL_CALL_ID,
        ),
        (
            '{"run_id":"run-1","tool_call_id":false,"tool_name":"search","arguments":"{}"}',
            ErrorCode.MISSING_TOOL_CALL_ID,
        ),
        (
            '{"run_id":"run-1","tool_call_id":" c ","tool_name":"search","arguments":"{}"}',
            ErrorCode.UNSAFE_TOOL_CALL_ID,
        ),
        ('{"run_id":null,"tool_call_id":"c","tool_name":"search","arguments":"{}"}', ErrorCode.RUN_MISMATCH),
        (
            '{"run_id":["run-1"],"tool_call_id":"c","tool_name":"search","arguments":"{}"}',
            ErrorCode.RUN_MISMATCH,
        ),
        (
            '{"run_id":"run-1","tool_call_id":"c","tool_name":"search","arguments":{"q":1}}',
            ErrorCode.INVALID_ARGUMENTS,
        ),
        ('{"run_id":"run-1","tool_call_id":"c","tool_name":"search"}', ErrorCode.INVALID_ARGUMENTS),
        (
            '{"run_id":"run-1","tool_call_id":"c","tool_name":"search","arguments":"{\\"a\\":NaN}"}',
            ErrorCode.INVALID_ARGUMENTS,
        ),
        (
            '{"run_id":"run-1","tool_call_id":"c","tool_name":"search","arguments":"{\\"q\\":\\"\\\\ud800\\"}"}',
            ErrorCode.INVALID_ARGUMENTS,
        ),
        ('{"run_id":"run-1","tool_call_id":"c","tool_name":true,"arguments":"{}"}', ErrorCode.UNAUTHORIZED),
        ('{"run_id":"run-1","tool_call_id":"c","arguments":"{}"}', ErrorCode.UNAUTHORIZED),
        (
            '{"run_id":"run-1","tool_call_id":"c","tool_name":"search","arguments":"{}","authorized":true}',
            ErrorCode.INVALID_ARGUMENTS,
        ),
        ("[]", ErrorCode.INVALID_ARGUMENTS),
        ("null", ErrorCode.INVALID_ARGUMENTS),
        ('"call_1"', ErrorCode.INVALID_ARGUMENTS),
    ],
)
def test_hostile_json_envelopes_through_the_codec(text: str, expected: ErrorCode) -> None:
    """CIS-CODEC-2, CIS-ID-2, CIS-PRE-2: envelopes decoded from JSON keep missing as missing and get codes."""
    decoded = _from_json(text)
    code = (
        decoded
        if isinstance(decoded, ErrorCode)
        else check_envelope(default_context(), decoded, default_policy(), default_limits())
    )
    assert code is expected
    if isinstance(decoded, ToolCallEnvelope):
        assert decoded.tool_call_id != "None"


def test_escaped_lone_surrogate_survives_envelope_decoding_and_is_rejected() -> None:
    """CIS-JSON-4, CIS-CODEC-2: the arguments text "{"q":"\\ud800"}" (escape intact) is INVALID_ARGUMENTS."""
    outer = json.dumps(
        {"run_id": RUN_ID, "tool_call_id": "c", "tool_name": TOOL, "arguments": '{"q":"\\ud800"}'}
    )
    decoded = _from_json(outer)
    assert isinstance(decoded, ToolCallEnvelope)
    assert decoded.arguments == '{"q":"\\ud800"}'
    assert (
        check_envelope(default_context(), decoded, default_policy(), default_limits())
        is ErrorCode.INVALID_ARGUMENTS
    )


@pytest.mark.parametrize(
    "flags",
    [
        {"authorized": "false", "read_only": True},
        {"authorized": "0", "read_only": True},
        {"authorized": "true", "read_only": True},
        {"authorized": 1, "read_only": True},
        {"authorized": None, "read_only": True},
        {"authorized": True, "read_only": "false"},
        {"authorized": True, "read_only": "0"},
        {"authorized": True, "read_only": 0},
        {"authorized": True},
        {"authorized": True, "read_only": True, "admin": True},
    ],
    ids=json.dumps,
)
def test_string_flags_never_authorize(flags: dict[str, object]) -> None:
    """CIS-CODEC-2, CIS-PRE-5, CIS-CODEC-1: "false"/"0" flags fail in the codec; the call is UNAUTHORIZED."""
    text = json.dumps({"name": TOOL, **flags})
    with pytest.raises(CodecError) as caught:
        policy_from_obj(json.loads(text))
    assert "false" not in str(caught.value)  # the message names the field, never the value
    policy = _fail_closed_policy(json.loads(text))
    assert policy is None
    assert (
        check_envelope(default_context(), _envelope({}), policy, default_limits()) is ErrorCode.UNAUTHORIZED
    )


def test_boolean_flags_from_json_do_authorize() -> None:
    """CIS-CODEC-1, CIS-PRE-5: the literal JSON booleans round-trip; true/true passes, false/true does not."""
    allowed = _fail_closed_policy(json.loads('{"name":"search","authorized":true,"read_only":true}'))
    denied = _fail_closed_policy(json.loads('{"name":"search","authorized":false,"read_only":true}'))
    assert allowed == default_policy()
    assert check_envelope(default_context(), _envelope({}), allowed, default_limits()) is None
    assert (
        check_envelope(default_context(), _envelope({}), denied, default_limits()) is ErrorCode.UNAUTHORIZED
    )


@pytest.mark.parametrize(
    ("obj", "cls", "path"),
    [
        ({"name": None, "authorized": True, "read_only": True}, ToolPolicy, "name"),
        ({"name": 5, "authorized": True, "read_only": True}, ToolPolicy, "name"),
        ({"name": "s", "authorized": True, "read_only": True, "timeout_ms": True}, ToolPolicy, "timeout_ms"),
        ({"name": "s", "authorized": True, "read_only": True, "timeout_ms": "30"}, ToolPolicy, "timeout_ms"),
        ({"name": "s", "authorized": True, "read_only": True, "timeout_ms": 1.5}, ToolPolicy, "timeout_ms"),
        ({**codec.unstructure(make_run()), "tool_call_budget": "10"}, RunState, "tool_call_budget"),
        ({**codec.unstructure(make_run()), "run_id": None}, RunState, "run_id"),
    ],
)
def test_codec_rejects_instead_of_coercing(obj: dict[str, object], cls: type, path: str) -> None:
    """CIS-CODEC-1: str takes only str, int only non-bool int; the error names the field, not the value."""
    with pytest.raises(CodecError) as caught:
        structure(obj, cls)
    assert caught.value.path == path


def test_codec_rejects_unknown_keys_and_round_trips_records() -> None:
    """CIS-CODEC-1: unknown keys are errors; a kernel record survives unstructure/structure unchanged."""
    record = begun("toolu_01A09q90qw90lq917835lq9")
    data = codec.unstructure(record)
    assert codec.record_from_obj(data) == record
    with pytest.raises(CodecError):
        codec.record_from_obj({**data, "extra": 1})
    with pytest.raises(CodecError):
        codec.record_from_obj({**data, "sequence": "1"})
    with pytest.raises(CodecError):
        codec.record_from_obj({**data, "tool_call_id": None})
    assert isinstance(codec.record_from_obj(data), CanonicalRecord)


@pytest.mark.parametrize("tool_call_id", PROVIDER_IDS)
def test_real_provider_ids_survive_the_codec_unchanged(tool_call_id: str) -> None:
    """CIS-ID-1, CIS-ID-4, CIS-CODEC-2: real framework ids decoded from JSON are kept byte for byte."""
    text = json.dumps({"run_id": RUN_ID, "tool_call_id": tool_call_id, "tool_name": TOOL, "arguments": ARGS})
    decoded = _from_json(text)
    assert isinstance(decoded, ToolCallEnvelope)
    assert decoded.tool_call_id == tool_call_id
    assert check_envelope(default_context(), decoded, default_policy(), default_limits()) is None


def test_unterminated_string_with_escaped_quotes_is_decided_quickly() -> None:
    """CIS-PRE-2, CIS-JSON-5: hostile arguments under the request limit are decided, not stalled on.

    The text is one quote, 65,536 escaped quotes, then 65 brackets (131,138 bytes). A
    linear scan decides it in about a millisecond; the current scan is quadratic (~90 s
    here). It runs in a child process killed after 5 s: a bound 1000x above the
    linear cost, so the test cannot flake on a slow machine.
    """
    program = textwrap.dedent(
        """
        import sys, types
        parent = types.ModuleType("invocation_store")
        parent.__path__ = [sys.argv[1]]
        sys.modules["invocation_store"] = parent
        from invocation_store.kernel import ErrorCode, check_arguments
        text = '"' + (chr(92) + '"') * 65536 + "[" * 65
        assert check_arguments(text) is ErrorCode.INVALID_ARGUMENTS
        """
    )
    try:
        completed = subprocess.run(
            [sys.executable, "-c", program, PACKAGE_DIR], timeout=5, capture_output=True, check=False
        )
    except subprocess.TimeoutExpired:
        pytest.fail("check_arguments did not decide 131 KB of hostile arguments within 5 s")
    assert completed.returncode == 0, completed.stderr.decode(errors="replace")[-500:]


def test_record_decoded_from_json_keeps_its_enums() -> None:
    """CIS-CODEC-1, CIS-LIFE-3: a READY record read back from JSON is still READY (terminal) to the kernel."""
    final = ready()
    decoded = codec.record_from_obj(json.loads(codec.dumps(final)))
    assert decoded == final
    assert decoded.status is InvocationStatus.READY
    assert decoded.evidence_status is EvidenceStatus.EVIDENCE_FOUND
    assert phase_of(decoded, T0 + 30) is Phase.READY
    late_failure = Failed(code=ErrorCode.EXECUTION_FAILED, now_ms=T0 + 30)
    assert transition(decoded, late_failure, default_limits()) is ErrorCode.INVALID_TRANSITION


def test_run_state_decoded_from_json_stays_active() -> None:
    """CIS-CODEC-1, CIS-RUN-1: an ACTIVE run read back from JSON admits calls (not RUN_INACTIVE)."""
    decoded = codec.run_state_from_obj(json.loads(codec.dumps(make_run())))
    assert decoded.status is RunStatus.ACTIVE
    assert isinstance(admit(decoded, None, request(), default_limits(), T0), Admission)


@pytest.mark.parametrize("field", ["status", "evidence_status", "error_code"])
def test_codec_rejects_unknown_enum_values(field: str) -> None:
    """CIS-CODEC-1: an enum field with a value outside its enum is a CodecError naming the field."""
    data = json.loads(codec.dumps(errored()))
    data[field] = "bogus"
    with pytest.raises(CodecError) as caught:
        codec.record_from_obj(data)
    assert caught.value.path == field
