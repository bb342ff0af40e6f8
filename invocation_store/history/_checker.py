"""Linearizability of a concurrent history against the kernel, within a budget (CIS-HIST-2).

Theory of operation
-------------------
The history is split per run first (``_spec`` explains why that is sound: every
operation names one run). Each run is then decided in two steps, both by the bounded
search of :mod:`._search` (Wing & Gong with Lowe's memoisation, pruned):

0. *A short search of the whole run* (at most :data:`_QUICK_STATES` configurations):
   most runs are linearizable and decided there.
1. *Per key* (P-compositionality, Horn & Kroening 2015, as Porcupine partitions): for
   each tool_call_id, the run's completions and reads of that key, with each create
   of it that was admitted replaced by what it left under the key
   (:class:`._spec.Admitted`). In every linearization of the run, the key's record
   changes only by these operations and their results depend only on it, so each
   key's projection of a linearization is a linearization of the key's sub-history:
   a key whose sub-history is not linearizable proves the run is not. A key with a
   create of unknown outcome or answered as a replay is skipped (what it wrote is not
   known). These searches are tiny, and they decide at once the common hard case: a
   forged result among many commuting completions.
2. *The whole run* within the budget, when no key refuted it.

When a run is not linearizable the evidence is shrunk to a *window*, within what is
left of the same budget: the shortest prefix of the (key's or run's) history that is
not linearizable (its last completion is the first one no order explains, which every
window holds), then every operation whose result is not needed for the contradiction
relaxed to an unknown outcome (relaxing only removes constraints, so what remains is
still a contradiction): first a window of that operation alone or with one partner
(:func:`_small_window`, which the search's invariants refute at once), else shrinking
in groups (:func:`_relax`); and for each order of the remaining operations where the
kernel disagreed and in which fields. If the budget runs out while explaining, the
verdict stands and the report says the window may not be minimal.

A run the budget could not decide is *undecided*: the report names it, the window of
operations not yet placed at the deepest point the search reached, and the limit
(states or seconds); the exit code is 3. Other runs are still checked while the time
lasts, and a run that is not linearizable is reported whatever the others were.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any, Final

from attrs import evolve, frozen

from ..kernel import Admission, ErrorCode
from ._format import History, HistoryOp, Outcome, decode_history
from ._report import (
    MAX_ORDERS,
    REQUIREMENT,
    SHOWN_ORDERS,
    HistoryReport,
    OrderTried,
    Undecided,
    Violation,
    disagreement,
    json_value,
)
from ._search import DEFAULT_BUDGET, Budget, BudgetExhausted, Meter, search
from ._spec import Admitted, impossible, pinned_usage, rule_of

__all__ = [
    "DEFAULT_BUDGET",
    "Budget",
    "HistoryReport",
    "OrderTried",
    "Undecided",
    "Violation",
    "check_history",
    "check_history_lines",
    "is_linearizable",
]

# Bounds on the explanation's attempts; its time and memory are the check's budget.
_MAX_RELAX_CHECKS: Final = 400
_MAX_ORDERS: Final = MAX_ORDERS
_SHOWN_ORDERS: Final = SHOWN_ORDERS
#: The most configurations one of the explanation's searches may hold: a search that
#: needs more is counted as not showing a contradiction (the window stays larger).
_EXPLAIN_STATES: Final = 5_000
#: The share of ``Budget.max_seconds`` one explanation may spend (at least
#: :data:`_EXPLAIN_MIN_SECONDS`, never past the check's deadline): past it the window
#: is reported as it stands (``minimal`` False).
_EXPLAIN_SHARE: Final = 0.1
_EXPLAIN_MIN_SECONDS: Final = 0.5
#: The configurations of the first, short search of a run: a few per operation (a
#: linearizable run is usually decided without backtracking), at most this many.
_QUICK_STATES: Final = 2_000
_QUICK_STATES_PER_OP: Final = 4
#: The configurations of each search for a window of one or two operations: such a
#: window is refuted at once or not shown (then the window is shrunk in groups).
_SMALL_WINDOW_STATES: Final = 200
#: The most pairs tried for a window of two operations.
_MAX_PAIRS: Final = 64


def is_linearizable(ops: Sequence[HistoryOp], budget: Budget = DEFAULT_BUDGET) -> bool:
    """True if one run's operations are linearizable with respect to the kernel (CIS-HIST-2).

    Raises :class:`~._search.BudgetExhausted` when ``budget`` does not decide it.
    """
    return search(ops, Meter(budget))


# ---------------------------------------------------------------------------
# Per-key projection (P-compositionality)


def _key_of(op: HistoryOp) -> str | None:
    key: str | None = None
    if op.name in ("create", "complete"):
        key = op.args[0].tool_call_id
    elif op.name == "get":
        key = op.args["tool_call_id"]
    return key


def key_histories(ops: Sequence[HistoryOp]) -> dict[str, list[HistoryOp]]:
    """Each key's sub-history, for the keys whose creates' effects are known (see the module docstring).

    Per key: its completions and ``get`` reads as they are, and each of its creates
    answered with a fresh admission replaced by a create whose args are
    :class:`._spec.Admitted` (the record it left); refused creates wrote nothing and
    are left out. A key with a create of unknown outcome, or answered as a replay (its
    earlier attempt wrote a record no answer shows), is not projected.
    """
    groups: dict[str, list[HistoryOp]] = defaultdict(list)
    skipped: set[str] = set()
    for op in ops:
        key = _key_of(op)
        if key is None:
            continue
        if op.name == "create":
            result = op.result
            if op.outcome is not Outcome.OK or (isinstance(result, Admission) and result.replayed):
                skipped.add(key)
                continue
            if isinstance(result, ErrorCode):
                continue
            op = evolve(op, args=Admitted(result.record))  # noqa: PLW2901 - the projected create
        groups[key].append(op)
    return {key: group for key, group in groups.items() if key not in skipped}


# ---------------------------------------------------------------------------
# Explaining a failure


def _prefix(ops: Sequence[HistoryOp], cutoff: int) -> list[HistoryOp]:
    """The operations invoked by line ``cutoff``; later completions become unknown."""
    kept: list[HistoryOp] = []
    for op in ops:
        if op.invoke_line > cutoff:
            continue
        if op.complete_line is not None and op.complete_line > cutoff:
            op = evolve(op, outcome=Outcome.UNKNOWN, result=None, complete_line=None)  # noqa: PLW2901
        kept.append(op)
    return kept


def _fails(ops: Sequence[HistoryOp], meter: Meter, optional: frozenset[int] = frozenset()) -> bool:
    """True if ``ops`` are certainly not linearizable; False if they are or the budget cannot tell."""
    return _verdict(ops, meter, optional) is True


def _verdict(ops: Sequence[HistoryOp], meter: Meter, optional: frozenset[int]) -> bool | None:
    """True if ``ops`` are not linearizable, False if they are, None if ``meter`` cannot tell."""
    try:
        return not search(ops, meter, optional=optional)
    except BudgetExhausted:
        return None


def _pair_order(prefix: Sequence[HistoryOp], first: int, candidates: Sequence[int]) -> list[int]:
    """The candidates in the order a partner of ``prefix[first]`` is looked for.

    Those most likely to contradict it alone first: the same key (one record cannot
    take both), then answers that pin the run's usage as it does (two answers claiming
    one state), then the rest, latest completion first.
    """
    key = _key_of(prefix[first])
    pinned = pinned_usage(prefix[first]) is not None

    def rank(i: int) -> tuple[int, int]:
        op = prefix[i]
        if key is not None and _key_of(op) == key:
            return (0, -(op.complete_line or 0))
        if pinned and pinned_usage(op) is not None:
            return (1, -(op.complete_line or 0))
        return (2, -(op.complete_line or 0))

    return sorted(candidates, key=rank)


def _small_window(
    prefix: Sequence[HistoryOp], first: int, candidates: Sequence[int], meter: Meter
) -> tuple[set[int], bool] | None:
    """A window of ``first`` alone or with one partner: (the operations relaxed, minimal); None if none shown.

    ``first`` is in every window (without its result the prefix is the previous,
    linearizable one), so ``first`` alone, then ``first`` with each partner
    (:func:`_pair_order`, at most :data:`_MAX_PAIRS`), each searched with every other
    result relaxed within :data:`_SMALL_WINDOW_STATES` configurations. Such windows are
    refuted at once by the kernel's invariants (a key's record, the run's usage) or not
    shown. A pair is minimal when ``first`` alone was shown linearizable.
    """
    everything = frozenset(candidates)
    alone = _verdict(prefix, meter.child(_SMALL_WINDOW_STATES), everything)
    if alone:
        return set(everything), True
    # At most half the time left, so that shrinking in groups keeps the other half.
    halfway = time.process_time() + max(0.0, meter.deadline - time.process_time()) / 2
    for partner in _pair_order(prefix, first, candidates)[:_MAX_PAIRS]:
        pair_meter = meter.child(_SMALL_WINDOW_STATES)
        pair_meter.deadline = min(pair_meter.deadline, halfway)
        if pair_meter.out_of_time():
            return None
        if _verdict(prefix, pair_meter, everything - {partner}):
            return set(everything - {partner}), alone is False
    return None


def _impossible_violation(run_id: str, ops: Sequence[HistoryOp], key: str | None) -> Violation | None:
    """A window of one operation whose result no state gives (:func:`._spec.impossible`), if there is one."""
    known = sorted((op for op in ops if op.outcome is Outcome.OK), key=lambda op: op.complete_line or 0)
    for op in known:
        expected = impossible(op)
        if expected is None:
            continue
        reason = f"op {op.op_id} {op.name}: in the only state its answer allows, {disagreement(op, expected)}"
        tried = OrderTried(
            op_ids=(op.op_id,), failed_op=op.op_id, expected=json_value(expected), reason=reason
        )
        return Violation(
            run_id=run_id,
            first_unexplained=op,
            window=(op,),
            orders=(tried,),
            orders_total=1,
            requirement=REQUIREMENT,
            rule=rule_of(op, expected),
            key=key,
        )
    return None


def _explain(run_id: str, ops: Sequence[HistoryOp], budget_meter: Meter, key: str | None) -> Violation:
    """Shrink a non-linearizable history to a window and try its orders, within ``budget_meter``."""
    single = _impossible_violation(run_id, ops, key)
    if single is not None:
        return single
    meter = budget_meter.child(_EXPLAIN_STATES)
    share = max(_EXPLAIN_MIN_SECONDS, budget_meter.budget.max_seconds * _EXPLAIN_SHARE)
    meter.deadline = min(budget_meter.deadline, time.process_time() + share)
    minimal = True
    returns = sorted(op.complete_line for op in ops if op.complete_line is not None)
    low, high = 0, len(returns) - 1
    while low < high:  # the shortest non-linearizable prefix (prefixes of a linearizable history are)
        middle = (low + high) // 2
        try:
            linearizable = search(_prefix(ops, returns[middle]), meter)
        except BudgetExhausted:
            minimal = False
            break
        if linearizable:
            low = middle + 1
        else:
            high = middle
    cutoff = returns[high]
    prefix = _prefix(ops, cutoff)
    first = next(i for i, op in enumerate(prefix) if op.complete_line == cutoff)
    candidates = [i for i, op in enumerate(prefix) if op.outcome is Outcome.OK and i != first]
    candidates.sort(key=lambda i: -(prefix[i].complete_line or 0))
    small = _small_window(prefix, first, candidates, meter)
    if small is not None:
        optional, small_minimal = small
        minimal = minimal and small_minimal
    else:
        optional, relaxed_all = _relax(prefix, candidates, meter)
        minimal = minimal and relaxed_all
    frozen_optional = frozenset(optional)
    window = [i for i, op in enumerate(prefix) if op.outcome is Outcome.OK and i not in optional]
    orders: list[OrderTried] = []
    rules: list[str] = []
    tried_count = 0
    for permutation in itertools.islice(itertools.permutations(window), _MAX_ORDERS):
        if meter.out_of_time():
            break
        tried = _try_order(prefix, frozen_optional, permutation, meter)
        tried_count += 1
        if tried.failed_op is not None:
            failed = next(op for op in prefix if op.op_id == tried.failed_op)
            rules.append(rule_of(failed, tried.expected_value))
        if len(orders) < _SHOWN_ORDERS:
            orders.append(tried.public)
    return Violation(
        run_id=run_id,
        first_unexplained=prefix[first],
        window=tuple(prefix[i] for i in window),
        orders=tuple(orders),
        orders_total=math.factorial(len(window)),
        requirement=REQUIREMENT,
        rule=rules[0] if rules else rule_of(prefix[first], None),
        key=key,
        minimal=minimal,
        orders_tried=tried_count,
    )


def _relax(prefix: Sequence[HistoryOp], candidates: Sequence[int], meter: Meter) -> tuple[set[int], bool]:
    """The candidates whose results the contradiction does not need, by group testing.

    A group is relaxed to unknown outcomes at once when the prefix still fails with it
    (then none of its results is needed); otherwise it is split in halves, down to
    single operations. Every step keeps what is relaxed a contradiction. Returns the
    relaxed set, and whether every group was tried within ``meter``.
    """
    optional: set[int] = set()
    groups = [list(candidates)] if candidates else []
    checks = 0
    while groups:
        group = groups.pop()
        if meter.out_of_time() or checks >= _MAX_RELAX_CHECKS:
            return optional, False
        checks += 1
        if _fails(prefix, meter, frozenset(optional | set(group))):
            optional.update(group)
        elif len(group) > 1:
            half = len(group) // 2
            groups += [group[half:], group[:half]]
    return optional, True


@frozen
class _Tried:
    public: OrderTried
    failed_op: int | None
    expected_value: Any


def _try_order(
    prefix: Sequence[HistoryOp], optional: frozenset[int], permutation: Sequence[int], meter: Meter
) -> _Tried:
    ids = tuple(prefix[i].op_id for i in permutation)
    for a, b in itertools.combinations(permutation, 2):  # a before b in this order
        later, earlier = prefix[a], prefix[b]
        if earlier.complete_line is not None and earlier.complete_line < later.invoke_line:
            reason = f"impossible: op {earlier.op_id} returned before op {later.op_id} was invoked"
            return _Tried(OrderTried(op_ids=ids, failed_op=None, expected=None, reason=reason), None, None)
    deepest: dict[str, Any] = {"pos": (-1, -1)}

    def reject(pos: tuple[int, int], i: int, expected: Any, why: str) -> None:
        if pos > deepest["pos"]:  # the furthest into the order, then with the most placed
            deepest.update(pos=pos, op=i, expected=expected, why=why)

    with contextlib.suppress(BudgetExhausted):  # the deepest rejection seen is still the kernel's word
        search(prefix, meter, optional=optional, order=permutation, on_reject=reject)
    if deepest["pos"][0] < 0:
        reason = "no placement of the other operations lets this order happen"
        return _Tried(OrderTried(op_ids=ids, failed_op=None, expected=None, reason=reason), None, None)
    op = prefix[deepest["op"]]
    expected = deepest["expected"]
    why = deepest["why"]
    reason = f"op {op.op_id} {op.name}: {disagreement(op, expected)}" + (f" ({why})" if why else "")
    public = OrderTried(op_ids=ids, failed_op=op.op_id, expected=json_value(expected), reason=reason)
    return _Tried(public, op.op_id, expected)


# ---------------------------------------------------------------------------
# Checking


def _refuting_key(run_id: str, ops: Sequence[HistoryOp], meter: Meter) -> Violation | None:
    """The first key whose own operations are not linearizable, explained; None if no key refutes."""
    for key, group in key_histories(ops).items():
        try:
            if not search(group, meter):
                return _explain(run_id, group, meter, key)
        except BudgetExhausted:
            continue  # this key alone is too hard: the whole run's search still decides
    return None


def _check_run(run_id: str, ops: Sequence[HistoryOp], meter: Meter) -> Violation | Undecided | None:
    """The verdict on one run: a violation, undecided, or None (linearizable).

    A short search of the whole run first (most runs are decided in a few states);
    then, if it did not find the run linearizable, the keys one by one (a refuting key
    gives a small window); then the whole run within the budget.
    """
    quick_states = min(_QUICK_STATES, _QUICK_STATES_PER_OP * len(ops) + _QUICK_STATES_PER_OP)
    try:
        quick: bool | None = search(ops, meter.child(quick_states))
    except BudgetExhausted:
        quick = None
    if quick:
        return None
    refuted = _refuting_key(run_id, ops, meter)
    if refuted is not None:
        return refuted
    if quick is False:
        return _explain(run_id, ops, meter, None)
    try:
        if search(ops, meter):
            return None
    except BudgetExhausted as exhausted:
        return Undecided(
            run_id=run_id,
            limit=exhausted.limit,
            window=tuple(ops[i] for i in exhausted.unplaced),
            placed=exhausted.placed,
            operations=len(ops),
            lines=(ops[0].invoke_line, max(op.complete_line or op.invoke_line for op in ops)),
        )
    return _explain(run_id, ops, meter, None)


def check_history(history: History, budget: Budget = DEFAULT_BUDGET) -> HistoryReport:
    """Decide whether ``history`` is linearizable w.r.t. the kernel, run by run, in ``budget`` (CIS-HIST-2).

    Returns a :class:`HistoryReport`: its ``violation`` explains the first run (in the
    order runs first appear) found not linearizable; ``undecided`` lists the runs the
    budget could not decide (with their windows). Every run is checked while the
    budget's time lasts; a run not reached is undecided (limit ``"seconds"``).
    """
    runs: dict[str, list[HistoryOp]] = defaultdict(list)
    for op in history.ops:
        runs[op.run_id].append(op)
    unknown = sum(op.outcome is Outcome.UNKNOWN for op in history.ops)
    meter = Meter(budget)
    violation: Violation | None = None
    undecided: list[Undecided] = []
    for run_id, ops in runs.items():
        verdict = _check_run(run_id, ops, meter)
        if isinstance(verdict, Violation):
            violation = verdict
            break
        if isinstance(verdict, Undecided):
            undecided.append(verdict)
    return HistoryReport(
        lines=history.lines,
        operations=len(history.ops),
        unknown=unknown,
        runs=len(runs),
        violation=violation,
        undecided=tuple(undecided),
        states=meter.states,
    )


def check_history_lines(lines: Iterable[bytes | str], budget: Budget = DEFAULT_BUDGET) -> HistoryReport:
    """Decode and check a history within ``budget``; raises ``MalformedHistoryError`` for bad input."""
    return check_history(decode_history(lines), budget)
