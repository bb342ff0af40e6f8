"""The create operation of the Redis store, I/O-free: CREATE_SCRIPT's call and its reply.

:func:`plan_create` builds the script call from the kernel's request (ids, decimals
and codes in one pre-encoded header argument, keys pre-encoded once per run by
:class:`~invocation_store.adapters._redis_keys.RunKeys`); the outcome of the kernel's
Begin transition that does not depend on the run (kernel ``check_begin``) is decided
here and passed to the script as its last check. :func:`finish_create` runs kernel
``admit`` once, on the run (and record) the script saw, at the time the script
decided at (the server's clock, CIS-STORE-10), and refuses a reply the kernel would not
give (CIS-STORE-8). The seven run values that never change after the run is opened are
decoded once per run (:func:`_run_constants`, cached by their exact text). Contract of
the script: ``_redis_scripts.CREATE_SCRIPT``.
"""

from __future__ import annotations

import functools
from typing import Final, NamedTuple

from ..kernel import (
    DUPLICATE_CODES,
    MAX_ID_LENGTH,
    Admission,
    AdmissionRequest,
    CanonicalRecord,
    ErrorCode,
    Failed,
    InvocationStatus,
    Limits,
    RunState,
    RunStatus,
    admit,
    check_begin,
    is_safe_id,
    transition,
    utf8_len,
)
from ._redis_decode import (
    CODES,
    MAX_EXACT_INT,
    CorruptReplyError,
    Reply,
    check_int,
    decode_embedded,
    decode_int,
    split_reply,
)
from ._redis_keys import run_keys
from ._redis_scripts import CREATE_RUN_ORDER

__all__ = ["CreatePlan", "finish_create", "plan_create", "undurable"]

#: Run statuses by their stored value.
_RUN_STATUS: Final = {status.value: status for status in RunStatus}
#: Longest reply tail :func:`_run_constants` caches: a safe id, six 16-digit integers.
_CONSTANTS_MAX_CHARS: Final = MAX_ID_LENGTH + 6 * 17


@functools.lru_cache(maxsize=1024)
def _run_constants(text: str) -> tuple[str, int, int, int, int, int, int]:
    """The seven values a run never changes after it is opened, from CREATE_SCRIPT's reply tail.

    ``text`` is "run_id opened deadline ttl expires tool_call_budget byte_budget"
    (CREATE_RUN_ORDER[3:]). Decoded once per distinct text: the same text always
    decodes to the same values, and a corrupt one raises every time (errors are not
    cached).
    """
    parts = text.split(" ")
    if len(parts) != len(CREATE_RUN_ORDER) - 3:
        raise CorruptReplyError("UnexpectedReply")
    run_id, opened, deadline, ttl, expires, call_budget, byte_budget = parts
    return (
        run_id,
        decode_int(opened),
        decode_int(deadline),
        decode_int(ttl),
        decode_int(expires),
        decode_int(call_budget),
        decode_int(byte_budget),
    )


def _admission_run(text: str, run_id: str) -> RunState:
    """The run state a CREATE_SCRIPT reply carries (CREATE_RUN_ORDER, space-separated)."""
    parts = text.split(" ", 3)
    if len(parts) != 4:
        raise CorruptReplyError("UnexpectedReply")
    status_text, used, used_bytes, constants = parts
    # A genuine tail is a safe id and six integers below 2**53: never cache anything longer.
    decode = _run_constants if len(constants) <= _CONSTANTS_MAX_CHARS else _run_constants.__wrapped__
    stored_id, opened, deadline, ttl, expires, call_budget, byte_budget = decode(constants)
    if stored_id != run_id:
        raise CorruptReplyError("IdentityMismatch")
    status = _RUN_STATUS.get(status_text)
    if status is None:
        raise CorruptReplyError("CorruptRun")
    return RunState(
        run_id=run_id,
        status=status,
        opened_at_ms=opened,
        deadline_ms=deadline,
        ttl_ms=ttl,
        expires_at_ms=expires,
        tool_call_budget=call_budget,
        byte_budget=byte_budget,
        tool_calls_used=decode_int(used),
        bytes_used=decode_int(used_bytes),
    )


class CreatePlan(NamedTuple):
    """What ``create`` sends; ``request``/``limits`` re-run the kernel on the reply.

    ``command`` is everything after ``EVALSHA <sha>``: numkeys, KEYS, ARGV.
    ``request_bytes`` is the request's UTF-8 size, measured once when planned and
    carried into the kernel's ``admit`` (None: it has no UTF-8 form).
    """

    command: tuple[bytes | str, ...]
    request: AdmissionRequest
    limits: Limits
    request_bytes: int | None = None


_FOUR: Final = b"4"


def plan_create(
    prefix: str, request: AdmissionRequest, limits: Limits, now_ms: int | None, *, touch: bool = False
) -> CreatePlan | ErrorCode:
    """Build the CREATE_SCRIPT call for ``request``, or answer without Redis.

    ``now_ms`` is the store's given clock, or None: the script decides on the server's
    clock (TIME, CIS-STORE-10) and stamps the record with it. ``touch``: a waiting
    durability mode (a replay rewrites the record's token with itself, so that the
    wait covers the record, CIS-DUR-2). An unsafe run id has no run, so the kernel
    answers RUN_INACTIVE. The outcome of the kernel's Begin transition (id checks,
    whole-record limit) does not depend on the run: kernel ``check_begin`` decides it
    here, passed to the script as its last check. Raises ``ValueError`` for integers
    of 2**53 or more.
    """
    run_id, tool_call_id = request.run_id, request.tool_call_id
    keys = run_keys(prefix, run_id)
    if keys is None:
        return ErrorCode.RUN_INACTIVE
    if now_ms is None:
        now = ""
    else:
        if not -MAX_EXACT_INT <= now_ms < MAX_EXACT_INT:
            check_int(now_ms)
        now = str(now_ms)
    size = utf8_len(request.request_json)  # measured once: the script's budget check, then the kernel's
    refusal = check_begin(request, limits, request_bytes=size)
    if is_safe_id(tool_call_id):
        record_key: bytes | str = keys.record_wire(tool_call_id)
        raw_response_key: bytes | str = keys.raw_wire(tool_call_id)
        tcid = tool_call_id
    else:  # no record can exist: the script reads neither key
        record_key = raw_response_key = keys.run_wire
        tcid = ""
    flag = "1" if touch else ""
    if refusal is None and size is not None:
        # The new record's status (the kernel's Begin: PROJECTING); its times are the script's.
        header = f"{now} {size}  {tcid} {run_id} {InvocationStatus.PROJECTING} {flag}"
        texts: tuple[str, str, str] = (request.invocation_token, request.tool_name, request.request_json)
    else:
        late = refusal if refusal is not None else ""
        header = f"{now} {'' if size is None else size} {late} {tcid}   {flag}"
        token = request.invocation_token
        texts = (token if isinstance(token, str) else "", "", "")
    return CreatePlan(
        (_FOUR, keys.run_wire, record_key, keys.calls_wire, raw_response_key, header.encode(), *texts),
        request,
        limits,
        size,
    )


#: Kernel ``admit`` codes decided before the duplicate check (CIS-PRE-8): a script that
#: answers a duplicate code must have seen a run that passes them.
_BEFORE_DUPLICATE: Final = frozenset(
    {ErrorCode.RUN_INACTIVE, ErrorCode.RUN_MISMATCH, ErrorCode.RUN_DEADLINE_EXCEEDED}
)


def _decided_at(text: str) -> tuple[int, str]:
    """The script's time (the first word of ``text``) and the rest."""
    now_text, _, rest = text.partition(" ")
    return decode_int(now_text), rest


def _refused_create(plan: CreatePlan, rest: str, items: Reply) -> tuple[ErrorCode, int]:
    """CREATE_SCRIPT's refusal, re-decided by kernel ``admit`` on the run the script saw, at its time.

    ``rest`` is "<code> <now>" (no run) or "<code> <now> <10 run values,
    CREATE_RUN_ORDER>". A refusal after the duplicate check saw no live record, so
    the kernel runs with ``existing=None`` and must answer the same code; for a
    duplicate code (kernel ``duplicate_code``: the record itself is not sent back) the
    run must pass every check before the duplicate one. Raises
    :class:`CorruptReplyError` ("KernelDisagrees") otherwise, so that a refusal the
    kernel would have admitted is never reported (CIS-STORE-8).
    """
    if items:
        raise CorruptReplyError("UnexpectedReply")
    code_text, _, tail = rest.partition(" ")
    code = CODES.get(code_text)
    if code is None:
        raise CorruptReplyError("UnexpectedReply")
    now, run_text = _decided_at(tail)
    request = plan.request
    run = _admission_run(run_text, request.run_id) if run_text else None
    decided = admit(run, None, request, plan.limits, now, request_bytes=plan.request_bytes)
    if code in DUPLICATE_CODES:
        agrees = run is not None and decided not in _BEFORE_DUPLICATE
    else:
        agrees = decided is code
    if not agrees:
        raise CorruptReplyError("KernelDisagrees")
    return code, now


def finish_create(plan: CreatePlan, reply: object) -> tuple[Admission | ErrorCode, int]:
    """The kernel's ``admit`` answer given the run (and record) the script saw, and the script's time (ms).

    The kernel runs once, on the state the script reports, at the time it decided at.
    Raises :class:`CorruptReplyError` if the kernel, fed that state, would not have
    admitted what the script admitted.
    """
    tag, rest, items = split_reply(reply)
    request = plan.request
    if tag == "OK" and not items:
        now, run_text = _decided_at(rest)
        run = _admission_run(run_text, request.run_id)
        result = admit(run, None, request, plan.limits, now, request_bytes=plan.request_bytes)
        if not isinstance(result, Admission):
            raise CorruptReplyError("KernelDisagrees")
        return result, now
    if tag == "ERR":
        return _refused_create(plan, rest, items)
    if tag != "REPLAY" or not items:
        raise CorruptReplyError("UnexpectedReply")
    now, run_text = _decided_at(rest)
    run = _admission_run(run_text, request.run_id)
    record = decode_embedded(items[1:], request.run_id, request.tool_call_id)
    replayed = admit(run, record, request, plan.limits, now)
    if not isinstance(replayed, Admission) or not replayed.replayed:
        raise CorruptReplyError("KernelDisagrees")
    return replayed, now


def undurable(record: CanonicalRecord, now_ms: int, limits: Limits) -> CanonicalRecord | None:
    """The kernel's ERROR/DURABILITY_NOT_REACHED record for a create that missed the durability mode.

    ``record`` is the PROJECTING record the create wrote (CIS-DUR-2); None when the
    kernel refuses the transition (the record expired meanwhile).
    """
    result = transition(record, Failed(code=ErrorCode.DURABILITY_NOT_REACHED, now_ms=now_ms), limits)
    return result if isinstance(result, CanonicalRecord) else None
