"""The sequential specification of one run's store state, decided by the kernel (CIS-HIST-2).

Theory of operation
-------------------
Linearizability is judged against a *sequential* object: here, what one store
holds for one run (the run state, the run's records by tool_call_id, its completed
ids and its admitted ids), with every decision taken by the kernel exactly as the
memory store takes it (:func:`~invocation_store.kernel.admit`,
:func:`~invocation_store.kernel.decide_completion`, the run functions), at the
operation's own ``now_ms``. Every store operation names one run and reads or writes
only that run's part of the state: the store is a product of independent per-run
objects, so by the locality of linearizability (Herlihy & Wing 1990, theorem 1) a
history is linearizable iff each run's sub-history is. The checker therefore
searches run by run.

States are immutable tuples (hashable, so the search can memoise them):
``(run, records, done, calls)`` with ``records`` a tuple of ``(tool_call_id,
record)`` pairs sorted by id.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, Final, NamedTuple, TypeAlias

from attrs import evolve

from ..kernel import (
    DUPLICATE_CODES,
    Admission,
    CanonicalRecord,
    CompareAndSet,
    ErrorCode,
    RunState,
    admit,
    cancel_run,
    close_run,
    decide_completion,
    duplicate_code,
    live,
    open_run,
    utf8_len,
    without_raw,
)
from ._format import HistoryOp, Outcome

__all__ = [
    "EMPTY",
    "Admitted",
    "RunModel",
    "apply",
    "earlier_attempts",
    "impossible",
    "reads_of",
    "rule_of",
    "writes_of",
]

#: ``(run, records, done, calls)`` of one run.
RunModel: TypeAlias = tuple[
    RunState | None, tuple[tuple[str, CanonicalRecord], ...], tuple[str, ...], tuple[str, ...]
]

#: The state of a run nobody has opened.
EMPTY: Final[RunModel] = (None, (), (), ())


def _live_run(run: RunState | None, now_ms: int) -> RunState | None:
    return live(run, now_ms)


def _lookup(records: tuple[tuple[str, CanonicalRecord], ...], tool_call_id: str) -> CanonicalRecord | None:
    for tcid, record in records:
        if tcid == tool_call_id:
            return record
    return None


def _live_record(records: tuple[tuple[str, CanonicalRecord], ...], tool_call_id: str, now_ms: int) -> Any:
    return live(_lookup(records, tool_call_id), now_ms)


def _put(
    records: tuple[tuple[str, CanonicalRecord], ...], record: CanonicalRecord
) -> tuple[tuple[str, CanonicalRecord], ...]:
    kept = [(tcid, old) for tcid, old in records if tcid != record.tool_call_id]
    kept.append((record.tool_call_id, record))
    kept.sort(key=lambda pair: pair[0])
    return tuple(kept)


class Admitted(NamedTuple):
    """The arguments of a ``create`` seen from its call's key only: the record it admitted.

    The per-key projection of a run (``_checker``) replaces each admitted create by
    this: in every linearization of the run, that create takes effect where the key
    holds no live record and leaves exactly ``record`` there, so the projection keeps
    the key's part of the state exact without the run's. ``record`` is ``args[0]`` so
    that :meth:`HistoryOp.describe` names its call.
    """

    record: CanonicalRecord


def _admitted(state: RunModel, op: HistoryOp) -> tuple[Any, RunModel]:
    run, records, done, calls = state
    record = op.args.record
    existing = _live_record(records, record.tool_call_id, op.now_ms)
    if existing is not None:
        return duplicate_code(existing), state
    return op.result, (run, _put(records, record), done, calls)


def apply(state: RunModel, op: HistoryOp) -> tuple[Any, RunModel]:
    """Run ``op`` on ``state``: ``(the result the store must return, the next state)``.

    The result has the store protocol's type (``RunState | ErrorCode`` for run
    operations, ``Admission | ErrorCode`` for ``create``, ``CanonicalRecord |
    ErrorCode`` for ``complete``, ``CanonicalRecord | None`` for ``get``, a dict for
    ``get_many``, a tuple of ids for ``completed`` and ``calls``). A create whose args
    are :class:`Admitted` (the per-key projection) answers its observed admission where
    the key holds no live record, and the duplicate's code where it does.
    """
    run, records, done, calls = state
    now = op.now_ms
    current = _live_run(run, now)
    name = op.name
    if name == "create" and isinstance(op.args, Admitted):
        return _admitted(state, op)
    if name == "create":
        request, limits = op.args
        existing = _live_record(records, request.tool_call_id, now)
        admission = admit(current, existing, request, limits, now)
        if isinstance(admission, Admission) and not admission.replayed:
            return admission, (
                admission.run,
                _put(records, admission.record),
                done,
                (*calls, request.tool_call_id),
            )
        return admission, state
    if name == "complete":
        before, after = op.args
        stored = _live_record(records, before.tool_call_id, now)
        effect = decide_completion(stored, before, after, current, now)
        if isinstance(effect, ErrorCode):
            return effect, state
        if effect.action is CompareAndSet.REPLAY:
            return effect.record, state
        records = _put(records, effect.record)
        if effect.run is not None:
            run = effect.run
        if effect.append_done:
            done = (*done, after.tool_call_id)
        return effect.record, (run, records, done, calls)
    if name == "get":
        return _live_record(records, op.args["tool_call_id"], now), state
    if name == "get_many":
        found = {tcid: _live_record(records, tcid, now) for tcid in op.args["tool_call_ids"]}
        if not op.args["include_raw"]:
            found = {tcid: None if rec is None else without_raw(rec) for tcid, rec in found.items()}
        return found, state
    if name in ("completed", "calls"):
        if current is None:
            return (), state
        return (done if name == "completed" else calls), state
    if name == "get_run":
        return current, state
    if name == "open_run":
        result = open_run(current, run_id=op.run_id, now_ms=now, **op.args)
        if isinstance(result, ErrorCode) or result is current:
            return result, state
        # A fresh run: the lists of a lapsed one lapsed with it.
        return result, (result, records, (), ())
    if name in ("cancel_run", "close_run"):
        ended = cancel_run(current, now) if name == "cancel_run" else close_run(current, now)
        if isinstance(ended, ErrorCode):
            return ended, state
        return ended, (ended, records, done, calls)
    raise ValueError(f"unknown history operation {name!r}")


def _answered_after_own_attempt(op: HistoryOp) -> bool:
    """Whether ``op``'s answer may be a retry's, given after an earlier attempt of it took effect."""
    result = op.result
    if op.name == "create":  # the retry finds its own record: replayed
        return isinstance(result, Admission) and result.replayed
    if op.name in ("open_run", "cancel_run", "close_run"):  # the retry finds the run as it left it
        return isinstance(result, RunState)
    if op.name == "complete":  # the retry finds its own write moved on by another completion
        _before, after = op.args
        return result is ErrorCode.INVALID_TRANSITION and not after.terminal
    return False


def earlier_attempts(ops: Sequence[HistoryOp], optional: Collection[int] = ()) -> list[int]:
    """Indices of the writes whose answer may come from a retry of the same write (CIS-RETRY-2).

    A store client resends a command whose reply was lost (redis-py after a timeout
    or a dropped connection, the Redis stores within their retry budget), so one
    write can reach the store twice or more: an earlier attempt takes effect at some
    point A after the invocation, and the attempt that answered takes effect at a
    later point B, before the completion. Other operations may take effect between A
    and B (a sweep failing a new record, another create spending the run's budget,
    a completion charging a cancelled run), and the answer is the kernel's at B. It
    shows the earlier attempt only where the kernel's answer to a repeated write
    differs from a refusal: a create ``replayed``, an open, cancel or close answered
    with the run, a non-terminal completion answered INVALID_TRANSITION (its own
    write moved on). For each such write (with a known result, not in ``optional``)
    the checker adds its earlier attempt: the same write as an operation of unknown
    outcome, invoked with it, that may take effect only before the write itself.
    """
    return [
        i
        for i, op in enumerate(ops)
        if op.outcome is Outcome.OK and i not in optional and _answered_after_own_attempt(op)
    ]


_CREATE_RULES: Final = {
    **dict.fromkeys(DUPLICATE_CODES, "CIS-ID-5"),
    ErrorCode.TOOL_BUDGET_EXHAUSTED: "CIS-RUN-5",
    ErrorCode.RUN_BYTES_EXHAUSTED: "CIS-RUN-6",
    ErrorCode.RUN_INACTIVE: "CIS-RUN-3",
    ErrorCode.RUN_DEADLINE_EXCEEDED: "CIS-RUN-4",
}


def rule_of(op: HistoryOp, expected: Any) -> str:
    """The requirement whose rule decided ``expected`` for ``op`` (for failure reports)."""
    name = op.name
    if name == "create":
        if isinstance(expected, ErrorCode):
            return _CREATE_RULES.get(expected, "CIS-PRE-8")
        if isinstance(op.result, ErrorCode):
            return _CREATE_RULES.get(op.result, "CIS-PRE-8")
        if isinstance(op.result, Admission) and op.result.replayed != expected.replayed:
            return "CIS-RETRY-2"
        return "CIS-PRE-8"
    if name == "complete":
        return "CIS-STORE-3"
    if name in ("open_run", "cancel_run", "close_run", "get_run"):
        return "CIS-RUN-2" if name != "open_run" else "CIS-RUN-1"
    if name in ("completed", "calls"):
        return "CIS-PROG-1"
    return "CIS-STORE-1"


def writes_of(op: HistoryOp, checked: bool) -> tuple[str, ...]:
    """The tool_call_ids whose record ``op`` may write (for pruning: ``_search``).

    A create or a completion writes its call's record unless it is known (``checked``)
    to have been refused (a code) or to be a replay (it found its own record). An
    operation of unknown outcome may write. Nothing else writes a record.
    """
    name = op.name
    if name not in ("create", "complete"):
        return ()
    result = op.result
    if checked and (isinstance(result, ErrorCode) or (isinstance(result, Admission) and result.replayed)):
        return ()
    return (op.args[0].tool_call_id,)


def reads_of(op: HistoryOp) -> tuple[str, ...] | None:
    """The tool_call_ids whose records alone decide ``op``'s result, or None if more decides it.

    A completion's result is the stored record or a code, decided by the stored record
    alone (the run state only decides the charge); a read's by the records it reads;
    a per-key admission's (:class:`Admitted`) by its key's record. With nothing left
    to write them, the result is fixed whatever else happens (``_search``'s pruning).
    """
    name = op.name
    if name == "complete":
        return (op.args[0].tool_call_id,)
    if name == "get":
        return (op.args["tool_call_id"],)
    if name == "get_many":
        return tuple(op.args["tool_call_ids"])
    if name == "create" and isinstance(op.args, Admitted):
        return (op.args.record.tool_call_id,)
    return None


def impossible(op: HistoryOp) -> Any:
    """The kernel's answer that proves ``op``'s observed result is given in no state, or None.

    For a create answered with an admission, the state before it is determined by the
    answer (the kernel's invariants: a fresh admission adds one call and the request's
    bytes to the run and writes the record; a replay answers the stored run and
    record as they are), so one witness state decides: if the kernel answers otherwise
    there, it answers otherwise everywhere. Anything else, or a witness outside the
    kernel's domain, gives None (not proven impossible).
    """
    result = op.result
    if op.name != "create" or op.outcome is not Outcome.OK or not isinstance(result, Admission):
        return None
    if isinstance(op.args, Admitted):
        return None
    request = op.args[0]
    if result.replayed:
        witness: RunModel = (result.run, ((request.tool_call_id, result.record),), (), ())
    else:
        size = utf8_len(request.request_json) or 0
        run = evolve(
            result.run,
            tool_calls_used=result.run.tool_calls_used - 1,
            bytes_used=result.run.bytes_used - size,
        )
        witness = (run, (), (), ())
    try:
        answer, _after = apply(witness, op)
    except (ValueError, TypeError):  # the witness is outside the kernel's domain: no proof
        return None
    return answer if answer != result else None
