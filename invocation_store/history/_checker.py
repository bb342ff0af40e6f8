"""Linearizability of a concurrent history against the kernel (CIS-HIST-2).

Theory of operation
-------------------
The search is Wing & Gong's (1993) with Lowe's memoisation (2017), as Porcupine
runs it: the operations' invocation and completion events sit in one doubly linked
list in real-time order; at each step any operation whose invocation comes before
the first outstanding completion may take effect next (it is *minimal*); the
sequential specification (:func:`._spec.apply`) says what it must have returned
there, and the search goes on only if that is what was observed. A completion
reached with its operation not yet placed means backtracking. A configuration
(the set of operations placed, the specification's state) already explored is
never explored again: that cache is what makes the search practical.

An operation with an unknown outcome has no completion event: it may take effect at
any point after its invocation, with any result, or never (as Knossos treats
``:info`` operations). The history is linearizable once every operation with a
known result has been placed. A write whose answer may be a client retry's (a
create answered ``replayed``, a cancel answered with the run, ...) may have reached
the store more than once: its earlier attempt is added as an unknown operation that
must take effect before the write does (``_spec.earlier_attempts``).

The history is split per run first (``_spec`` explains why that is sound), and each
run is searched alone, so the cost grows with the largest run's concurrency, not
with the history's length.

When a run is not linearizable, :func:`check_history` shrinks the evidence to a
*window*: the shortest prefix of the run's history that is not linearizable (its
last completion is the first one no order explains), then every operation whose
result is not needed for the contradiction is relaxed to an unknown outcome
(relaxing only removes constraints, so what remains is still a contradiction). For
each order of the remaining operations the report says where the kernel disagreed.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from attrs import frozen

from ..codec import unstructure
from ..kernel import Admission, CanonicalRecord, ErrorCode, RunState
from ._format import History, HistoryOp, Outcome, decode_history
from ._spec import EMPTY, RunModel, apply, earlier_attempts, rule_of

__all__ = [
    "HistoryReport",
    "OrderTried",
    "Violation",
    "check_history",
    "check_history_lines",
    "is_linearizable",
]

#: The requirement a non-linearizable history violates.
REQUIREMENT: Final = "CIS-HIST-2"
# Bounds on the work spent explaining a failure (the verdict itself is never bounded).
_MAX_RELAX_CHECKS: Final = 400
_MAX_ORDERS: Final = 720
_SHOWN_ORDERS: Final = 24

Reject = Callable[[tuple[int, int], int, Any], None]
_READS: Final = frozenset({"get", "get_many", "get_run", "completed", "calls"})


def _search(  # noqa: PLR0915 - one loop over a linked list; splitting it costs a call per step
    ops: Sequence[HistoryOp],
    *,
    optional: frozenset[int] = frozenset(),
    order: Sequence[int] = (),
    on_reject: Reject | None = None,
) -> bool:
    """WGL search with memoisation over ``ops`` (one run's operations, any order).

    ``optional``: indices (into ``ops``) treated as unknown outcomes. ``order``:
    indices that must take effect in this order (others are free); ``on_reject((pos,
    depth), i, expected)`` is told each time op ``i`` could not be placed as the
    ``pos``-th of ``order`` with ``depth`` operations placed, because the kernel
    expected another result.

    Each write whose answer may be a retry's gets its earlier attempt
    (:func:`._spec.earlier_attempts`): an extra operation of unknown outcome,
    invoked with it, placeable only while the create itself is not yet placed.

    Two refinements keep unknown outcomes cheap. An unknown operation is placed
    only where it changes the state: placing it as a no-op is never needed, since
    leaving it out keeps every option open. And at each step the operations with a
    known result are tried before the unknown ones, so an unknown operation is
    placed when something observed needs it, not speculatively.
    """
    events: list[tuple[int, int, int]] = []  # (line, 0 call / 1 return, op)
    known = 0
    attempts = earlier_attempts(ops, optional)
    parent_of = {len(ops) + n: i for n, i in enumerate(attempts)}
    ops = [*ops, *(ops[i] for i in attempts)]
    for i, op in enumerate(ops):
        if op.outcome is not Outcome.OK and op.name in _READS:
            continue  # an unknown read constrains nothing and changes nothing
        events.append((op.invoke_line, 0, i))
        if op.outcome is Outcome.OK and i not in optional and i not in parent_of:
            events.append((op.complete_line or 0, 1, i))
            known += 1
    if known == 0:
        return True
    events.sort()
    size = len(events)
    head = size
    nxt = [*range(1, size + 1), 0]
    nxt[size - 1] = -1
    prv = [size, *range(size - 1), -1]
    is_return = [kind for _line, kind, _i in events]
    op_of = [i for _line, _kind, i in events]
    match = [-1] * size
    where_return = {op_of[e]: e for e in range(size) if is_return[e]}
    for e in range(size):
        if not is_return[e]:
            match[e] = where_return.get(op_of[e], -1)
    rank = {i: n for n, i in enumerate(order)}
    checked = [
        op.outcome is Outcome.OK and i not in optional and i not in parent_of for i, op in enumerate(ops)
    ]

    def candidates(position: int) -> list[int] | None:
        """Call entries placeable now, known results first; None when no completion is left."""
        first: list[int] = []
        later: list[int] = []
        entry = nxt[head]
        while entry != -1 and not is_return[entry]:
            i = op_of[entry]
            parent = parent_of.get(i)
            if parent is not None and placed >> parent & 1:
                pass  # an earlier attempt takes effect before the attempt that answered
            elif i not in rank or rank[i] == position:
                (first if checked[i] else later).append(entry)
            entry = nxt[entry]
        if entry == -1:
            return None
        return first + later

    cache: set[tuple[int, RunModel]] = set()
    state: RunModel = EMPTY
    placed = 0
    depth = 0
    position = 0
    start = candidates(0)
    if start is None:
        return True
    # Frames: (candidate entries, next index, the entry placed to get here, the state before it).
    frames: list[tuple[list[int], int, int, RunModel]] = [(start, 0, -1, EMPTY)]
    while frames:
        entries, index, placed_entry, before = frames[-1]
        if index == len(entries):
            frames.pop()
            if placed_entry != -1:  # undo the placement that led here
                i = op_of[placed_entry]
                state = before
                placed &= ~(1 << i)
                depth -= 1
                if i in rank:
                    position -= 1
                if match[placed_entry] != -1:
                    relink(nxt, prv, match[placed_entry])
                relink(nxt, prv, placed_entry)
            continue
        frames[-1] = (entries, index + 1, placed_entry, before)
        entry = entries[index]
        i = op_of[entry]
        op = ops[i]
        result, after = apply(state, op)
        if checked[i]:
            if result != op.result:
                if on_reject is not None:
                    on_reject((position, depth), i, result)
                continue
        elif after == state:
            continue  # an unknown outcome placed as a no-op: leaving it out dominates
        key = (placed | (1 << i), after)
        if key in cache:
            continue
        cache.add(key)
        unlink(nxt, prv, entry)
        if match[entry] != -1:
            unlink(nxt, prv, match[entry])
        frame_before = state
        state = after
        placed |= 1 << i
        depth += 1
        if i in rank:
            position += 1
        following = candidates(position)
        if following is None:
            return True
        frames.append((following, 0, entry, frame_before))
    return False


def unlink(nxt: list[int], prv: list[int], e: int) -> None:
    """Take entry ``e`` out of the doubly linked list (its own links are kept for :func:`relink`)."""
    nxt[prv[e]] = nxt[e]
    if nxt[e] != -1:
        prv[nxt[e]] = prv[e]


def relink(nxt: list[int], prv: list[int], e: int) -> None:
    """Put entry ``e`` back where :func:`unlink` took it from (undo in reverse order)."""
    nxt[prv[e]] = e
    if nxt[e] != -1:
        prv[nxt[e]] = e


def is_linearizable(ops: Sequence[HistoryOp]) -> bool:
    """True if one run's operations are linearizable with respect to the kernel (CIS-HIST-2)."""
    return _search(ops)


@frozen(kw_only=True)
class OrderTried:
    """One order of the window's operations and why the kernel refuses it.

    ``op_ids`` in the order tried; ``failed_op`` the first that could not return
    what it returned there (None when the order breaks real time); ``expected`` the
    kernel's result for it there (JSON-ready); ``reason`` a one-line summary.
    """

    op_ids: tuple[int, ...]
    failed_op: int | None
    expected: Any
    reason: str


@frozen(kw_only=True)
class Violation:
    """A run whose history is not linearizable, with a minimal window (CIS-HIST-2).

    ``run_id``; ``first_unexplained`` the operation whose completion ends the shortest
    non-linearizable prefix; ``window`` the operations whose observed results
    together contradict the kernel (every other operation relaxed to an unknown
    outcome); ``orders`` the orders of the window tried; ``requirement`` CIS-HIST-2
    and ``rule`` the requirement of the kernel rule that disagreed.
    """

    run_id: str
    first_unexplained: HistoryOp
    window: tuple[HistoryOp, ...]
    orders: tuple[OrderTried, ...]
    orders_total: int
    requirement: str
    rule: str

    def render(self) -> str:
        """The human-readable report (payload-free: ids, codes, statuses and lines)."""
        first = self.first_unexplained
        out = [
            f"check-history: not linearizable [{self.requirement}, {self.rule}] in run {self.run_id}",
            f"  first completion no order explains: {first.describe()} (line {first.complete_line})",
            f"  window ({len(self.window)} operations whose observed results contradict the kernel):",
        ]
        out.extend(
            f"    {op.describe()}, lines {op.invoke_line}-{op.complete_line}: observed {_summary(op.result)}"
            for op in self.window
        )
        attempted = min(self.orders_total, _MAX_ORDERS)
        count = str(attempted) if attempted == self.orders_total else f"{attempted} of {self.orders_total}"
        out.append(f"  orders tried ({count}, other operations placed wherever they fit):")
        for tried in self.orders:
            sequence = ", ".join(f"op {op_id}" for op_id in tried.op_ids)
            out.append(f"    {sequence}: {tried.reason}")
        if attempted > len(self.orders):
            out.append(f"    ... {attempted - len(self.orders)} more tried, not shown")
        return "\n".join(out)

    def as_json(self) -> dict[str, Any]:
        """The verdict as one JSON-ready object (``--json``)."""
        return {
            "status": "not_linearizable",
            "requirement": self.requirement,
            "rule": self.rule,
            "run_id": self.run_id,
            "first_unexplained": self.first_unexplained.op_id,
            "window": [
                {
                    "id": op.op_id,
                    "process": op.process,
                    "op": op.name,
                    "invoke_line": op.invoke_line,
                    "complete_line": op.complete_line,
                    "observed": _summary(op.result),
                }
                for op in self.window
            ],
            "orders": [
                {"ids": list(t.op_ids), "failed": t.failed_op, "expected": t.expected, "reason": t.reason}
                for t in self.orders
            ],
            "orders_total": self.orders_total,
        }


@frozen(kw_only=True)
class HistoryReport:
    """The verdict on a history: ``violation`` is None when it is linearizable.

    ``operations`` checked, ``unknown`` of them with an unknown outcome, ``runs``
    (partitions searched), ``lines`` read.
    """

    lines: int
    operations: int
    unknown: int
    runs: int
    violation: Violation | None

    @property
    def exit_code(self) -> int:
        """0 linearizable, 1 not."""
        return 0 if self.violation is None else 1


def _summary(value: Any) -> str:
    """A payload-free summary of a store result: codes, statuses, sequence numbers, ids."""
    if value is None:
        return "null (absent)"
    if isinstance(value, ErrorCode):
        return value.value
    if isinstance(value, Admission):
        record = value.record
        replay = ", replayed" if value.replayed else ""
        return (
            f"admitted {record.tool_call_id} sequence {record.sequence}{replay} "
            f"(run: {value.run.tool_calls_used} calls, {value.run.bytes_used} bytes used)"
        )
    if isinstance(value, CanonicalRecord):
        detail = value.error_code.value if value.error_code is not None else value.evidence_status
        suffix = f"/{detail}" if detail is not None else ""
        return f"{value.tool_call_id} {value.status.value}{suffix} token {value.invocation_token}"
    if isinstance(value, RunState):
        return f"run {value.status.value} ({value.tool_calls_used} calls, {value.bytes_used} bytes used)"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{tcid}: {_summary(rec)}" for tcid, rec in value.items()) + "}"
    if isinstance(value, tuple):
        return "[" + ", ".join(value) + "]"
    return type(value).__name__


def _json(value: Any) -> Any:
    if isinstance(value, ErrorCode):
        return value.value
    if isinstance(value, dict):
        return {tcid: _json(rec) for tcid, rec in value.items()}
    if isinstance(value, tuple):
        return list(value)
    return unstructure(value) if value is not None else None


def _prefix(ops: Sequence[HistoryOp], cutoff: int) -> list[HistoryOp]:
    """The operations invoked by line ``cutoff``; later completions become unknown."""
    kept: list[HistoryOp] = []
    for op in ops:
        if op.invoke_line > cutoff:
            continue
        if op.complete_line is not None and op.complete_line > cutoff:
            op = HistoryOp(  # noqa: PLW2901 - a relaxed copy
                index=op.index,
                op_id=op.op_id,
                process=op.process,
                name=op.name,
                run_id=op.run_id,
                now_ms=op.now_ms,
                args=op.args,
                outcome=Outcome.UNKNOWN,
                result=None,
                invoke_line=op.invoke_line,
                complete_line=None,
            )
        kept.append(op)
    return kept


def _explain(run_id: str, ops: Sequence[HistoryOp]) -> Violation:
    """Shrink a non-linearizable run to a window and try its orders."""
    returns = sorted(op.complete_line for op in ops if op.complete_line is not None)
    low, high = 0, len(returns) - 1
    while low < high:  # the shortest non-linearizable prefix (prefixes of a linearizable history are)
        middle = (low + high) // 2
        if _search(_prefix(ops, returns[middle])):
            low = middle + 1
        else:
            high = middle
    cutoff = returns[low]
    prefix = _prefix(ops, cutoff)
    first = next(i for i, op in enumerate(prefix) if op.complete_line == cutoff)
    optional: set[int] = set()
    candidates = [i for i, op in enumerate(prefix) if op.outcome is Outcome.OK and i != first]
    candidates.sort(key=lambda i: -(prefix[i].complete_line or 0))
    for i in candidates[:_MAX_RELAX_CHECKS]:
        if not _search(prefix, optional=frozenset(optional | {i})):
            optional.add(i)
    frozen_optional = frozenset(optional)
    window = [i for i, op in enumerate(prefix) if op.outcome is Outcome.OK and i not in optional]
    orders: list[OrderTried] = []
    total = math.factorial(len(window))
    rules: list[str] = []
    for permutation in itertools.islice(itertools.permutations(window), _MAX_ORDERS):
        tried = _try_order(prefix, frozen_optional, permutation)
        if tried.failed_op is not None:
            failed = next(op for op in prefix if op.op_id == tried.failed_op)
            rules.append(rule_of(failed, tried.expected_value))
        if len(orders) < _SHOWN_ORDERS:
            orders.append(tried.public)
    rule = rules[0] if rules else REQUIREMENT
    return Violation(
        run_id=run_id,
        first_unexplained=prefix[first],
        window=tuple(prefix[i] for i in window),
        orders=tuple(orders),
        orders_total=total,
        requirement=REQUIREMENT,
        rule=rule,
    )


@frozen
class _Tried:
    public: OrderTried
    failed_op: int | None
    expected_value: Any


def _try_order(prefix: Sequence[HistoryOp], optional: frozenset[int], permutation: Sequence[int]) -> _Tried:
    ids = tuple(prefix[i].op_id for i in permutation)
    for a, b in itertools.combinations(permutation, 2):  # a before b in this order
        later, earlier = prefix[a], prefix[b]
        if earlier.complete_line is not None and earlier.complete_line < later.invoke_line:
            reason = f"impossible: op {earlier.op_id} returned before op {later.op_id} was invoked"
            return _Tried(OrderTried(op_ids=ids, failed_op=None, expected=None, reason=reason), None, None)
    deepest: dict[str, Any] = {"pos": (-1, -1)}

    def reject(pos: tuple[int, int], i: int, expected: Any) -> None:
        if pos > deepest["pos"]:  # the furthest into the order, then with the most placed
            deepest.update(pos=pos, op=i, expected=expected)

    _search(prefix, optional=optional, order=permutation, on_reject=reject)
    if deepest["pos"][0] < 0:
        reason = "no placement of the other operations lets this order happen"
        return _Tried(OrderTried(op_ids=ids, failed_op=None, expected=None, reason=reason), None, None)
    op = prefix[deepest["op"]]
    expected = deepest["expected"]
    reason = (
        f"op {op.op_id} {op.name}: the kernel returns {_summary(expected)}, observed {_summary(op.result)}"
    )
    public = OrderTried(op_ids=ids, failed_op=op.op_id, expected=_json(expected), reason=reason)
    return _Tried(public, op.op_id, expected)


def check_history(history: History) -> HistoryReport:
    """Decide whether ``history`` is linearizable w.r.t. the kernel, run by run (CIS-HIST-2).

    Returns a :class:`HistoryReport`; its ``violation`` explains the first run (in
    the order runs first appear) that is not linearizable.
    """
    runs: dict[str, list[HistoryOp]] = defaultdict(list)
    for op in history.ops:
        runs[op.run_id].append(op)
    unknown = sum(op.outcome is Outcome.UNKNOWN for op in history.ops)
    for run_id, ops in runs.items():
        if not _search(ops):
            violation = _explain(run_id, ops)
            return HistoryReport(
                lines=history.lines,
                operations=len(history.ops),
                unknown=unknown,
                runs=len(runs),
                violation=violation,
            )
    return HistoryReport(
        lines=history.lines, operations=len(history.ops), unknown=unknown, runs=len(runs), violation=None
    )


def check_history_lines(lines: Iterable[bytes | str]) -> HistoryReport:
    """Decode and check a history; raises ``MalformedHistoryError`` for bad input."""
    return check_history(decode_history(lines))
