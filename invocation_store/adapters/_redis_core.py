"""The I/O-free half of the Redis store, shared by the sync and async adapters.

For each store operation this module builds the script call (keys and arguments)
from kernel values and turns the script's reply back into kernel values, running
the kernel on the state the script saw. It does no I/O; ``redis.py`` sends what
it builds. Encoding of values: str as UTF-8, ints as decimal strings, ``None`` as
an absent hash field, the raw response in its own STRING key (see
``_redis_scripts.py`` for the layout).

Decoding is strict: an unknown or missing field, a non-decimal integer, an unknown
enum value, invalid UTF-8, or a record whose run id / tool_call_id differ from the
ones asked for (CIS-STORE-6) raise :class:`CorruptReplyError`, which the adapters
turn into :class:`~invocation_store.adapters.StoreUnavailableError`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any, Final, TypeAlias

from attrs import frozen

from ..kernel import (
    RUN_TRANSITIONS,
    Admission,
    AdmissionRequest,
    Begin,
    CanonicalRecord,
    ErrorCode,
    EvidenceStatus,
    InvocationStatus,
    Limits,
    RunState,
    RunStatus,
    admit,
    call_key,
    cancel_run,
    close_run,
    decide_complete,
    done_key,
    is_safe_id,
    open_run,
    run_key,
    run_usage_after,
    transition,
    utf8_len,
)
from ._redis_scripts import RUN_FIELDS

__all__ = [
    "MAX_EXACT_INT",
    "STAGE_ABOVE_BYTES",
    "STAGE_TTL_MS",
    "CompleteCall",
    "CompletePlan",
    "CorruptReplyError",
    "CreatePlan",
    "OpenPlan",
    "RunKeys",
    "calls_key",
    "check_prefix",
    "decode_ids",
    "decode_record",
    "decode_run",
    "decode_text",
    "finish_complete",
    "finish_create",
    "finish_end_run",
    "finish_open",
    "finish_ttl",
    "parse_version",
    "plan_complete",
    "plan_create",
    "plan_end_run",
    "plan_open",
    "raw_key",
    "run_keys",
]

#: Integers at or above this are refused: Lua numbers are IEEE doubles.
MAX_EXACT_INT: Final = 2**53

#: Minimum server version (CIS-STORE-7).
MIN_VERSION: Final = (6, 2)

Reply: TypeAlias = Sequence[object]

#: Fields of a record HASH (the raw response lives in its own STRING key).
_RECORD_FIELDS: Final = frozenset(
    {
        "run_id",
        "tool_call_id",
        "tool_name",
        "invocation_token",
        "sequence",
        "status",
        "evidence_status",
        "error_code",
        "request_json",
        "agent_result",
        "scope",
        "created_at_ms",
        "updated_at_ms",
        "expires_at_ms",
    }
)
#: Optional record fields, in the order of COMPLETE_SCRIPT's mask.
_OPTIONAL_FIELDS: Final = ("evidence_status", "error_code", "raw_response", "agent_result", "scope")
_RAW_INDEX: Final = 2
_REQUIRED_FIELDS: Final = _RECORD_FIELDS - frozenset(_OPTIONAL_FIELDS)

#: Raw responses above this many UTF-8 bytes are staged with a plain SET and renamed
#: into place by the script, rather than passed to it as an argument (copied into Lua).
STAGE_ABOVE_BYTES: Final = 16 * 1024
#: Stands for an empty value in a script's header argument (outside the safe-id alphabet).
_EMPTY: Final = "!"
#: Lifetime of a staging key left behind by a failed script (NOSCRIPT, a crash).
STAGE_TTL_MS: Final = 60_000

# A run state whose only use is to read the byte charge out of kernel run_usage_after.
_ZERO_RUN: Final = RunState(
    run_id="zero",
    status=RunStatus.ACTIVE,
    opened_at_ms=0,
    deadline_ms=0,
    ttl_ms=1,
    expires_at_ms=0,
    tool_call_budget=0,
    byte_budget=0,
)


class CorruptReplyError(ValueError):
    """Redis answered something that is not what the store wrote (CIS-STORE-6).

    ``cause`` is a fixed label (``CorruptRecord``, ``IdentityMismatch``, ...); the
    message never carries the reply.
    """

    def __init__(self, cause: str) -> None:
        super().__init__(cause)
        self.cause = cause


# -- keys ------------------------------------------------------------------------------


def check_prefix(prefix: str) -> str:
    """Return ``prefix`` if it can prefix keys (non-empty, no braces); else ``ValueError``."""
    run_key(prefix, "x")
    return prefix


def calls_key(prefix: str, run_id: str) -> str:
    """Key of a run's admission-ordered call list: ``<prefix>:{<run_id>}:calls`` (CIS-KEY-1).

    Raises ``ValueError`` for an unsafe run id or a prefix with braces.
    """
    run_key(prefix, run_id)  # validates both parts
    return f"{prefix}:{{{run_id}}}:calls"


def raw_key(prefix: str, run_id: str, tool_call_id: str) -> str:
    """Key of a record's raw response: ``<prefix>:{<run_id>}:raw:<tool_call_id>`` (CIS-KEY-1).

    Raises ``ValueError`` for unsafe ids or a prefix with braces.
    """
    call_key(prefix, run_id, tool_call_id)  # validates every part
    return f"{prefix}:{{{run_id}}}:raw:{tool_call_id}"


@frozen
class RunKeys:
    """Every key of one run (validated once, then cached): all share the ``{run_id}`` hash tag."""

    run: str
    done: str
    calls: str
    _base: str

    def record(self, tool_call_id: str) -> str:
        """The record HASH key (= kernel ``call_key``) of a tool_call_id already known to be safe."""
        return f"{self._base}:call:{tool_call_id}"

    def raw(self, tool_call_id: str) -> str:
        """The raw STRING key (= :func:`raw_key`) of a tool_call_id already known to be safe."""
        return f"{self._base}:raw:{tool_call_id}"

    def stage(self, nonce: str) -> str:
        """A staging key for one large raw response: ``<prefix>:{<run_id>}:stage:<nonce>``."""
        return f"{self._base}:stage:{nonce}"


@functools.lru_cache(maxsize=4096)
def run_keys(prefix: str, run_id: str) -> RunKeys:
    """The keys of run ``run_id`` under ``prefix``; ``ValueError`` for an unsafe id or prefix."""
    run = run_key(prefix, run_id)
    keys = RunKeys(run, done_key(prefix, run_id), calls_key(prefix, run_id), run[: -len(":run")])
    if keys.record("x") != call_key(prefix, run_id, "x"):  # pragma: no cover - layout guard
        raise AssertionError("key layout differs from the kernel's call_key")
    return keys


# -- decoding --------------------------------------------------------------------------


def decode_text(value: object) -> str:
    """A reply element as str: bytes are strict UTF-8, str passes, anything else is corrupt."""
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, str):
        return value
    raise CorruptReplyError("UnexpectedReply")


def _int(text: str) -> int:
    if not (text.isascii() and text.isdigit()):
        raise CorruptReplyError("CorruptInteger")
    return int(text)


def _pairs(flat: Sequence[object]) -> dict[str, str]:
    if len(flat) % 2:
        raise CorruptReplyError("UnexpectedReply")
    return {decode_text(flat[i]): decode_text(flat[i + 1]) for i in range(0, len(flat), 2)}


def _mapping(raw: Mapping[Any, object] | Sequence[object]) -> dict[str, str]:
    if isinstance(raw, Mapping):
        return {decode_text(k): decode_text(v) for k, v in raw.items()}
    return _pairs(raw)


def decode_record(
    raw: Mapping[Any, object] | Sequence[object], raw_response: object, run_id: str, tool_call_id: str
) -> CanonicalRecord | None:
    """Decode a record HASH (HGETALL mapping or flat pairs) and its raw STRING; ``None`` if absent.

    ``raw_response`` is the raw STRING's value (``None`` when absent or not read).
    Raises :class:`CorruptReplyError` for unknown/missing fields or bad values, and
    ``IdentityMismatch`` when the record is not the one asked for (CIS-STORE-6).
    Expiry is not judged here (see :func:`~invocation_store.kernel.phase_of`).
    """
    fields = _mapping(raw)
    if not fields:
        return None
    names = fields.keys()
    if not (names <= _RECORD_FIELDS and names >= _REQUIRED_FIELDS):
        raise CorruptReplyError("CorruptRecord")
    if fields["run_id"] != run_id or fields["tool_call_id"] != tool_call_id:
        raise CorruptReplyError("IdentityMismatch")
    get = fields.get
    evidence = get("evidence_status")
    error_code = get("error_code")
    return CanonicalRecord(
        run_id=run_id,
        tool_call_id=tool_call_id,
        tool_name=fields["tool_name"],
        invocation_token=fields["invocation_token"],
        sequence=_int(fields["sequence"]),
        status=InvocationStatus(fields["status"]),
        evidence_status=None if evidence is None else EvidenceStatus(evidence),
        error_code=None if error_code is None else ErrorCode(error_code),
        request_json=fields["request_json"],
        raw_response=None if raw_response is None else decode_text(raw_response),
        agent_result=get("agent_result"),
        scope=get("scope"),
        created_at_ms=_int(fields["created_at_ms"]),
        updated_at_ms=_int(fields["updated_at_ms"]),
        expires_at_ms=_int(fields["expires_at_ms"]),
    )


def _decode_embedded(items: Sequence[object], run_id: str, tool_call_id: str) -> CanonicalRecord | None:
    """A script's ``<"1"|"0">, <raw>, <field/value pairs...>`` as a record."""
    if len(items) < 2:
        raise CorruptReplyError("UnexpectedReply")
    raw = items[1] if decode_text(items[0]) == "1" else None
    return decode_record(items[2:], raw, run_id, tool_call_id)


def decode_run(values: Sequence[object], run_id: str) -> RunState | None:
    """Decode run values in RUN_FIELDS order (HMGET or a script reply); ``None`` if absent.

    Raises :class:`CorruptReplyError` for a partial or foreign run (CIS-STORE-6).
    """
    if len(values) != len(RUN_FIELDS):
        raise CorruptReplyError("UnexpectedReply")
    missing = sum(value is None for value in values)
    if missing:
        if missing == len(values):
            return None
        raise CorruptReplyError("CorruptRun")
    text = [value if type(value) is str else decode_text(value) for value in values]
    if text[0] != run_id:
        raise CorruptReplyError("IdentityMismatch")
    return RunState(
        run_id=run_id,
        status=RunStatus(text[1]),
        opened_at_ms=_int(text[2]),
        deadline_ms=_int(text[3]),
        ttl_ms=_int(text[4]),
        expires_at_ms=_int(text[5]),
        tool_call_budget=_int(text[6]),
        byte_budget=_int(text[7]),
        tool_calls_used=_int(text[8]),
        bytes_used=_int(text[9]),
    )


def decode_ids(values: Sequence[object]) -> tuple[str, ...]:
    """Decode a LIST of tool_call_ids; each must be a safe id (CIS-STORE-6)."""
    ids = tuple(decode_text(value) for value in values)
    if not all(is_safe_id(tcid) for tcid in ids):
        raise CorruptReplyError("CorruptList")
    return ids


def parse_version(info: Mapping[str, object]) -> tuple[int, ...]:
    """``redis_version`` of an ``INFO server`` reply as an int tuple; ``CorruptReplyError`` if absent."""
    version = info.get("redis_version")
    if isinstance(version, bytes):
        version = version.decode("ascii", "replace")
    if isinstance(version, int | float):
        version = str(version)
    if not isinstance(version, str):
        raise CorruptReplyError("NoVersion")
    parts: list[int] = []
    for part in version.split(".")[:3]:
        digits = "".join(ch for ch in part if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def _tag(reply: object) -> tuple[str, Reply]:
    """Split a script reply: a one-string reply is space-separated, else an array."""
    if isinstance(reply, bytes | str):
        items = decode_text(reply).split(" ")
        return items[0], items
    if not isinstance(reply, list | tuple) or not reply:
        raise CorruptReplyError("UnexpectedReply")
    return decode_text(reply[0]), reply


def _code(reply: Reply) -> ErrorCode:
    if len(reply) != 2:
        raise CorruptReplyError("UnexpectedReply")
    return ErrorCode(decode_text(reply[1]))


def _check_int(*values: int) -> None:
    for value in values:
        if value >= MAX_EXACT_INT or value < -MAX_EXACT_INT:
            raise ValueError("the Redis store keeps integers exactly only below 2**53")


# -- runs ------------------------------------------------------------------------------


@frozen(kw_only=True)
class OpenPlan:
    """What ``open_run`` sends: keys, args, and the fresh run it would store."""

    keys: tuple[str, str, str]
    args: tuple[str, ...]
    fresh: RunState


def plan_open(
    prefix: str,
    run_id: str,
    now_ms: int,
    *,
    deadline_ms: int,
    ttl_ms: int,
    tool_call_budget: int,
    byte_budget: int,
) -> OpenPlan | ErrorCode:
    """Kernel ``open_run`` for an absent run; its code, or the script call that stores it.

    Raises ``ValueError`` as the kernel does (negative budgets, non-positive TTL) and
    for integers of 2**53 or more.
    """
    _check_int(now_ms, deadline_ms, ttl_ms, tool_call_budget, byte_budget, deadline_ms + ttl_ms)
    fresh = open_run(
        None,
        run_id=run_id,
        now_ms=now_ms,
        deadline_ms=deadline_ms,
        ttl_ms=ttl_ms,
        tool_call_budget=tool_call_budget,
        byte_budget=byte_budget,
    )
    if isinstance(fresh, ErrorCode):
        return fresh
    values = (
        fresh.run_id,
        fresh.status.value,
        str(fresh.opened_at_ms),
        str(fresh.deadline_ms),
        str(fresh.ttl_ms),
        str(fresh.expires_at_ms),
        str(fresh.tool_call_budget),
        str(fresh.byte_budget),
        str(fresh.tool_calls_used),
        str(fresh.bytes_used),
    )
    return OpenPlan(
        keys=(run_key(prefix, run_id), done_key(prefix, run_id), calls_key(prefix, run_id)),
        args=(str(now_ms), str(fresh.expires_at_ms - now_ms), *values),
        fresh=fresh,
    )


def finish_open(plan: OpenPlan, reply: object, now_ms: int) -> RunState | ErrorCode:
    """The kernel's ``open_run`` answer given what the script saw."""
    tag, items = _tag(reply)
    if tag == "FRESH":
        return plan.fresh
    if tag == "ERR":
        return _code(items)
    if tag != "EXISTING":
        raise CorruptReplyError("UnexpectedReply")
    fresh = plan.fresh
    existing = decode_run(items[1:], fresh.run_id)
    result = open_run(
        existing,
        run_id=fresh.run_id,
        now_ms=now_ms,
        deadline_ms=fresh.deadline_ms,
        ttl_ms=fresh.ttl_ms,
        tool_call_budget=fresh.tool_call_budget,
        byte_budget=fresh.byte_budget,
    )
    if result != existing:
        raise CorruptReplyError("KernelDisagrees")
    return result


def plan_end_run(prefix: str, run_id: str, cancel: bool) -> tuple[str, str] | None:
    """Key and target status of a cancel/close; ``None`` for an unsafe run id (no run)."""
    if not is_safe_id(run_id):
        return None
    target = RUN_TRANSITIONS[(RunStatus.ACTIVE, "cancel" if cancel else "close")]
    return run_key(prefix, run_id), target.value


def finish_end_run(run_id: str, cancel: bool, reply: object, now_ms: int) -> RunState | ErrorCode:
    """The kernel's ``cancel_run``/``close_run`` answer given the run the script saw."""
    tag, items = _tag(reply)
    if tag == "ERR":
        return _code(items)
    if tag != "OK":
        raise CorruptReplyError("UnexpectedReply")
    before = decode_run(items[1:], run_id)
    result = cancel_run(before, now_ms) if cancel else close_run(before, now_ms)
    if not isinstance(result, RunState):
        raise CorruptReplyError("KernelDisagrees")
    return result


# -- create ----------------------------------------------------------------------------


@frozen(kw_only=True)
class CreatePlan:
    """What ``create`` sends; ``request``/``limits`` re-run the kernel on the reply."""

    keys: tuple[str, str, str, str]
    args: tuple[str, ...]
    request: AdmissionRequest
    limits: Limits


def plan_create(prefix: str, request: AdmissionRequest, limits: Limits) -> CreatePlan | ErrorCode:
    """Build the CREATE_SCRIPT call for ``request``, or answer without Redis.

    An unsafe run id has no run, so the kernel answers RUN_INACTIVE. The outcome of
    the kernel's Begin transition (id checks, whole-record limit) does not depend on
    the run and is decided here, passed to the script as the last check.
    Raises ``ValueError`` for integers of 2**53 or more.
    """
    run_id, tool_call_id, now = request.run_id, request.tool_call_id, request.now_ms
    if not is_safe_id(run_id):
        return ErrorCode.RUN_INACTIVE
    _check_int(now)
    size = utf8_len(request.request_json)
    probe = transition(
        None,
        Begin(
            run_id=run_id,
            tool_call_id=tool_call_id,
            tool_name=request.tool_name,
            request_json=request.request_json,
            invocation_token=request.invocation_token,
            sequence=1,
            ttl_ms=1,
            now_ms=now,
        ),
        limits,
    )
    has_key = is_safe_id(tool_call_id)
    keys = run_keys(prefix, run_id)
    # Without a safe tool_call_id no record can exist: the script reads neither key.
    record_key = keys.record(tool_call_id) if has_key else keys.run
    raw_response_key = keys.raw(tool_call_id) if has_key else keys.run
    header = [
        str(now),
        _EMPTY if size is None else str(size),
        probe.value if isinstance(probe, ErrorCode) else _EMPTY,
        tool_call_id if has_key else _EMPTY,
    ]
    if isinstance(probe, CanonicalRecord) and size is not None:
        header += (run_id, probe.status.value, str(probe.created_at_ms), str(probe.updated_at_ms))
        texts = (probe.invocation_token, probe.tool_name, probe.request_json)
    else:
        token = request.invocation_token
        texts = (token if isinstance(token, str) else "", "", "")
    return CreatePlan(
        keys=(keys.run, record_key, keys.calls, raw_response_key),
        args=(" ".join(header), *texts),
        request=request,
        limits=limits,
    )


def finish_create(plan: CreatePlan, reply: object) -> Admission | ErrorCode:
    """The kernel's ``admit`` answer given the run (and record) the script saw.

    Raises :class:`CorruptReplyError` if the kernel, fed the same state, would not
    have admitted what the script admitted.
    """
    tag, items = _tag(reply)
    if tag == "ERR":
        return _code(items)
    request = plan.request
    run = decode_run(items[1:11], request.run_id)
    if tag == "OK":
        result = admit(run, None, request, plan.limits)
        if not isinstance(result, Admission):
            raise CorruptReplyError("KernelDisagrees")
        return result
    if tag != "REPLAY":
        raise CorruptReplyError("UnexpectedReply")
    record = _decode_embedded(items[11:], request.run_id, request.tool_call_id)
    result = admit(run, record, request, plan.limits)
    if not isinstance(result, Admission) or not result.replayed:
        raise CorruptReplyError("KernelDisagrees")
    return result


# -- complete --------------------------------------------------------------------------


@frozen(kw_only=True)
class CompleteCall:
    """One COMPLETE_SCRIPT call; ``staged`` is SET at ``keys[4]`` in the same round trip first."""

    keys: tuple[str, str, str, str, str]
    args: tuple[str, ...]
    staged: str | None


@frozen(kw_only=True)
class CompletePlan:
    """What ``complete`` sends; ``resend`` carries the raw response in full if asked."""

    call: CompleteCall
    resend: CompleteCall
    before: CanonicalRecord
    after: CanonicalRecord


def plan_complete(
    prefix: str, before: CanonicalRecord, after: CanonicalRecord, now_ms: int, nonce: str
) -> CompletePlan | ErrorCode:
    """Build the COMPLETE_SCRIPT call for ``before`` -> ``after``.

    Raises ``ValueError`` (from the kernel) when ``after`` changes a field no
    transition changes. Ids that are not safe have no record: INVALID_TRANSITION.
    Every mutable field of ``after`` is written (a None field is deleted), so the
    stored record becomes exactly ``after``; only a raw response that ``before``
    already held stays on the server, where the script checks its size (``RESEND``
    asks for it in full when it differs). A raw response above
    :data:`STAGE_ABOVE_BYTES` goes through the staging key ``stage_key(..., nonce)``.
    """
    decide_complete(None, before, after, now_ms)  # the kernel's programming-error checks
    run_id, tool_call_id = before.run_id, before.tool_call_id
    if not (is_safe_id(run_id) and is_safe_id(tool_call_id)):
        return ErrorCode.INVALID_TRANSITION
    _check_int(now_ms, after.updated_at_ms)
    charge = run_usage_after(_ZERO_RUN, before, after).bytes_used
    keys = run_keys(prefix, run_id)
    raw = after.raw_response
    size = None if raw is None else utf8_len(raw)
    if raw is None:
        raw_op, raw_text, staged = "D", "", None
    elif size is not None and size > STAGE_ABOVE_BYTES:
        raw_op, raw_text, staged = "T", "", raw
    else:
        raw_op, raw_text, staged = "S", raw, None
    optional = (after.evidence_status, after.error_code, raw, after.agent_result, after.scope)
    letters = ["D" if value is None else "S" for value in optional]
    letters[_RAW_INDEX] = raw_op
    head = (
        str(now_ms),
        after.status.value,
        _EMPTY if after.error_code is None else after.error_code.value,
        str(after.updated_at_ms),
        str(charge),
        tool_call_id if after.terminal else _EMPTY,
    )
    tail = _EMPTY if after.evidence_status is None else after.evidence_status.value
    texts = (after.agent_result or "", after.scope or "")
    call_keys = (
        keys.record(tool_call_id),
        keys.run,
        keys.done,
        keys.raw(tool_call_id),
        keys.stage(nonce),
    )
    token = before.invocation_token
    full = CompleteCall(
        keys=call_keys,
        args=(" ".join((*head, _EMPTY, "".join(letters), tail)), token, raw_text, *texts),
        staged=staged,
    )
    if raw is not None and size is not None and (raw is before.raw_response or raw == before.raw_response):
        # Unchanged raw response: keep it on the server, check its size there.
        letters[_RAW_INDEX] = "K"
        kept = CompleteCall(
            keys=call_keys,
            args=(" ".join((*head, str(size), "".join(letters), tail)), token, "", *texts),
            staged=None,
        )
        return CompletePlan(call=kept, resend=full, before=before, after=after)
    return CompletePlan(call=full, resend=full, before=before, after=after)


def finish_complete(plan: CompletePlan, reply: object) -> CanonicalRecord | ErrorCode | None:
    """``after`` on WRITE, the stored record on REPLAY, a code, or ``None`` for RESEND."""
    tag, items = _tag(reply)
    if tag == "WRITE":
        return plan.after
    if tag == "ERR":
        return _code(items)
    if tag == "RESEND":
        return None
    if tag != "REPLAY":
        raise CorruptReplyError("UnexpectedReply")
    before = plan.before
    stored = _decode_embedded(items[1:], before.run_id, before.tool_call_id)
    if stored is None:
        raise CorruptReplyError("UnexpectedReply")
    return stored


# -- reads -----------------------------------------------------------------------------


def finish_ttl(
    fields: Sequence[object], pttl: object, run_id: str, tool_call_id: str, now_ms: int
) -> int | None:
    """Remaining TTL in ms: the smaller of Redis PTTL and the store clock's view.

    ``fields`` is HMGET run_id, tool_call_id, expires_at_ms. ``None`` if absent or
    expired. A record without a Redis TTL is corrupt (it would never expire).
    """
    if len(fields) != 3 or not isinstance(pttl, int):
        raise CorruptReplyError("UnexpectedReply")
    if all(value is None for value in fields):
        return None
    if any(value is None for value in fields) or pttl == -1:
        raise CorruptReplyError("CorruptRecord")
    if decode_text(fields[0]) != run_id or decode_text(fields[1]) != tool_call_id:
        raise CorruptReplyError("IdentityMismatch")
    if pttl < 0:
        return None
    remaining = min(pttl, _int(decode_text(fields[2])) - now_ms)
    return remaining if remaining > 0 else None
