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

Hot path (create, complete): each costs one script call and, on this side, as little
as measured to matter (see ``benchmarks/bench_redis.py``): keys are validated and
UTF-8 encoded once per run (:func:`run_keys`, cached); ids, decimals and codes travel
in one pre-encoded header argument; the kernel decides once on the state the script
reports (``admit`` on the run it read; a WRITE returns the kernel-built ``after``
the caller passed, nothing is decoded); the seven run values that never change after
the run is opened are decoded once per run (:func:`_run_constants`, cached by their
exact text). The other kernel calls happen before a script is sent:
:func:`~invocation_store.kernel.check_begin` (the run-independent outcome of Begin,
which the script must know before writing: it is the script's last check),
:func:`~invocation_store.kernel.check_completion` and
:func:`~invocation_store.kernel.completion_charge` (the bytes the script charges).

Size: every script call's wire format, the plan (encoding) and finish (decoding and
the kernel's re-check of the reply) of each operation side by side, and the strict
decoders they share; splitting a plan from its finish would split one contract.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, NamedTuple, TypeAlias

from attrs import frozen

from ..kernel import (
    DUPLICATE_CODES,
    MAX_ID_LENGTH,
    PROGRESS_FIELDS,
    RUN_TRANSITIONS,
    Admission,
    AdmissionRequest,
    CanonicalRecord,
    ErrorCode,
    EvidenceStatus,
    Failed,
    InvocationStatus,
    Limits,
    ProgressView,
    RunOp,
    RunState,
    RunStatus,
    admit,
    cancel_run,
    check_begin,
    check_completion,
    close_run,
    completion_charge,
    decide_completion,
    is_safe_id,
    is_well_formed,
    is_well_formed_outcome,
    lifetime_is_intact,
    open_run,
    remaining_ms,
    transition,
    utf8_len,
)
from ._redis_keys import call_key, calls_key, check_prefix, done_key, raw_key, run_key
from ._redis_scripts import CREATE_RUN_ORDER, RUN_FIELDS

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
    "check_lifetime",
    "check_prefix",
    "decode_ids",
    "decode_progress",
    "decode_progress_reply",
    "decode_record",
    "decode_run",
    "decode_text",
    "finish_complete",
    "finish_create",
    "finish_end_run",
    "finish_open",
    "finish_ttl",
    "is_late",
    "parse_version",
    "plan_complete",
    "plan_create",
    "plan_end_run",
    "plan_open",
    "raw_key",
    "refuse_corrupt",
    "run_keys",
    "undurable",
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
#: Lifetime of a staging key left behind by a failed script (NOSCRIPT, a crash).
STAGE_TTL_MS: Final = 60_000


class CorruptReplyError(ValueError):
    """Redis answered something that is not what the store wrote (CIS-STORE-6).

    ``cause`` is a fixed label (``CorruptRecord``, ``IdentityMismatch``, ...); the
    message never carries the reply.
    """

    def __init__(self, cause: str) -> None:
        super().__init__(cause)
        self.cause = cause


# -- keys ------------------------------------------------------------------------------


def _wire(text: str) -> bytes | str:
    """``text`` as UTF-8 bytes, sent as is by redis-py (no per-call encoding).

    A text without a UTF-8 form (a prefix holding a lone surrogate) stays a str, so
    that redis-py refuses it inside the store's call, as for any other argument.
    """
    try:
        return text.encode()
    except UnicodeEncodeError:
        return text


class RunKeys:
    """Every key of one run (validated once, then cached): all share the ``{run_id}`` hash tag.

    ``run``/``done``/``calls`` are the str keys; ``run_wire``/``calls_wire``/``done_wire``
    the same keys as the bytes that script calls send (see :func:`_wire`).
    """

    __slots__ = (
        "_base",
        "_call_wire",
        "_raw_wire",
        "calls",
        "calls_wire",
        "done",
        "done_wire",
        "run",
        "run_wire",
    )

    def __init__(self, prefix: str, run_id: str) -> None:
        base = f"{prefix}:{{{run_id}}}"
        self._base = base
        self.run = run_key(prefix, run_id)
        self.done = done_key(prefix, run_id)
        self.calls = f"{base}:calls"
        self.run_wire = _wire(self.run)
        self.done_wire = _wire(self.done)
        self.calls_wire = _wire(self.calls)
        self._call_wire = _wire(f"{base}:call:")
        self._raw_wire = _wire(f"{base}:raw:")

    def record(self, tool_call_id: str) -> str:
        """The record HASH key (= :func:`call_key`) of a tool_call_id already known to be safe."""
        return f"{self._base}:call:{tool_call_id}"

    def raw(self, tool_call_id: str) -> str:
        """The raw STRING key (= :func:`raw_key`) of a tool_call_id already known to be safe."""
        return f"{self._base}:raw:{tool_call_id}"

    def record_wire(self, tool_call_id: str) -> bytes | str:
        """:meth:`record` as sent (bytes); ``tool_call_id`` is a safe id, hence ASCII."""
        head = self._call_wire
        return head + tool_call_id.encode() if isinstance(head, bytes) else head + tool_call_id

    def raw_wire(self, tool_call_id: str) -> bytes | str:
        """:meth:`raw` as sent (bytes); ``tool_call_id`` is a safe id, hence ASCII."""
        head = self._raw_wire
        return head + tool_call_id.encode() if isinstance(head, bytes) else head + tool_call_id

    def stage(self, nonce: str) -> str:
        """A staging key for one large raw response: ``<prefix>:{<run_id>}:stage:<nonce>``."""
        return f"{self._base}:stage:{nonce}"


@functools.lru_cache(maxsize=4096)
def _cached_run_keys(prefix: str, run_id: str) -> RunKeys | None:
    if not is_safe_id(run_id):
        return None
    keys = RunKeys(prefix, run_id)  # run_key() validates the prefix
    if keys.record("x") != call_key(prefix, run_id, "x"):  # pragma: no cover - layout guard
        raise AssertionError("key layout differs from call_key")
    return keys


def run_keys(prefix: str, run_id: str) -> RunKeys | None:
    """The keys of run ``run_id`` under ``prefix`` (cached); ``None`` if ``run_id`` is not a safe id.

    Raises ``ValueError`` for a prefix that cannot start keys (empty, braces).
    """
    if not isinstance(run_id, str) or len(run_id) > MAX_ID_LENGTH:  # never cache long junk
        return None
    return _cached_run_keys(prefix, run_id)


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
    record = CanonicalRecord(
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
    if not is_well_formed(record):  # no transition produces it: tampered or corrupt
        raise CorruptReplyError("CorruptRecord")
    return record


def _decode_embedded(items: Sequence[object], run_id: str, tool_call_id: str) -> CanonicalRecord | None:
    """A script's ``<"1"|"0">, <raw>, <field/value pairs...>`` as a record."""
    if len(items) < 2:
        raise CorruptReplyError("UnexpectedReply")
    raw = items[1] if decode_text(items[0]) == "1" else None
    return decode_record(items[2:], raw, run_id, tool_call_id)


_STATUSES: Final = {status.value.encode(): status for status in InvocationStatus}
_EVIDENCE: Final = {evidence.value.encode(): evidence for evidence in EvidenceStatus}
_PROGRESS_WIDTH: Final = len(PROGRESS_FIELDS)


def _as_bytes(value: object) -> bytes | None:
    """A reply element as bytes (``decode_responses=True`` clients answer str)."""
    if value is None or type(value) is bytes:
        return value
    if type(value) is str:
        return value.encode()
    raise CorruptReplyError("UnexpectedReply")


def decode_progress(values: Sequence[object], run_id: str, tool_call_id: str) -> ProgressView | None:
    """Decode one record's :data:`~invocation_store.kernel.PROGRESS_FIELDS` values; ``None`` if absent.

    ``run_id`` and ``tool_call_id`` are the (safe) ids asked for. Raises
    :class:`CorruptReplyError` for a partial record or bad values, and
    ``IdentityMismatch`` when the record is not the one asked for (CIS-STORE-6,
    CIS-PERF-3). Expiry is not judged here.
    """
    if len(values) != _PROGRESS_WIDTH:
        raise CorruptReplyError("UnexpectedReply")
    return _decode_progress(
        [_as_bytes(value) for value in values], run_id.encode(), run_id, tool_call_id.encode(), tool_call_id
    )


def _decode_progress(
    values: Sequence[bytes | None], run_wire: bytes, run_id: str, tcid_wire: bytes, tool_call_id: str
) -> ProgressView | None:
    # The hot loop of a progress read: ids are compared and enums and integers
    # decoded as bytes; only the three free-text fields are decoded to str.
    run, tcid, name, sequence, status, evidence, result, scope, expires = values
    if run is None and all(value is None for value in values):
        return None
    if run != run_wire or tcid != tcid_wire:
        if run is None or tcid is None:
            raise CorruptReplyError("CorruptRecord")
        raise CorruptReplyError("IdentityMismatch")
    if name is None or sequence is None or expires is None or not (sequence.isdigit() and expires.isdigit()):
        raise CorruptReplyError("CorruptRecord")
    status_value = _STATUSES.get(status)  # type: ignore[arg-type]
    evidence_value = None if evidence is None else _EVIDENCE.get(evidence)
    if status_value is None or (evidence is not None and evidence_value is None):
        raise CorruptReplyError("CorruptRecord")
    view = ProgressView(
        run_id,
        tool_call_id,
        name.decode(),
        int(sequence),
        status_value,
        evidence_value,
        None if result is None else result.decode(),
        None if scope is None else scope.decode(),
        int(expires),
    )
    if not is_well_formed_outcome(view):  # the ids are the safe ones asked for
        raise CorruptReplyError("CorruptRecord")
    return view


def decode_progress_reply(
    reply: object, run_id: str, tool_call_ids: Sequence[str]
) -> list[ProgressView | None]:
    """Decode a PROGRESS_SCRIPT reply for the safe ``tool_call_ids`` (in the order sent) of run ``run_id``.

    One view (or None, absent) per id; raises :class:`CorruptReplyError` as
    :func:`decode_progress` does, or for a reply of the wrong shape.
    """
    width = _PROGRESS_WIDTH
    if not isinstance(reply, list) or len(reply) != width * len(tool_call_ids):
        raise CorruptReplyError("UnexpectedReply")
    if not all(value is None or type(value) is bytes for value in reply):
        reply = [_as_bytes(value) for value in reply]
    run_wire = run_id.encode()
    return [
        _decode_progress(reply[index * width : index * width + width], run_wire, run_id, tcid.encode(), tcid)
        for index, tcid in enumerate(tool_call_ids)
    ]


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
        args=(str(now_ms), str(remaining_ms(fresh, now_ms) or 0), *values),
        fresh=fresh,
    )


def finish_open(plan: OpenPlan, reply: object, now_ms: int) -> RunState | ErrorCode:
    """The kernel's ``open_run`` answer given what the script saw."""
    tag, items = _tag(reply)
    if tag == "FRESH":
        return plan.fresh
    if tag == "ERR":
        return _refused_open(plan, items, now_ms)
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


def _refusal(items: Reply) -> ErrorCode:
    """The code of an ``ERR <code> ...`` reply split on spaces; a foreign code is corrupt."""
    if len(items) < 2:
        raise CorruptReplyError("UnexpectedReply")
    code = _CODES.get(decode_text(items[1]))
    if code is None:
        raise CorruptReplyError("UnexpectedReply")
    return code


def _refused_open(plan: OpenPlan, items: Reply, now_ms: int) -> ErrorCode:
    """OPEN_RUN_SCRIPT's refusal, re-decided by kernel ``open_run`` on the run the script saw.

    Raises :class:`CorruptReplyError` ("KernelDisagrees") when the kernel, fed that
    run, would not refuse with the same code (CIS-STORE-8).
    """
    code = _refusal(items)
    fresh = plan.fresh
    existing = decode_run(items[2:], fresh.run_id)
    decided = open_run(
        existing,
        run_id=fresh.run_id,
        now_ms=now_ms,
        deadline_ms=fresh.deadline_ms,
        ttl_ms=fresh.ttl_ms,
        tool_call_budget=fresh.tool_call_budget,
        byte_budget=fresh.byte_budget,
    )
    if decided is not code:
        raise CorruptReplyError("KernelDisagrees")
    return code


def plan_end_run(prefix: str, run_id: str, cancel: bool) -> tuple[str, str] | None:
    """Key and target status of a cancel/close; ``None`` for an unsafe run id (no run)."""
    if not is_safe_id(run_id):
        return None
    target = RUN_TRANSITIONS[(RunStatus.ACTIVE, RunOp.CANCEL if cancel else RunOp.CLOSE)]
    return run_key(prefix, run_id), target.value


def finish_end_run(run_id: str, cancel: bool, reply: object, now_ms: int) -> RunState | ErrorCode:
    """The kernel's ``cancel_run``/``close_run`` answer given the run the script saw."""
    tag, items = _tag(reply)
    if tag == "ERR":
        # The refusal is re-decided by the kernel on the run the script saw (none: absent).
        code = _refusal(items)
        seen = decode_run(items[2:], run_id) if len(items) > 2 else None
        decided = cancel_run(seen, now_ms) if cancel else close_run(seen, now_ms)
        if decided is not code:
            raise CorruptReplyError("KernelDisagrees")
        return code
    if tag != "OK":
        raise CorruptReplyError("UnexpectedReply")
    before = decode_run(items[1:], run_id)
    result = cancel_run(before, now_ms) if cancel else close_run(before, now_ms)
    if not isinstance(result, RunState):
        raise CorruptReplyError("KernelDisagrees")
    return result


# -- create ----------------------------------------------------------------------------

#: Error codes by their wire spelling (a script reply naming another is corrupt).
_CODES: Final = {code.value: code for code in ErrorCode}
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
        _int(opened),
        _int(deadline),
        _int(ttl),
        _int(expires),
        _int(call_budget),
        _int(byte_budget),
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
        tool_calls_used=_int(used),
        bytes_used=_int(used_bytes),
    )


class CreatePlan(NamedTuple):
    """What ``create`` sends; ``request``/``limits`` re-run the kernel on the reply.

    ``command`` is everything after ``EVALSHA <sha>``: numkeys, KEYS, ARGV;
    ``now_ms`` the store-clock time the script decides at (CIS-STORE-10).
    """

    command: tuple[bytes | str, ...]
    request: AdmissionRequest
    limits: Limits
    now_ms: int


_FOUR: Final = b"4"
#: COMPLETE_SCRIPT's reply to a write, as bytes and as str (``decode_responses=True``).
_WRITE: Final = (b"WRITE", "WRITE")
_FIVE: Final = b"5"


def plan_create(
    prefix: str, request: AdmissionRequest, limits: Limits, now_ms: int
) -> CreatePlan | ErrorCode:
    """Build the CREATE_SCRIPT call for ``request`` at store time ``now_ms``, or answer without Redis.

    An unsafe run id has no run, so the kernel answers RUN_INACTIVE. The outcome of
    the kernel's Begin transition (id checks, whole-record limit) does not depend on
    the run: kernel ``check_begin`` decides it here, passed to the script as its last
    check.
    Raises ``ValueError`` for integers of 2**53 or more.
    """
    run_id, tool_call_id, now = request.run_id, request.tool_call_id, now_ms
    keys = run_keys(prefix, run_id)
    if keys is None:
        return ErrorCode.RUN_INACTIVE
    if not -MAX_EXACT_INT <= now < MAX_EXACT_INT:
        _check_int(now)
    size = utf8_len(request.request_json)
    refusal = check_begin(request, limits)
    if is_safe_id(tool_call_id):
        record_key: bytes | str = keys.record_wire(tool_call_id)
        raw_response_key: bytes | str = keys.raw_wire(tool_call_id)
        tcid = tool_call_id
    else:  # no record can exist: the script reads neither key
        record_key = raw_response_key = keys.run_wire
        tcid = ""
    if refusal is None and size is not None:
        # The new record's status and times (the kernel's Begin: PROJECTING, created = updated = now).
        header = f"{now} {size}  {tcid} {run_id} {InvocationStatus.PROJECTING} {now} {now}"
        texts: tuple[str, str, str] = (request.invocation_token, request.tool_name, request.request_json)
    else:
        late = refusal if refusal is not None else ""
        header = f"{now} {'' if size is None else size} {late} {tcid}    "
        token = request.invocation_token
        texts = (token if isinstance(token, str) else "", "", "")
    return CreatePlan(
        (_FOUR, keys.run_wire, record_key, keys.calls_wire, raw_response_key, header.encode(), *texts),
        request,
        limits,
        now,
    )


def _split_reply(reply: object) -> tuple[str, str, Reply]:
    """A script reply as (tag, rest of its first string, the whole array or ``()``)."""
    if isinstance(reply, bytes):
        text = reply.decode()
        items: Reply = ()
    elif isinstance(reply, str):
        text, items = reply, ()
    elif isinstance(reply, list) and reply:
        text, items = decode_text(reply[0]), reply
    else:
        raise CorruptReplyError("UnexpectedReply")
    tag, _, rest = text.partition(" ")
    return tag, rest, items


#: Kernel ``admit`` codes decided before the duplicate check (CIS-PRE-8): a script that
#: answers a duplicate code must have seen a run that passes them.
_BEFORE_DUPLICATE: Final = frozenset(
    {ErrorCode.RUN_INACTIVE, ErrorCode.RUN_MISMATCH, ErrorCode.RUN_DEADLINE_EXCEEDED}
)


def _refused_create(plan: CreatePlan, rest: str, items: Reply) -> ErrorCode:
    """CREATE_SCRIPT's refusal, re-decided by kernel ``admit`` on the run the script saw.

    ``rest`` is "<code>" (no run) or "<code> <10 run values, CREATE_RUN_ORDER>". A
    refusal after the duplicate check saw no live record, so the kernel runs with
    ``existing=None`` and must answer the same code; for a duplicate code (kernel
    ``duplicate_code``: the record itself is not sent back) the run must pass every
    check before the duplicate one. Raises :class:`CorruptReplyError` ("KernelDisagrees") otherwise, so
    that a refusal the kernel would have admitted is never reported (CIS-STORE-8).
    """
    if items:
        raise CorruptReplyError("UnexpectedReply")
    code_text, _, run_text = rest.partition(" ")
    code = _CODES.get(code_text)
    if code is None:
        raise CorruptReplyError("UnexpectedReply")
    request = plan.request
    run = _admission_run(run_text, request.run_id) if run_text else None
    decided = admit(run, None, request, plan.limits, plan.now_ms)
    if code in DUPLICATE_CODES:
        agrees = run is not None and decided not in _BEFORE_DUPLICATE
    else:
        agrees = decided is code
    if not agrees:
        raise CorruptReplyError("KernelDisagrees")
    return code


def finish_create(plan: CreatePlan, reply: object) -> Admission | ErrorCode:
    """The kernel's ``admit`` answer given the run (and record) the script saw.

    The kernel runs once, on the state the script reports. Raises
    :class:`CorruptReplyError` if the kernel, fed that state, would not have
    admitted what the script admitted.
    """
    tag, rest, items = _split_reply(reply)
    request = plan.request
    if tag == "OK" and not items:
        result = admit(_admission_run(rest, request.run_id), None, request, plan.limits, plan.now_ms)
        if not isinstance(result, Admission):
            raise CorruptReplyError("KernelDisagrees")
        return result
    if tag == "ERR":
        return _refused_create(plan, rest, items)
    if tag != "REPLAY" or not items:
        raise CorruptReplyError("UnexpectedReply")
    run = _admission_run(rest, request.run_id)
    record = _decode_embedded(items[1:], request.run_id, request.tool_call_id)
    replayed = admit(run, record, request, plan.limits, plan.now_ms)
    if not isinstance(replayed, Admission) or not replayed.replayed:
        raise CorruptReplyError("KernelDisagrees")
    return replayed


# -- complete --------------------------------------------------------------------------


class CompleteCall(NamedTuple):
    """One COMPLETE_SCRIPT call (``command``: numkeys, KEYS, ARGV).

    When ``staged`` is not None it is SET at ``stage_key`` (the last KEYS entry) in
    the same round trip, before the script.
    """

    command: tuple[bytes | str, ...]
    staged: str | None
    stage_key: str | None


class CompletePlan(NamedTuple):
    """What ``complete`` sends; ``resend`` carries the raw response in full if asked."""

    call: CompleteCall
    resend: CompleteCall
    before: CanonicalRecord
    after: CanonicalRecord
    #: The store clock when the call was planned: the kernel re-decides a refusal at it.
    now_ms: int = 0


def plan_complete(
    prefix: str, before: CanonicalRecord, after: CanonicalRecord, now_ms: int, nonce: Callable[[], str]
) -> CompletePlan | ErrorCode:
    """Build the COMPLETE_SCRIPT call for ``before`` -> ``after``.

    Raises ``ValueError`` (from the kernel) when ``after`` changes a field no
    transition changes. Ids that are not safe have no record: INVALID_TRANSITION.
    Every mutable field of ``after`` is written (a None field is deleted), so the
    stored record becomes exactly ``after``; only a raw response that ``before``
    already held stays on the server, where the script checks its size (``RESEND``
    asks for it in full when it differs). A raw response above
    :data:`STAGE_ABOVE_BYTES` goes through a staging key named with ``nonce()``.
    """
    check_completion(before, after)  # the kernel's programming-error checks
    run_id, tool_call_id = before.run_id, before.tool_call_id
    keys = run_keys(prefix, run_id)
    if keys is None or not is_safe_id(tool_call_id):
        return ErrorCode.INVALID_TRANSITION
    updated = after.updated_at_ms
    if not (-MAX_EXACT_INT <= now_ms < MAX_EXACT_INT and -MAX_EXACT_INT <= updated < MAX_EXACT_INT):
        _check_int(now_ms, updated)
    charge = completion_charge(before, after)
    raw = after.raw_response
    size = None if raw is None else utf8_len(raw)
    evidence, code, result, scope = after.evidence_status, after.error_code, after.agent_result, after.scope
    # Header: "<head> <raw_size> <mask> <evidence>" (COMPLETE_SCRIPT's contract); the
    # mask's third letter, the raw response's, depends on the call.
    before_raw = ("D" if evidence is None else "S") + ("D" if code is None else "S")
    after_raw = ("D" if result is None else "S") + ("D" if scope is None else "S")
    done_id = tool_call_id if after.terminal else ""
    head = f"{now_ms} {after.status} {code or ''} {updated} {charge} {done_id}"
    tail = f"{evidence or ''} {before.created_at_ms} {before.expires_at_ms} {before.sequence}"
    sent = (keys.record_wire(tool_call_id), keys.run_wire, keys.done_wire, keys.raw_wire(tool_call_id))
    token = before.invocation_token
    texts = (result or "", scope or "", before.tool_name, before.request_json)
    if raw is None:
        header = f"{head}  {before_raw}D{after_raw} {tail}".encode()
        full = CompleteCall((_FOUR, *sent, header, token, "", *texts), None, None)
    elif size is not None and size > STAGE_ABOVE_BYTES:
        stage_key = keys.stage(nonce())
        header = f"{head}  {before_raw}T{after_raw} {tail}".encode()
        full = CompleteCall((_FIVE, *sent, stage_key, header, token, "", *texts), raw, stage_key)
    else:
        header = f"{head}  {before_raw}S{after_raw} {tail}".encode()
        full = CompleteCall((_FOUR, *sent, header, token, raw, *texts), None, None)
    if raw is not None and size is not None and (raw is before.raw_response or raw == before.raw_response):
        # Unchanged raw response: keep it on the server, check its size there.
        header = f"{head} {size} {before_raw}K{after_raw} {tail}".encode()
        kept = CompleteCall((_FOUR, *sent, header, token, "", *texts), None, None)
        return CompletePlan(kept, full, before, after, now_ms)
    return CompletePlan(full, full, before, after, now_ms)


def _refused_complete(plan: CompletePlan, rest: str, items: Reply) -> ErrorCode:
    """COMPLETE_SCRIPT's refusal, re-decided by kernel ``decide_complete`` on the record it saw.

    ``items`` is ``()`` (no record) or the reply array: the tag, then the stored record's
    field/value pairs. Raises :class:`CorruptReplyError` ("KernelDisagrees") when the
    kernel, fed that record, would write or replay (CIS-STORE-8); a stored record that
    is not well-formed or not of this key is corrupt as on any read (CIS-STORE-6).
    """
    if rest != ErrorCode.INVALID_TRANSITION.value:
        raise CorruptReplyError("UnexpectedReply")
    before = plan.before
    stored = decode_record(items[1:], None, before.run_id, before.tool_call_id) if items else None
    if decide_completion(stored, before, plan.after, None, plan.now_ms) is not ErrorCode.INVALID_TRANSITION:
        raise CorruptReplyError("KernelDisagrees")
    return ErrorCode.INVALID_TRANSITION


def finish_complete(plan: CompletePlan, reply: object) -> CanonicalRecord | ErrorCode | None:
    """``after`` on WRITE, the stored record on REPLAY, a code, or ``None`` for RESEND."""
    if reply in _WRITE:
        return plan.after
    tag, rest, items = _split_reply(reply)
    if tag == "ERR":
        return _refused_complete(plan, rest, items)
    if tag == "RESEND" and not rest and not items:
        return None
    if tag != "REPLAY" or rest or not items:
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
    if any(value is None for value in fields):
        raise CorruptReplyError("CorruptRecord")
    if not lifetime_is_intact(None if pttl == -1 else pttl):
        raise CorruptReplyError("NoTTL")
    if decode_text(fields[0]) != run_id or decode_text(fields[1]) != tool_call_id:
        raise CorruptReplyError("IdentityMismatch")
    if pttl < 0:
        return None
    remaining = min(pttl, _int(decode_text(fields[2])) - now_ms)
    return remaining if remaining > 0 else None


# -- integrity (CIS-DUR-7) ---------------------------------------------------------------

#: Why a script answered ``CORRUPT <why>`` (see ``_redis_scripts``), each a CorruptReplyError cause.
_CORRUPT_CAUSES: Final = frozenset({"NoTTL", "ForeignKey", "BadInteger"})


def refuse_corrupt(reply: object) -> object:
    """``reply`` unchanged, unless a script answered ``CORRUPT <why>``: then :class:`CorruptReplyError`.

    A CORRUPT reply wrote nothing (every check precedes a script's first write); the
    scripts' ``NoTTL`` mirrors kernel ``lifetime_is_intact``: a record or run without
    expiry is never completed, admitted into or reopened.
    """
    head = reply[:8] if isinstance(reply, bytes | str) else None
    if head not in (b"CORRUPT ", "CORRUPT "):
        return reply
    why = decode_text(reply)[8:]
    raise CorruptReplyError(why if why in _CORRUPT_CAUSES else "UnexpectedReply")


def check_lifetime(fields: object, pttl: object) -> None:
    """Refuse a record read (HGETALL reply ``fields``) whose key has no expiry (``pttl`` -1) (CIS-DUR-7)."""
    if fields and isinstance(pttl, int) and not lifetime_is_intact(None if pttl == -1 else pttl):
        raise CorruptReplyError("NoTTL")


def undurable(record: CanonicalRecord, now_ms: int, limits: Limits) -> CanonicalRecord | None:
    """The kernel's ERROR/DURABILITY_NOT_REACHED record for a create that missed the durability mode.

    ``record`` is the PROJECTING record the create wrote (CIS-DUR-2); None when the
    kernel refuses the transition (the record expired meanwhile).
    """
    result = transition(record, Failed(code=ErrorCode.DURABILITY_NOT_REACHED, now_ms=now_ms), limits)
    return result if isinstance(result, CanonicalRecord) else None


def is_late(reply: object) -> bool:
    """Whether a create answered ``LATE <lag ms>``: it started too late for its now, wrote nothing.

    See CREATE_SCRIPT's ARGV[5..6] (CIS-DUR-11).
    """
    return isinstance(reply, bytes | str) and reply[:5] in (b"LATE ", "LATE ")
