"""Preflight: the fixed, documented order of checks before anything is written.

Order (CIS-PRE-2), first failing check wins:

1. MISSING_TOOL_CALL_ID / UNSAFE_TOOL_CALL_ID (CIS-ID-2, CIS-ID-3)
2. RUN_MISMATCH: envelope run id != RunContext run id (CIS-PRE-3)
3. REQUEST_TOO_LARGE: arguments over the request byte limit (CIS-SIZE-2), decided on
   the text's UTF-8 length before any parsing: counting bytes is O(1) work per byte,
   so the check bounds what the parse below can cost
4. INVALID_ARGUMENTS: not one I-JSON object (CIS-JSON-1..6)
5. UNAUTHORIZED: no policy for the tool, or ``authorized is not True`` (CIS-PRE-5)
6. NOT_READ_ONLY: ``read_only is not True`` (CIS-PRE-6)
7. RUN_INACTIVE, 8. RUN_DEADLINE_EXCEEDED (CIS-RUN-3, CIS-RUN-4)
9. DUPLICATE_TOOL_CALL (CIS-ID-5)
10. TOOL_BUDGET_EXHAUSTED, 11. RUN_BYTES_EXHAUSTED (CIS-RUN-5, CIS-RUN-6)

Checks 1-6 need only the call (:func:`check_envelope`); 7-11 need the run state and
the existing record and are decided by :func:`~._admission.admit` atomically with
creation, inside the store (CIS-PRE-8). :func:`preflight` runs all of them, for
callers (the oracle, tests) that hold a snapshot.
"""

from __future__ import annotations

from typing import Any

from ._admission import AdmissionRequest, admit
from ._codes import ErrorCode
from ._ids import check_tool_call_id
from ._ijson import parse_arguments
from ._models import CanonicalRecord, Limits, RunContext, RunState, ToolCallEnvelope, ToolPolicy, check_now
from ._sizes import text_exceeds, utf8_len

__all__ = ["PREFLIGHT_ORDER", "check_envelope", "parse_envelope", "preflight"]

#: The preflight order as codes, earliest first (CIS-PRE-2).
PREFLIGHT_ORDER: tuple[ErrorCode, ...] = (
    ErrorCode.MISSING_TOOL_CALL_ID,
    ErrorCode.UNSAFE_TOOL_CALL_ID,
    ErrorCode.RUN_MISMATCH,
    ErrorCode.REQUEST_TOO_LARGE,
    ErrorCode.INVALID_ARGUMENTS,
    ErrorCode.UNAUTHORIZED,
    ErrorCode.NOT_READ_ONLY,
    ErrorCode.RUN_INACTIVE,
    ErrorCode.RUN_DEADLINE_EXCEEDED,
    ErrorCode.DUPLICATE_TOOL_CALL,
    ErrorCode.TOOL_BUDGET_EXHAUSTED,
    ErrorCode.RUN_BYTES_EXHAUSTED,
)


def check_envelope(
    context: RunContext,
    envelope: ToolCallEnvelope,
    policy: ToolPolicy | None,
    limits: Limits,
) -> ErrorCode | None:
    """Run checks 1-6 of the preflight order (see the module docstring); ``None`` if all pass.

    Total over envelopes: any value in any envelope field (``None``, a non-string, a
    10 MB string, 100,000 levels of nesting) gets a code, never an exception
    (CIS-PRE-2). ``policy`` is the harness's declaration of the tool named by the
    envelope; ``None`` (unknown tool) is UNAUTHORIZED.
    """
    checked = parse_envelope(context, envelope, policy, limits)
    return checked if isinstance(checked, ErrorCode) else None


def parse_envelope(
    context: RunContext,
    envelope: ToolCallEnvelope,
    policy: ToolPolicy | None,
    limits: Limits,
) -> ErrorCode | dict[str, Any]:
    """:func:`check_envelope` that returns the parsed arguments when all checks pass.

    Same checks, same order, same codes; on success the arguments object the I-JSON
    check parsed (fresh, held by nothing else), so that callers never parse the text
    a second time (CIS-PERF-2).
    """
    code = check_tool_call_id(envelope.tool_call_id)
    if code is not None:
        return code
    # Exact ``str`` only, here and below: a subclass can override ``__eq__``/``__ne__``
    # and so compare equal to anything.
    if type(envelope.run_id) is not str or envelope.run_id != context.run_id:
        return ErrorCode.RUN_MISMATCH
    arguments = envelope.arguments
    # Size before parsing: a byte count is one pass of O(1) work per byte
    # that builds no structure, so an oversized text never reaches the parser. A
    # non-string has no size.
    if type(arguments) is str and text_exceeds(arguments, limits.request_bytes):
        return ErrorCode.REQUEST_TOO_LARGE
    parsed = parse_arguments(arguments, limits.max_json_depth)
    if isinstance(parsed, ErrorCode):
        return ErrorCode.INVALID_ARGUMENTS
    if (
        policy is None
        or type(envelope.tool_name) is not str
        or policy.name != envelope.tool_name
        or utf8_len(envelope.tool_name) is None  # a name with no UTF-8 form cannot be stored
        or policy.authorized is not True
    ):
        return ErrorCode.UNAUTHORIZED
    if policy.read_only is not True:
        return ErrorCode.NOT_READ_ONLY
    return parsed


def preflight(
    context: RunContext,
    envelope: ToolCallEnvelope,
    policy: ToolPolicy | None,
    limits: Limits,
    *,
    run: RunState | None,
    existing: CanonicalRecord | None,
    now_ms: int,
    invocation_token: str = "",
) -> ErrorCode | None:
    """Run the whole preflight order on a snapshot; ``None`` if the call is admitted (CIS-KERN-2).

    ``run`` and ``existing`` are the run state and the record under the envelope's
    key as a store would see them at ``now_ms``. Never raises on any envelope;
    raises ``ValueError`` when ``now_ms`` is not an int in ``[0, 2**53 - 1]``.
    """
    check_now(now_ms)  # a caller error is refused before any check
    code = check_envelope(context, envelope, policy, limits)
    if code is not None:
        return code
    assert isinstance(envelope.tool_call_id, str)
    assert isinstance(envelope.arguments, str)
    assert isinstance(envelope.tool_name, str)
    result = admit(
        run,
        existing,
        AdmissionRequest(
            run_id=context.run_id,
            tool_call_id=envelope.tool_call_id,
            tool_name=envelope.tool_name,
            request_json=envelope.arguments,
            invocation_token=invocation_token,
        ),
        limits,
        now_ms,
    )
    return result if isinstance(result, ErrorCode) else None
