"""The bounded linearizability search: Wing & Gong with Lowe's memoisation, pruned (CIS-HIST-2).

Theory of operation
-------------------
The operations' invocation and completion events sit in one doubly linked list in
real-time order; at each step any operation whose invocation comes before the first
outstanding completion may take effect next (it is *minimal*); the sequential
specification (:func:`._spec.apply`) says what it must have returned there, and the
search goes on only if that is what was observed. A completion reached with its
operation not yet placed means backtracking. A configuration (the operations placed,
the specification's state) already explored is never explored again (Lowe 2017, as
Porcupine runs it).

Seven refinements keep the hard cases cheap, each sound:

- *Unobserved state is not kept.* The run's completed and admitted id lists are read
  only by ``completed`` and ``calls``; when no such read has a known result, they are
  left out of the state, so completions that commute reach one state whatever their
  order.
- *Frozen results are judged at once.* A completion's or a read's result depends on
  its call's record alone (:func:`._spec.reads_of`). Once no operation that could
  write that record is left to place (:func:`._spec.writes_of`), the result is fixed:
  if it is not what was observed, no extension of the current placement can succeed,
  and the branch is cut there (the kernel's invariant that only creates and
  completions of a key write its record).
- *Lists only grow.* A known answer of ``completed`` or ``calls`` not yet placed
  must extend the run's current list (nothing removes from it but a fresh run,
  which an open still to be placed could start): a placement that breaks this is
  cut.
- *Impossible results end the search.* A create's answer determines the state
  before it (:func:`._spec.impossible`); the first time a create is refused its
  answer, the kernel is asked in that state, and if it answers otherwise there, no
  order explains it.
- *Known results first.* Operations of unknown outcome are placed only where they
  change the state, and after the known ones had their turn.
- *Run usage only grows* (:class:`._invariants.UsageBounds`, where a create or completion has an
  unknown outcome). Each operation adds exactly its :func:`._spec.growth` to the
  run's usage or nothing, and only an open on a lapsed run starts it again; an answer
  pinning the usage before it (:func:`._spec.pinned_usage`) is refuted before the
  search when no subset of the growths of what was invoked before it returned gives
  it, or when it and another fit in neither order, and during the search once the
  usage passed it or cannot reach it with what is left.
- *A record stays until it expires* (:class:`._invariants.KeyClaims`). A fresh admission needs
  its key empty: two whose records each outlive the other's time fit in no order,
  and one not yet placed is refuted once a record live at its time is under its key.

Every search runs under a :class:`Meter`: at most ``max_states`` configurations held
(the memory bound) and a CPU-time deadline shared by everything one check does. On
either limit it raises :class:`BudgetExhausted`, carrying the operations it could not
place at the deepest point it reached: the window it could not decide.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Final

from attrs import field, frozen

from ._format import HistoryOp, Outcome
from ._invariants import KeyClaims, UsageBounds
from ._spec import (
    EMPTY,
    NO_USAGE,
    RunModel,
    after_witness,
    answer_at,
    apply,
    earlier_attempts,
    impossible,
    reads_of,
    writes_of,
)

__all__ = ["DEFAULT_BUDGET", "Budget", "BudgetExhausted", "Meter", "search"]

#: ``on_reject((position, depth), op, expected, why)``: ``why`` is "" when the kernel
#: answered ``expected`` in the state reached, else what rules the answer out there.
Reject = Callable[[tuple[int, int], int, Any, str], None]
_READS: Final = frozenset({"get", "get_many", "get_run", "completed", "calls"})
#: The operations that may add to a run's usage (:func:`._spec.growth`).
_GROWING: Final = frozenset({"create", "complete"})
#: How many loop turns between two looks at the CPU clock.
_CLOCK_EVERY: Final = 256


def _positive(_instance: object, attribute: Any, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ValueError(f"{attribute.name} must be a positive number")


@frozen(kw_only=True)
class Budget:
    """What one ``check-history`` may spend: ``max_states`` and ``max_seconds`` (CIS-HIST-2).

    - ``max_states``: the most configurations (operations placed, state) one search
      holds at once, so memory is bounded by it (about 1.5 KiB each for a run of 16
      concurrent calls, 5 KiB for 64; ``benchmarks/bench_history.py`` measures it).
      Default 100,000.
    - ``max_seconds``: the CPU seconds the whole check may spend, verdicts and
      explanations of every run together. Default 10.

    Raises ``ValueError`` for a value that is not a positive number.
    """

    max_states: int = field(default=100_000, validator=_positive)
    max_seconds: float = field(default=10.0, validator=_positive)


#: The documented defaults (``spec/history.md`` section 4).
DEFAULT_BUDGET: Final = Budget()


class BudgetExhausted(Exception):  # noqa: N818 - a domain outcome of the search, not an error
    """A search reached its budget: ``limit`` is ``"states"`` or ``"seconds"``.

    ``unplaced`` are the indices (into the operations searched) of the operations
    with a known result not yet placed at the deepest point the search reached;
    ``placed`` how many were placed there; ``states`` the configurations explored.
    """

    def __init__(self, limit: str, unplaced: tuple[int, ...], placed: int, states: int) -> None:
        super().__init__(limit)
        self.limit = limit
        self.unplaced = unplaced
        self.placed = placed
        self.states = states


class Meter:
    """The budget of one check, shared by its searches: a CPU deadline and a per-search state cap.

    ``states`` counts the configurations every search under it explored. :meth:`child`
    gives a meter with the same deadline and a smaller cap (the explanation's searches).
    """

    def __init__(self, budget: Budget = DEFAULT_BUDGET) -> None:
        self.budget = budget
        self.max_states = budget.max_states
        self.deadline = time.process_time() + budget.max_seconds
        self.states = 0
        self._parent: Meter | None = None

    def out_of_time(self) -> bool:
        """True once the CPU deadline has passed."""
        return time.process_time() > self.deadline

    def child(self, max_states: int) -> Meter:
        """A meter with this one's deadline and a cap of ``max_states`` (at most this one's)."""
        meter = Meter(self.budget)
        meter.deadline = self.deadline
        meter.max_states = min(max_states, self.max_states)
        meter._parent = self
        return meter

    def count(self) -> None:
        """One more configuration explored (here and in every meter above)."""
        meter: Meter | None = self
        while meter is not None:
            meter.states += 1
            meter = meter._parent


class _Deepest:
    """The deepest placement a search reached (for the undecided window)."""

    def __init__(self) -> None:
        self.depth = -1
        self.placed = 0

    def note(self, depth: int, placed: int) -> None:
        if depth > self.depth:
            self.depth, self.placed = depth, placed


def _linked(ops: Sequence[HistoryOp], checked: Sequence[bool]) -> tuple[list[tuple[int, int, int]], int]:
    """Events ``(line, 0 call / 1 return, op)`` in real-time order, and how many results are known."""
    events: list[tuple[int, int, int]] = []
    known = 0
    for i, op in enumerate(ops):
        if op.outcome is not Outcome.OK and op.name in _READS:
            continue  # an unknown read constrains nothing and changes nothing
        events.append((op.invoke_line, 0, i))
        if checked[i]:
            events.append((op.complete_line or 0, 1, i))
            known += 1
    events.sort()
    return events, known


def search(  # noqa: PLR0915 - one loop over a linked list; splitting it costs a call per step
    ops: Sequence[HistoryOp],
    meter: Meter,
    *,
    optional: frozenset[int] = frozenset(),
    order: Sequence[int] = (),
    on_reject: Reject | None = None,
) -> bool:
    """True if ``ops`` (one run's operations, or one key's) are linearizable; raises :class:`BudgetExhausted`.

    ``optional``: indices treated as unknown outcomes. ``order``: indices that must
    take effect in this order (others are free); ``on_reject((pos, depth), i,
    expected)`` is told each time op ``i`` could not be placed as the ``pos``-th of
    ``order`` with ``depth`` operations placed, because the kernel expected another
    result. Each write whose answer may be a retry's gets its earlier attempt
    (:func:`._spec.earlier_attempts`): an extra operation of unknown outcome, invoked
    with it, placeable only while the write itself is not yet placed.
    """
    attempts = earlier_attempts(ops, optional)
    parent_of = {len(ops) + n: i for n, i in enumerate(attempts)}
    original = len(ops)
    ops = [*ops, *(ops[i] for i in attempts)]
    checked = [
        op.outcome is Outcome.OK and i not in optional and i not in parent_of for i, op in enumerate(ops)
    ]
    events, known = _linked(ops, checked)
    if known == 0:
        return True
    track_done = any(checked[i] and op.name == "completed" for i, op in enumerate(ops))
    track_calls = any(checked[i] and op.name == "calls" for i, op in enumerate(ops))

    def step(state: RunModel, op: HistoryOp) -> tuple[Any, RunModel]:
        result, after = apply(state, op)
        if not (track_done and track_calls):
            after = (after[0], after[1], after[2] if track_done else (), after[3] if track_calls else ())
        return result, after

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
    in_events = {op_of[e] for e in range(size)}

    # Frozen-result pruning: who may still write each key, and who reads it alone.
    writes = [writes_of(op, checked[i]) if i in in_events else () for i, op in enumerate(ops)]
    reads = [reads_of(op) if checked[i] else None for i, op in enumerate(ops)]
    pending: dict[str, int] = {}
    for keys in writes:
        for key in keys:
            pending[key] = pending.get(key, 0) + 1
    readers: dict[str, list[int]] = {}
    for i, read_keys in enumerate(reads):
        for key in read_keys or ():
            readers.setdefault(key, []).append(i)
    # The usage invariants prune what operations of unknown outcome leave open; where
    # every create and completion has a known result, each placement is checked
    # directly and they are not needed.
    unknown_writes = any(not checked[i] and ops[i].name in _GROWING for i in in_events)
    usage = UsageBounds(ops, in_events, checked) if unknown_writes else None
    claims = KeyClaims(ops, checked) if unknown_writes else None
    if claims is not None and not claims.by_key:
        claims = None

    # Append-only lists: a known non-empty answer of ``completed`` (done, slot 2) or
    # ``calls`` (slot 3) not yet placed must extend the current list, unless a run open
    # (which starts fresh lists) is still to be placed.
    lists = [
        (i, 2 if op.name == "completed" else 3, op.result)
        for i, op in enumerate(ops)
        if checked[i] and op.name in ("completed", "calls") and op.result
    ]
    opens = sum(1 for i in in_events if ops[i].name == "open_run")

    def rejected(i: int, expected: Any, placed_more: int, why: str = "") -> None:
        """Tell ``on_reject`` that op ``i`` is refused ``expected``, just past the current placement."""
        if on_reject is not None:
            on_reject((position + placed_more, depth + placed_more), i, expected, why)

    def grown_past(state: RunModel, placed_now: int) -> bool:
        """True if an unplaced list read's answer no longer extends the current list."""
        if opens:
            return False
        for r, slot, answer in lists:
            if not placed_now >> r & 1:
                current: tuple[str, ...] = state[2] if slot == 2 else state[3]
                if len(current) > len(answer) or answer[: len(current)] != current:
                    rejected(r, current, 1)
                    return True
        return False

    def dead(state: RunModel, keys: Sequence[str], placed_now: int) -> bool:
        """True if an unplaced reader of ``keys`` has a frozen result other than the one observed."""
        for key in keys:
            for r in readers.get(key, ()):
                if placed_now >> r & 1:
                    continue
                own = writes[r]
                keys_r = reads[r] or ()
                if all(pending.get(k, 0) - (k in own) == 0 for k in keys_r):
                    answer = step(state, ops[r])[0]
                    if answer != ops[r].result:
                        rejected(r, answer, 1 if placed_now else 0)
                        return True
        return False

    def usage_dead(i: int, after: RunModel, placed_now: int) -> bool:
        """True if, with op ``i`` placed giving ``after``, the run's usage rules out a pinned answer."""
        assert usage is not None
        if usage.grow[i] == NO_USAGE and after[0] is state[0]:
            return False  # neither the usage nor what is left to add changed
        found = usage.dead(after, placed_now)
        if found is None:
            return False
        if on_reject is not None:
            answer = answer_at(ops[found[0]], found[1])
            if answer is not None:
                rejected(found[0], answer, 1, found[2])
        return True

    def claim_dead(i: int, after: RunModel, placed_now: int) -> bool:
        """True if the record create ``i`` left rules out a fresh admission of its key not yet placed."""
        assert claims is not None
        if after[1] is state[1]:
            return False  # it wrote nothing
        found = claims.dead(after, ops[i].args[0].tool_call_id, placed_now)
        if found is None:
            return False
        if on_reject is not None:
            rejected(found, step(after, ops[found])[0], 1, "a record stays under its key until it expires")
        return True

    deepest = _Deepest()
    placed = 0

    def exhausted(limit: str) -> BudgetExhausted:
        unplaced = tuple(i for i in range(original) if checked[i] and not deepest.placed >> i & 1)
        return BudgetExhausted(limit, unplaced, max(deepest.depth, 0), len(cache))

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
    depth = 0
    position = 0
    witnessed: set[int] = set()  # creates whose answer was tried against its witness state
    if dead(state, list(readers), 0):
        return False
    if claims is not None:
        pair = claims.refuted_at_start(rank)
        if pair is not None:
            earlier, later = pair
            witness = after_witness(ops[earlier])
            if on_reject is not None and witness is not None:
                why = (
                    f"op {ops[earlier].op_id} left a record under its key, live until "
                    f"{ops[earlier].result.record.expires_at_ms}, and a record stays until it expires"
                )
                where = (rank.get(later, 1), rank.get(later, 1))
                on_reject(where, later, step(witness, ops[later])[0], why)
            return False
    if usage is not None and usage.pins:
        refuted = usage.refuted_at_start(rank)
        if refuted is not None:
            x, nearest, where, why = refuted
            answer = answer_at(ops[x], nearest) if on_reject is not None else None
            if on_reject is not None and answer is not None:
                on_reject(where, x, answer, why)
            return False
    start = candidates(0)
    if start is None:
        return True
    # Frames: (candidate entries, next index, the entry placed to get here, the state before it).
    frames: list[tuple[list[int], int, int, RunModel]] = [(start, 0, -1, EMPTY)]
    turns = 0
    while frames:
        turns += 1
        if turns % _CLOCK_EVERY == 0 and meter.out_of_time():
            raise exhausted("seconds")
        entries, index, placed_entry, before = frames[-1]
        if index == len(entries):
            frames.pop()
            if placed_entry != -1:  # undo the placement that led here
                i = op_of[placed_entry]
                state = before
                placed &= ~(1 << i)
                depth -= 1
                for key in writes[i]:
                    pending[key] += 1
                if ops[i].name == "open_run":
                    opens += 1
                if usage is not None:
                    usage.give(i)
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
        result, after = step(state, op)
        if checked[i]:
            if result != op.result:
                if on_reject is not None:
                    on_reject((position, depth), i, result, "")
                if op.name == "create" and i not in witnessed:
                    witnessed.add(i)
                    answer = impossible(op)
                    if answer is not None:  # a result no state gives (the create's witness state)
                        rejected(i, answer, 0)
                        return False
                continue
        elif after == state:
            continue  # an unknown outcome placed as a no-op: leaving it out dominates
        key_after = (placed | (1 << i), after)
        if key_after in cache:
            continue
        if op.name == "open_run":
            opens -= 1
        for key in writes[i]:
            pending[key] -= 1
        if usage is not None:
            usage.take(i)
        if (
            (writes[i] and dead(after, writes[i], placed | (1 << i)))
            or (lists and grown_past(after, placed | (1 << i)))
            or (usage is not None and usage.pins and usage_dead(i, after, placed | (1 << i)))
            or (claims is not None and op.name == "create" and claim_dead(i, after, placed | (1 << i)))
        ):
            for key in writes[i]:
                pending[key] += 1
            if op.name == "open_run":
                opens += 1
            if usage is not None:
                usage.give(i)
            continue
        cache.add(key_after)
        meter.count()
        if len(cache) > meter.max_states:
            raise exhausted("states")
        unlink(nxt, prv, entry)
        if match[entry] != -1:
            unlink(nxt, prv, match[entry])
        frame_before = state
        state = after
        placed |= 1 << i
        depth += 1
        deepest.note(depth, placed)
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
