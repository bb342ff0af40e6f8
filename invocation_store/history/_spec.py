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
    completion_charge,
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
    "NO_USAGE",
    "Admitted",
    "RunModel",
    "Usage",
    "after_witness",
    "answer_at",
    "apply",
    "earlier_attempts",
    "fresh_claim",
    "growth",
    "impossible",
    "observed_run",
    "pinned_usage",
    "reads_of",
    "rule_of",
    "usage_of",
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
    if op.name in ("open_run", "cancel_run", "close_run"):
        # The retry finds the run as its own attempt left it, or moved on by another
        # operation since (an open closed meanwhile is refused): either answer shows it.
        return isinstance(result, RunState) or result is ErrorCode.INVALID_TRANSITION
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
    with the run or INVALID_TRANSITION (its own write moved on by another), a
    non-terminal completion answered INVALID_TRANSITION (its own write moved on). For
    each such write (with a known result, not in ``optional``) the checker adds its
    earlier attempt: the same write as an operation of unknown
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


def _usage_rule(expected: Any, observed: Any) -> str | None:
    """CIS-RUN-5 or CIS-RUN-6 when two runs (or admissions) differ in their calls or bytes used, else None."""
    if isinstance(expected, Admission) and isinstance(observed, Admission):
        expected, observed = expected.run, observed.run
    if not (isinstance(expected, RunState) and isinstance(observed, RunState)):
        return None
    if expected.tool_calls_used != observed.tool_calls_used:
        return "CIS-RUN-5"
    if expected.bytes_used != observed.bytes_used:
        return "CIS-RUN-6"
    return None


def rule_of(op: HistoryOp, expected: Any) -> str:
    """The requirement whose rule decided ``expected`` for ``op`` (for failure reports).

    ``expected`` None (no order was tried) names the rule of ``op``'s own kind.
    """
    name = op.name
    usage = _usage_rule(expected, op.result)
    if name == "create":
        if isinstance(expected, ErrorCode):
            return _CREATE_RULES.get(expected, "CIS-PRE-8")
        if isinstance(op.result, ErrorCode):
            return _CREATE_RULES.get(op.result, "CIS-PRE-8")
        if isinstance(expected, Admission) and isinstance(op.result, Admission):
            if op.result.replayed != expected.replayed:
                return "CIS-RETRY-2"
            return usage or "CIS-PRE-8"
        return "CIS-PRE-8"
    if name == "complete":
        return "CIS-STORE-3"
    if name in ("open_run", "cancel_run", "close_run", "get_run"):
        return usage or ("CIS-RUN-2" if name != "open_run" else "CIS-RUN-1")
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


class Usage(NamedTuple):
    """A run's usage counters: ``calls`` (``tool_calls_used``) and ``bytes`` (``bytes_used``, UTF-8 bytes)."""

    calls: int
    bytes: int


#: The usage of a fresh run, and of a run nobody opened.
NO_USAGE: Final = Usage(0, 0)


def usage_of(state: RunModel) -> Usage:
    """The usage counters of the run ``state`` holds (live or lapsed); :data:`NO_USAGE` when none."""
    run = state[0]
    return NO_USAGE if run is None else Usage(run.tool_calls_used, run.bytes_used)


def growth(op: HistoryOp) -> Usage:
    """What ``op`` adds to its run's usage when it takes effect: exactly this or nothing (CIS-RUN-5, -6).

    The kernel's counting: a create it admits adds one call and the request's UTF-8
    bytes (``admit``; refused or replayed, nothing); a completion it writes while the
    run is live adds ``completion_charge(before, after)`` (``decide_completion``;
    otherwise nothing); no other operation adds anything. Usage never shrinks, except
    that an ``open_run`` answered with a fresh run starts it again from
    :data:`NO_USAGE` (CIS-RUN-1). ``_search`` prunes with these invariants.
    """
    name = op.name
    if name == "create" and not isinstance(op.args, Admitted):
        size = utf8_len(op.args[0].request_json)
        return NO_USAGE if size is None else Usage(1, size)
    if name == "complete":
        before, after = op.args
        return Usage(0, completion_charge(before, after))
    return NO_USAGE


def pinned_usage(op: HistoryOp) -> tuple[Usage, Usage] | None:
    """The run usage just before and just after ``op`` that its observed answer fixes, or None.

    A create answered with a fresh admission: the answer's run less :func:`growth`,
    then the answer's run; answered as a replay, or a ``get_run``, ``cancel_run`` or
    ``close_run`` answered with a run: that run's usage, before and after (they
    change no counter). Anything else (refusals, completions, reads of records, an
    ``open_run``, which may start a fresh run) fixes nothing.
    """
    result = op.result
    if op.outcome is not Outcome.OK:
        return None
    if op.name == "create" and isinstance(result, Admission) and not isinstance(op.args, Admitted):
        after = Usage(result.run.tool_calls_used, result.run.bytes_used)
        if result.replayed:
            return after, after
        added = growth(op)
        return Usage(after.calls - added.calls, after.bytes - added.bytes), after
    if op.name in ("get_run", "cancel_run", "close_run") and isinstance(result, RunState):
        usage = Usage(result.tool_calls_used, result.bytes_used)
        return usage, usage
    return None


def fresh_claim(op: HistoryOp) -> CanonicalRecord | None:
    """The record a create answered with a fresh admission wrote, or None (CIS-ID-5).

    Such an answer needs its key to hold no live record where it takes effect; the
    record it wrote stays there until ``expires_at_ms`` (no operation removes a record:
    a completion or a sweep rewrites it in place). So two fresh admissions of one key
    fit one order only if the first's record lapsed by the second's ``now_ms``.
    """
    result = op.result
    if (
        op.name == "create"
        and op.outcome is Outcome.OK
        and isinstance(result, Admission)
        and not result.replayed
        and not isinstance(op.args, Admitted)
    ):
        return result.record
    return None


def after_witness(op: HistoryOp) -> RunModel | None:
    """The state just after a create answered with an admission: its run and record; None otherwise."""
    result = op.result
    if op.name != "create" or not isinstance(result, Admission) or isinstance(op.args, Admitted):
        return None
    return (result.run, ((result.record.tool_call_id, result.record),), (), ())


def observed_run(op: HistoryOp) -> RunState | None:
    """The run a pinned answer (:func:`pinned_usage`) shows, or None.

    Until it lapses no ``open_run`` can start a fresh run (CIS-RUN-1: an open on a live
    run answers it or INVALID_TRANSITION), so the usage only grows.
    """
    result = op.result
    if isinstance(result, Admission):
        return result.run
    if isinstance(result, RunState):
        return result
    return None


def _witness(op: HistoryOp, usage: Usage | None) -> RunModel | None:
    """The state before ``op`` that its observed answer allows, its run's usage set to ``usage`` if given.

    For a create answered with an admission the answer determines that state (the
    kernel's invariants: a fresh admission adds :func:`growth` to the run and writes
    the record; a replay answers the stored run and record as they are); for a run
    operation answered with a run, the run it shows. None for anything else.
    """
    result = op.result
    run: RunState
    records: tuple[tuple[str, CanonicalRecord], ...] = ()
    if op.name == "create" and isinstance(result, Admission) and not isinstance(op.args, Admitted):
        request = op.args[0]
        if result.replayed:
            run, records = result.run, ((request.tool_call_id, result.record),)
        else:
            pinned = pinned_usage(op)
            assert pinned is not None
            usage = usage or pinned[0]
            run = result.run
    elif op.name in ("get_run", "cancel_run", "close_run") and isinstance(result, RunState):
        run = result
    else:
        return None
    if usage is not None:
        run = evolve(run, tool_calls_used=usage.calls, bytes_used=usage.bytes)
    return (run, records, (), ())


def answer_at(op: HistoryOp, usage: Usage | None = None) -> Any:
    """The kernel's answer to ``op`` in its witness state (:func:`_witness`) with the run's usage ``usage``.

    None when ``op`` has no witness state or the witness is outside the kernel's
    domain. ``_search`` reports it when usage alone rules an answer out: what the
    kernel answers at the nearest usage the run can hold there.
    """
    witness = _witness(op, usage)
    if witness is None:
        return None
    try:
        answer, _after = apply(witness, op)
    except (ValueError, TypeError):  # the witness is outside the kernel's domain: no answer
        return None
    return answer


def impossible(op: HistoryOp) -> Any:
    """The kernel's answer that proves ``op``'s observed result is given in no state, or None.

    For a create answered with an admission, the state before it is determined by the
    answer (:func:`_witness`), so one witness state decides: if the kernel answers
    otherwise there, it answers otherwise everywhere. Anything else, or a witness
    outside the kernel's domain, gives None (not proven impossible).
    """
    if op.name != "create" or op.outcome is not Outcome.OK or not isinstance(op.result, Admission):
        return None
    answer = answer_at(op)
    return answer if answer is not None and answer != op.result else None
