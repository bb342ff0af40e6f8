"""The kernel's invariants the linearizability search prunes with (CIS-HIST-2).

Theory of operation
-------------------
Two facts about the kernel bound what a placement of operations can still explain,
whatever the operations of unknown outcome did:

- *Run usage only grows* (:class:`UsageBounds`). A run's ``tool_calls_used`` and
  ``bytes_used`` change only by an operation adding exactly its
  :func:`._spec.growth` (an admission one call and the request's UTF-8 bytes, a
  completion its charge) or nothing, and only an ``open_run`` on a lapsed or absent
  run starts them again at 0 (CIS-RUN-1, CIS-RUN-5, CIS-RUN-6). An answer that pins
  the usage just before it (:func:`._spec.pinned_usage`) needs a subset of the
  growths of the operations invoked before it returned to add up to it; two such
  answers must fit one order; and once the usage has passed it, or can no longer
  reach it with what is left, it is impossible.
- *A record stays until it expires* (:class:`KeyClaims`). No operation removes a
  record (a completion or a sweep rewrites it in place), and a create answered with a
  fresh admission needs its key empty (CIS-ID-5): once a record live at its time is
  under its key it is impossible, and two whose records each outlive the other's time
  fit in no order.

:mod:`._search` asks both before a search and after each placement; each answer it
refutes comes with the usage or record that rules it out, so that an explanation
can say what the kernel answers there and why (``why``).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Final

from ..kernel import CanonicalRecord, RunState, is_live
from ._format import HistoryOp
from ._spec import NO_USAGE, RunModel, Usage, fresh_claim, growth, observed_run, pinned_usage, usage_of

__all__ = ["MAX_PINNED_PAIRS", "MAX_SUBSET_BYTES", "MAX_SUBSET_CALLS", "KeyClaims", "UsageBounds"]

#: The most operations with a pinned run usage whose pairs are compared before a search.
MAX_PINNED_PAIRS: Final = 128
#: The largest byte count whose reachability (a subset-sum) is decided before a search.
MAX_SUBSET_BYTES: Final = 1 << 16
#: The most calls counted with the bytes in that subset-sum (beyond, bytes alone).
MAX_SUBSET_CALLS: Final = 256


class KeyClaims:
    """Fresh admissions of one key (:func:`._spec.fresh_claim`): each needs the key empty.

    A record stays live until its expiry, so once a create has written one under a key,
    a fresh admission of that key not yet placed whose ``now_ms`` is before that expiry
    is impossible; and two fresh admissions whose records each outlive the other's
    ``now_ms`` fit in no order.
    """

    def __init__(self, ops: Sequence[HistoryOp], checked: Sequence[bool]) -> None:
        self.ops = ops
        self.by_key: dict[str, list[tuple[int, CanonicalRecord]]] = {}
        for i, op in enumerate(ops):
            record = fresh_claim(op) if checked[i] else None
            if record is not None:
                self.by_key.setdefault(record.tool_call_id, []).append((i, record))

    def _may_precede(
        self, x: tuple[int, CanonicalRecord], y: tuple[int, CanonicalRecord], rank: dict[int, int]
    ) -> bool:
        ops = self.ops
        (xi, x_record), (yi, _y_record) = x, y
        if (ops[yi].complete_line or 0) < ops[xi].invoke_line:
            return False
        if xi in rank and yi in rank and rank[xi] > rank[yi]:
            return False
        return not is_live(x_record, ops[yi].now_ms)

    def refuted_at_start(self, rank: dict[int, int]) -> tuple[int, int] | None:
        """Two fresh admissions of one key that fit in no order: (the earlier, the later), or None."""
        for claims in self.by_key.values():
            for a, first in enumerate(claims):
                for second in claims[a + 1 :]:
                    if self._may_precede(first, second, rank) or self._may_precede(second, first, rank):
                        continue
                    if rank.get(first[0], -1) > rank.get(second[0], -1):
                        return second[0], first[0]
                    return first[0], second[0]
        return None

    def dead(self, state: RunModel, key: str, placed: int) -> int | None:
        """A fresh admission of ``key`` not yet placed that the live record ``state`` holds rules out."""
        stored = next((record for tcid, record in state[1] if tcid == key), None)
        if stored is None:
            return None
        for i, _record in self.by_key.get(key, ()):
            if not placed >> i & 1 and is_live(stored, self.ops[i].now_ms):
                return i
        return None


def _usage_text(usage: Usage) -> str:
    return f"{usage.calls} calls, {usage.bytes} bytes used"


def _growth_text(usage: Usage) -> str:
    return f"{usage.calls} calls and {usage.bytes} bytes"


def _nearest_below(reach: list[int], need: Usage, joint: bool) -> Usage:
    """The reachable usage nearest below ``need``: the most calls up to its, then the most bytes."""
    top = min(need.calls, len(reach) - 1) if joint else 0
    below_bytes = (1 << need.bytes) - 1
    for calls in range(top, -1, -1):
        bits = reach[calls] & (below_bytes | (1 << need.bytes if calls < need.calls else 0))
        if bits:
            return Usage(calls if joint else need.calls, bits.bit_length() - 1)
    return NO_USAGE


class UsageBounds:
    """The run-usage invariants of one search (Lowe's and Porcupine's pruning with the kernel's counting).

    A run's usage (calls, bytes) only grows, each operation adding exactly its
    :func:`._spec.growth` or nothing, except that an ``open_run`` may start a fresh run
    at :data:`._spec.NO_USAGE`. An answer that pins the usage before it
    (:func:`._spec.pinned_usage`) is then impossible where the usage already passed it
    (no open still to place) or where everything left to place cannot bring it there;
    and two such answers that fit in neither order contradict each other.
    ``left`` is the growth of the operations not yet placed.
    """

    def __init__(self, ops: Sequence[HistoryOp], in_events: set[int], checked: Sequence[bool]) -> None:
        self.ops = ops
        self.checked = checked
        self.grow = [growth(op) if i in in_events else NO_USAGE for i, op in enumerate(ops)]
        self.pins = [
            (i, pin[0], pin[1])
            for i, op in enumerate(ops)
            if checked[i] and i in in_events and (pin := pinned_usage(op)) is not None
        ]
        self.pins_by_op = {i: (need, after) for i, need, after in self.pins}
        self.events = sorted(in_events, key=lambda i: ops[i].invoke_line)
        self.opens = [i for i in self.events if ops[i].name == "open_run"]
        self.left_calls = sum(g.calls for g in self.grow)
        self.left_bytes = sum(g.bytes for g in self.grow)

    def take(self, i: int) -> None:
        """Op ``i`` is placed: its growth is no longer to come."""
        self.left_calls -= self.grow[i].calls
        self.left_bytes -= self.grow[i].bytes

    def give(self, i: int) -> None:
        """Undo :meth:`take`."""
        self.left_calls += self.grow[i].calls
        self.left_bytes += self.grow[i].bytes

    def refuted_at_start(self, rank: dict[int, int]) -> tuple[int, Usage, tuple[int, int], str] | None:
        """An answer no placement gives, by usage alone: (its op, the nearest usage, position, why), or None.

        First each pinned answer against the most the operations invoked before it
        returned can add (from a run at :data:`._spec.NO_USAGE`), then against the byte
        counts they can add at all (:meth:`_unreachable_bytes`); then each pair of pinned
        answers (at most :data:`MAX_PINNED_PAIRS` of them) in both orders.
        """
        ops, grow = self.ops, self.grow
        lines = [ops[i].invoke_line for i in self.events]
        sums = [NO_USAGE]
        for i in self.events:
            sums.append(Usage(sums[-1].calls + grow[i].calls, sums[-1].bytes + grow[i].bytes))
        for x, need, _after in self.pins:
            reach = sums[bisect.bisect_left(lines, ops[x].complete_line or 0)]
            most = Usage(reach.calls - grow[x].calls, reach.bytes - grow[x].bytes)
            if need.calls > most.calls or need.bytes > most.bytes:
                nearest = Usage(min(need.calls, most.calls), min(need.bytes, most.bytes))
                why = (
                    f"its answer needs {_usage_text(need)} before it, but the operations invoked "
                    f"before it returned add at most {_growth_text(most)} to a run"
                )
                return x, nearest, (rank.get(x, 0), rank.get(x, 0)), why
        unreachable = self._unreachable()
        if unreachable is not None:
            x, below = unreachable
            need = self.pins_by_op[x][0]
            why = (
                f"its answer needs {_usage_text(need)} before it, but the operations invoked before it "
                f"returned each add their own calls and bytes or nothing, and no set of them adds "
                f"{_growth_text(need)} (the nearest below: {_growth_text(below)})"
            )
            return x, below, (rank.get(x, 0), rank.get(x, 0)), why
        if len(self.pins) > MAX_PINNED_PAIRS:
            return None
        for a, first in enumerate(self.pins):
            for second in self.pins[a + 1 :]:
                if self._may_precede(first, second, rank) or self._may_precede(second, first, rank):
                    continue
                earlier, later = first, second
                if rank.get(first[0], -1) > rank.get(second[0], -1):
                    earlier, later = second, first
                others = self._others(earlier[0], later[0])
                low = earlier[2]
                need = later[1]
                nearest = Usage(
                    min(max(need.calls, low.calls), low.calls + others.calls),
                    min(max(need.bytes, low.bytes), low.bytes + others.bytes),
                )
                why = (
                    f"its answer needs {_usage_text(need)} before it; after op {ops[earlier[0]].op_id} "
                    f"the run holds {_usage_text(low)}, and usage only grows, "
                    f"by at most {_growth_text(others)} more"
                )
                return later[0], nearest, (rank.get(later[0], 1), rank.get(later[0], 1)), why
        return None

    def _unreachable(self) -> tuple[int, Usage] | None:
        """A pinned answer whose usage before it no set of growths gives: (its op, the nearest usage below).

        The run's usage at any point is the sum of the growths of some operations
        placed since its open, each invoked before that point: a subset-sum of the
        growths of the operations invoked before the answer returned (its own included,
        which only adds sums). One pass in invocation order over bitsets of the byte
        counts reachable with each number of calls, for usages up to
        :data:`MAX_SUBSET_BYTES` bytes (the calls counted only up to
        :data:`MAX_SUBSET_CALLS`).
        """
        wanted = sorted(
            (self.ops[x].complete_line or 0, x, need)
            for x, need, _after in self.pins
            if need != NO_USAGE and need.bytes <= MAX_SUBSET_BYTES
        )
        if not wanted:
            return None
        mask = (1 << (max(need.bytes for _line, _x, need in wanted) + 1)) - 1
        most_calls = max(need.calls for _line, _x, need in wanted)
        joint = most_calls <= MAX_SUBSET_CALLS
        reach = [0] * (most_calls + 1 if joint else 1)
        reach[0] = 1
        events = iter(self.events)
        pending = next(events, None)
        for line, x, need in wanted:
            while pending is not None and self.ops[pending].invoke_line < line:
                self._add(reach, self.grow[pending], mask, joint)
                pending = next(events, None)
            if not reach[need.calls if joint else 0] >> need.bytes & 1:
                return x, _nearest_below(reach, need, joint)
        return None

    @staticmethod
    def _add(reach: list[int], grow: Usage, mask: int, joint: bool) -> None:
        """Add one operation's growth (taken or not) to the reachable usages ``reach``."""
        if grow == NO_USAGE:
            return
        if joint and grow.calls:
            for calls in range(len(reach) - 1 - grow.calls, -1, -1):  # downwards: each growth taken once
                if reach[calls]:
                    reach[calls + grow.calls] |= (reach[calls] << grow.bytes) & mask
        else:
            for calls, bits in enumerate(reach):
                if bits:
                    reach[calls] = bits | (bits << grow.bytes) & mask

    def _others(self, x: int, y: int) -> Usage:
        grow = self.grow
        return Usage(
            self.left_calls - grow[x].calls - grow[y].calls, self.left_bytes - grow[x].bytes - grow[y].bytes
        )

    def _may_precede(
        self, x: tuple[int, Usage, Usage], y: tuple[int, Usage, Usage], rank: dict[int, int]
    ) -> bool:
        """Whether pinned answer ``x`` may take effect before pinned ``y``: by real time, order and usage."""
        ops = self.ops
        xi, _x_need, x_after = x
        yi, y_need, _y_after = y
        if (ops[yi].complete_line or 0) < ops[xi].invoke_line:
            return False  # y returned before x was invoked
        if xi in rank and yi in rank and rank[xi] > rank[yi]:
            return False
        first_invoke = min(ops[xi].invoke_line, ops[yi].invoke_line)
        seen: RunState | None = observed_run(ops[xi])
        for o in self.opens:  # a fresh run may start between them: usage says nothing
            before_both = self.checked[o] and (ops[o].complete_line or 0) < first_invoke
            if not before_both and (seen is None or not is_live(seen, ops[o].now_ms)):
                return True
        others = self._others(xi, yi)
        return (
            x_after.calls <= y_need.calls <= x_after.calls + others.calls
            and x_after.bytes <= y_need.bytes <= x_after.bytes + others.bytes
        )

    def may_restart(self, state: RunModel, placed: int) -> bool:
        """Whether an ``open_run`` not yet placed may start a fresh run after ``state``.

        Only where the run ``state`` holds has lapsed by the open's ``now_ms`` (or
        there is none): an open on a live run answers it or INVALID_TRANSITION.
        """
        run = state[0]
        for o in self.opens:
            if not placed >> o & 1 and (run is None or not is_live(run, self.ops[o].now_ms)):
                return True
        return False

    def dead(self, state: RunModel, placed: int) -> tuple[int, Usage, str] | None:
        """A pinned answer not placed that ``state`` rules out: (its op, the nearest usage, why), or None."""
        usage = usage_of(state)
        low = NO_USAGE if self.may_restart(state, placed) else usage
        for x, need, _after in self.pins:
            if placed >> x & 1:
                continue
            grow = self.grow[x]
            most = Usage(
                usage.calls + self.left_calls - grow.calls, usage.bytes + self.left_bytes - grow.bytes
            )
            if (
                need.calls < low.calls
                or need.bytes < low.bytes
                or need.calls > most.calls
                or need.bytes > most.bytes
            ):
                if need.calls < low.calls or need.bytes < low.bytes:
                    why = (
                        f"its answer needs {_usage_text(need)} before it; the run already holds "
                        f"{_usage_text(usage)} here, and usage only grows"
                    )
                else:
                    why = (
                        f"its answer needs {_usage_text(need)} before it; the run holds {_usage_text(usage)} "
                        f"here, and everything left to place brings it to at most {_usage_text(most)}"
                    )
                return (
                    x,
                    Usage(
                        min(max(need.calls, low.calls), most.calls),
                        min(max(need.bytes, low.bytes), most.bytes),
                    ),
                    why,
                )
        return None
