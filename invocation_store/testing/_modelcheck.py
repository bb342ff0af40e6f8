"""A bounded model checker over the pure kernel: the small scope, exhaustively (CIS-HIST-4).

Theory of operation
-------------------
Sampling (the Hypothesis machines) draws some event sequences; this module visits
*every* state reachable within a depth over a small universe (a few runs, a few
tool_call_ids, budgets of 1-2, byte limits of a few bytes, a clock that moves by a
few chosen steps). A state is what a store plus its workers hold: the clock, each
run's state and completed list, each key's stored record, and each key's worker
copy (the record the worker created and the one it built from the executor's and
the projector's outcomes). The events are those of a harness: ``open``, ``admit``
(and a retried admission with the worker's own token), ``raw``, ``project``,
``fail``, ``complete`` (the worker's compare-and-set), ``sweep``, ``cancel``,
``close`` and ``tick``. Every decision is the kernel's, reached through the
``invocation_store.kernel`` module at call time, so a test can plant a fault by
replacing a kernel function; the store part does what
:class:`~invocation_store.adapters.MemoryStore` does with the kernel's answers.

The search is breadth-first with deduplication of states (records that have
lapsed are dropped, as a store drops them, so equal futures meet), so the first
violation found has a shortest event sequence. Every reachable state is checked
against the design invariants (no transition out of a terminal state, TTL never
extended, no fallback ids, byte limits without truncation, duplicates never
overwrite, agent results free of raw data, status and evidence agree, progress
facts are exactly the READY records in completion order, budgets hold).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, Final, TypeAlias

from attrs import field, frozen

from .. import kernel as K  # noqa: N812 - K: the kernel module, looked up at call time

__all__ = [
    "CI_SCOPE",
    "INVARIANTS",
    "LARGE_SCOPE",
    "Counterexample",
    "ModelCheckReport",
    "Scope",
    "model_check",
]

#: Every invariant this checker enforces, by the name its violations carry (CIS-HIST-4):
#: the design invariants 1-8, the tool-call budget and outcomes-are-values. Each has a
#: planted kernel fault that the checker finds (``tests/history/test_model_check.py``).
INVARIANTS: Final[dict[str, str]] = {
    "invariant 1": "no transition out of READY or ERROR: READY never becomes ERROR, nor the reverse",
    "invariant 2": "a record's expiry never moves later",
    "invariant 3": "every stored record's ids are those an admitted envelope supplied",
    "invariant 4": "byte limits hold for every stored field, and nothing stored is a truncation",
    "invariant 5": "duplicates never overwrite, and the executor runs at most once per key",
    "invariant 6": "agent results never contain raw data",
    "invariant 7": "READY has evidence FOUND or NO_EVIDENCE; ERROR has evidence ERROR, not referencable",
    "invariant 8": "progress facts are exactly the READY records of the run, in completion order",
    "CIS-RUN-5": "no run admits more calls than its tool-call budget",
    "CIS-KERN-2": "outcomes are values: no reachable event makes the kernel raise",
}


@frozen(kw_only=True)
class Scope:
    """The universe explored: runs x tool_call_ids, budgets, limits and clock steps (ms, bytes).

    ``depth`` bounds the number of events in a sequence; ``max_clock_ms`` bounds
    how far the clock may move from 0.
    """

    runs: int = 2
    tool_call_ids: int = 2
    budgets: tuple[int, ...] = (1, 2)
    byte_budget: int = 24
    ttl_ms: int = 3_000
    deadline_ms: int = 2_000
    ticks: tuple[int, ...] = (1_000,)
    max_clock_ms: int = 4_000
    sweep_age_ms: int = 1_000
    depth: int = 6
    limits: K.Limits = field(
        factory=lambda: K.Limits(request_bytes=8, raw_bytes=4, agent_result_bytes=6, record_bytes=24)
    )


#: The size CI runs (310,495 states: 40-55 s and 190 MB on one core of the development machine).
CI_SCOPE: Final = Scope(depth=8)
#: A larger size, on demand (``--large``, ``INVOCATION_STORE_MODEL_CHECK=large``): 1,671,329
#: states, about 130 CPU seconds and 860 MiB on the development machine.
LARGE_SCOPE: Final = Scope(depth=9, tool_call_ids=2, ticks=(1_000, 2_000))

Record: TypeAlias = K.CanonicalRecord
Worker: TypeAlias = tuple[Record, Record] | None
#: (clock, runs, records by key, workers by key, completed ids by run)
State: TypeAlias = tuple[
    int,
    tuple[K.RunState | None, ...],
    tuple[Record | None, ...],
    tuple[Worker, ...],
    tuple[tuple[str, ...], ...],
]
Event: TypeAlias = tuple[Any, ...]

_REQUEST: Final = '{"q":1}'
_RAWS: Final = ("RAW", "RAWXY")  # within raw_bytes, and over it (4 bytes)
_PROJECTIONS: Final = (
    ("EVIDENCE_FOUND", "ok", "s"),
    ("NO_EVIDENCE", "none", "logs"),
    ("MAYBE", "ok", "s"),
    ("EVIDENCE_FOUND", "toolong", "s"),
)


@frozen(kw_only=True)
class Counterexample:
    """A shortest event sequence that reaches a violation (``events``), and which invariant."""

    invariant: str
    message: str
    events: tuple[Event, ...]

    def render(self) -> str:
        """The events, one per line, then the invariant violated."""
        lines = [f"violation of {self.invariant} after {len(self.events)} events: {self.message}"]
        lines.extend(f"  {n}. {_describe(event)}" for n, event in enumerate(self.events, 1))
        return "\n".join(lines)


@frozen(kw_only=True)
class ModelCheckReport:
    """States and transitions explored, the depth reached, the time taken; a counterexample if any."""

    states: int
    transitions: int
    depth: int
    seconds: float
    counterexample: Counterexample | None

    def render(self) -> str:
        """A one-line summary, plus the counterexample."""
        head = (
            f"model-check: {self.states} states, {self.transitions} transitions, depth {self.depth}, "
            f"{self.seconds:.1f} s"
        )
        if self.counterexample is None:
            return f"{head}: every invariant holds"
        return f"{head}\n{self.counterexample.render()}"


class _InvariantError(Exception):
    def __init__(self, invariant: str, message: str) -> None:
        super().__init__(message)
        self.invariant = invariant
        self.message = message


def _describe(event: Event) -> str:
    kind = event[0]
    if kind in ("open",):
        return f"open run r{event[1]} with tool-call budget {event[2]}"
    if kind in ("admit", "retry", "fail", "complete"):
        return f"{kind} r{event[1]}/c{event[2]}"
    if kind == "raw":
        return f"raw r{event[1]}/c{event[2]}: {len(_RAWS[event[3]])} bytes"
    if kind == "project":
        evidence, content, scope = _PROJECTIONS[event[3]]
        return f"project r{event[1]}/c{event[2]}: {evidence} content {len(content)} bytes, scope {scope!r}"
    if kind in ("sweep", "cancel", "close"):
        return f"{kind} r{event[1]}"
    return f"tick +{event[1]} ms"


def _ids(scope: Scope) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return tuple(f"r{n}" for n in range(scope.runs)), tuple(f"c{n}" for n in range(scope.tool_call_ids))


def _events(scope: Scope) -> tuple[Event, ...]:
    events: list[Event] = []
    for r in range(scope.runs):
        events.extend(("open", r, budget) for budget in scope.budgets)
        for t in range(scope.tool_call_ids):
            events += [("admit", r, t), ("retry", r, t), ("fail", r, t), ("complete", r, t)]
            events.extend(("raw", r, t, n) for n in range(len(_RAWS)))
            events.extend(("project", r, t, n) for n in range(len(_PROJECTIONS)))
        events += [("sweep", r), ("cancel", r), ("close", r)]
    events.extend(("tick", step) for step in scope.ticks)
    return tuple(events)


def _normalise(state: State) -> State:
    """Drop what has lapsed (a store deletes it; it can never be read again)."""
    clock, runs, records, workers, done = state
    live_runs = tuple(K.live(run, clock) for run in runs)
    live_records = tuple(K.live(rec, clock) for rec in records)
    live_done = tuple(ids if live_runs[r] is not None else () for r, ids in enumerate(done))
    return (clock, live_runs, live_records, workers, live_done)


def _replace(items: tuple[Any, ...], index: int, value: Any) -> tuple[Any, ...]:
    return (*items[:index], value, *items[index + 1 :])


def _step(scope: Scope, state: State, event: Event) -> State | None:  # noqa: PLR0915 - one branch per event
    """The next state after ``event`` (None when the event changes nothing or is not enabled)."""
    clock, runs, records, workers, done = state
    run_ids, call_ids = _ids(scope)
    kind = event[0]
    limits = scope.limits
    if kind == "tick":
        if clock + event[1] > scope.max_clock_ms:
            return None
        return _normalise((clock + event[1], runs, records, workers, done))
    r = event[1]
    run = runs[r]
    if kind == "open":
        opened = K.open_run(
            run,
            run_id=run_ids[r],
            now_ms=clock,
            deadline_ms=scope.deadline_ms,
            ttl_ms=scope.ttl_ms,
            tool_call_budget=event[2],
            byte_budget=scope.byte_budget,
        )
        if isinstance(opened, K.ErrorCode) or opened is run:
            return None
        return (clock, _replace(runs, r, opened), records, workers, _replace(done, r, ()))
    if kind in ("cancel", "close"):
        ended = K.cancel_run(run, clock) if kind == "cancel" else K.close_run(run, clock)
        if isinstance(ended, K.ErrorCode) or ended == run:
            return None
        return (clock, _replace(runs, r, ended), records, workers, done)
    if kind == "sweep":
        new = state
        for t in range(scope.tool_call_ids):
            key = r * scope.tool_call_ids + t
            stored = records[key]
            if stored is None or stored.status is not K.InvocationStatus.PROJECTING:
                continue
            after = K.transition(stored, K.SweptStale(now_ms=clock, older_than_ms=scope.sweep_age_ms), limits)
            if isinstance(after, K.ErrorCode):
                continue
            new = _complete(scope, new, key, stored, after)
        return new if new is not state else None
    t = event[2]
    key = r * scope.tool_call_ids + t
    worker = workers[key]
    if kind in ("admit", "retry"):
        if kind == "retry":
            if worker is None:
                return None
            token = worker[0].invocation_token
        else:
            used = run.tool_calls_used if run is not None else 0
            token = f"tok-{r}-{t}-{used + 1}-{clock}"
        request = K.AdmissionRequest(
            run_id=run_ids[r],
            tool_call_id=call_ids[t],
            tool_name="tool",
            request_json=_REQUEST,
            invocation_token=token,
        )
        existing = records[key]
        admitted = K.admit(run, existing, request, limits, clock)
        _check_admission(existing, request, admitted, clock)
        if isinstance(admitted, K.ErrorCode) or admitted.replayed:
            return None
        if worker is not None:  # a fresh admission for a key whose worker is still busy: a second worker
            return None
        return (
            clock,
            _replace(runs, r, admitted.run),
            _replace(records, key, admitted.record),
            _replace(workers, key, (admitted.record, admitted.record)),
            done,
        )
    if worker is None:
        return None
    created, current = worker
    if kind == "complete":
        if not current.terminal:
            return None
        clock, runs, records, _workers, done = _complete(scope, state, key, created, current)
        return (clock, runs, records, _replace(workers, key, None), done)
    if kind == "raw":
        outcome: K.Event = K.RawReceived(raw_response=_RAWS[event[3]], now_ms=clock)
    elif kind == "project":
        evidence, content, scope_text = _PROJECTIONS[event[3]]
        outcome = K.ProjectionReceived(
            projection=K.Projection(evidence_status=evidence, content=content, scope=scope_text), now_ms=clock
        )
    else:
        outcome = K.Failed(code=K.ErrorCode.EXECUTION_FAILED, now_ms=clock)
    after = K.transition(current, outcome, limits)
    if isinstance(after, K.ErrorCode):
        if current.terminal and after is not K.ErrorCode.INVALID_TRANSITION:
            raise _InvariantError("invariant 1", f"an event on a terminal record was answered {after.value}")
        return None
    if current.terminal:
        raise _InvariantError(
            "invariant 1", f"an event moved a {current.status.value} record to {after.status.value}"
        )
    if kind == "raw" and current.raw_response is not None:
        raise _InvariantError("invariant 5", "a second executor outcome was accepted for one invocation")
    return (clock, runs, records, _replace(workers, key, (created, after)), done)


def _complete(scope: Scope, state: State, key: int, before: Record, after: Record) -> State:
    """The store's compare-and-set: the effects of :func:`decide_completion`, as MemoryStore applies them."""
    clock, runs, records, workers, done = state
    stored = records[key]
    r = key // scope.tool_call_ids
    effect = K.decide_completion(stored, before, after, runs[r], clock)
    if isinstance(effect, K.ErrorCode) or effect.action is not K.CompareAndSet.WRITE:
        return state
    if stored is not None and stored.terminal:
        raise _InvariantError("invariant 1", f"a compare-and-set overwrote a {stored.status.value} record")
    if effect.run is not None:
        runs = _replace(runs, r, effect.run)
    if effect.append_done:
        done = _replace(done, r, (*done[r], after.tool_call_id))
    return (clock, runs, _replace(records, key, effect.record), workers, done)


def _check_admission(existing: Record | None, request: K.AdmissionRequest, admitted: Any, clock: int) -> None:
    live = K.is_live(existing, clock)
    if not isinstance(admitted, K.Admission):
        return
    if live and existing is not None and existing.invocation_token != request.invocation_token:
        if not admitted.replayed:
            raise _InvariantError(
                "invariant 5", "a second invocation of a live key was admitted over the first"
            )
        raise _InvariantError("invariant 5", "another invocation's create was answered as a replay")
    if admitted.replayed and admitted.record != existing:
        raise _InvariantError("invariant 5", "a replayed create returned another record than the stored one")


def _check_state(scope: Scope, state: State) -> None:
    clock, runs, records, _workers, done = state
    run_ids, call_ids = _ids(scope)
    limits = scope.limits
    for key, record in enumerate(records):
        if record is None:
            continue
        r, t = divmod(key, scope.tool_call_ids)
        if (record.run_id, record.tool_call_id) != (run_ids[r], call_ids[t]):
            raise _InvariantError(
                "invariant 3", "a stored record carries an id no admitted envelope supplied"
            )
        if not K.is_well_formed(record):
            raise _InvariantError("invariant 7", f"a {record.status.value} record is not well formed")
        if K.record_bytes(record) > limits.record_bytes:
            raise _InvariantError("invariant 4", "a stored record exceeds the record byte limit")
        if record.raw_response is not None and record.raw_response not in _RAWS:
            raise _InvariantError("invariant 4", "a stored raw response is not one the executor returned")
        if record.raw_response is not None and len(record.raw_response) > limits.raw_bytes:
            raise _InvariantError("invariant 4", "a stored raw response exceeds the raw byte limit")
        shown = (record.agent_result or "") + (record.scope or "")
        if len(shown) > limits.agent_result_bytes:
            raise _InvariantError("invariant 4", "an agent result exceeds the agent result byte limit")
        if any(raw in shown for raw in _RAWS):
            raise _InvariantError("invariant 6", "an agent result contains raw data")
        if record.status is K.InvocationStatus.ERROR:
            citation = K.cite(record.run_id, record.tool_call_id, record, clock)
            if citation.kind is not K.CitationKind.NOT_REFERENCABLE:
                raise _InvariantError("invariant 7", "an ERROR record is referencable")
    for r, run in enumerate(runs):
        if run is None:
            continue
        if run.tool_calls_used > run.tool_call_budget:
            raise _InvariantError("CIS-RUN-5", "a run admitted more calls than its tool-call budget")
        by_id = {call_ids[t]: records[r * scope.tool_call_ids + t] for t in range(scope.tool_call_ids)}
        report = K.project_progress(run.run_id, done[r], by_id, clock, limits)
        expected = [
            tcid
            for tcid in dict.fromkeys(done[r])
            if (rec := by_id[tcid]) is not None and rec.status is K.InvocationStatus.READY
        ]
        if [fact.tool_call_id for fact in report.facts] != expected:
            raise _InvariantError(
                "invariant 8", "progress facts differ from the READY records in completion order"
            )


def _check_transition(scope: Scope, old: State, new: State) -> None:
    for worker in new[3]:
        if worker is not None and worker[1].expires_at_ms > worker[0].expires_at_ms:  # rule-check: inv 2
            raise _InvariantError("invariant 2", "a transition moved a record's expiry later")
    for before, after in zip(old[2], new[2], strict=True):
        if before is None or after is None:
            continue
        same = (
            before.invocation_token == after.invocation_token and before.created_at_ms == after.created_at_ms
        )
        if not same:
            raise _InvariantError("invariant 5", "a live record was replaced by another invocation's")
        if after.expires_at_ms > before.expires_at_ms:  # rule-check: invariant 2, a TTL never grows
            raise _InvariantError("invariant 2", "a record's expiry moved later")
        if before.terminal and after != before:
            raise _InvariantError("invariant 1", f"a {before.status.value} record changed")


def _initial(scope: Scope) -> State:
    keys = scope.runs * scope.tool_call_ids
    return (0, (None,) * scope.runs, (None,) * keys, (None,) * keys, ((),) * scope.runs)


def model_check(
    scope: Scope = CI_SCOPE, *, progress: Callable[[int, int], None] | None = None
) -> ModelCheckReport:
    """Explore every state reachable within ``scope.depth`` events, breadth first (CIS-HIST-4, CIS-KERN-2).

    Checks the invariants in every state and on every transition; stops at the
    first violation, whose :class:`Counterexample` is a shortest sequence reaching
    it. ``progress(depth, states)`` is called after each level.
    """
    started = time.perf_counter()
    events = _events(scope)
    initial = _initial(scope)
    parents: dict[State, tuple[State, Event] | None] = {initial: None}
    frontier: deque[State] = deque([initial])
    transitions = 0
    depth = 0

    def path(state: State) -> Iterator[Event]:
        trail: list[Event] = []
        link = parents[state]
        while link is not None:
            state, event = link
            trail.append(event)
            link = parents[state]
        return reversed(trail)

    def report(counterexample: Counterexample | None) -> ModelCheckReport:
        return ModelCheckReport(
            states=len(parents),
            transitions=transitions,
            depth=depth,
            seconds=time.perf_counter() - started,
            counterexample=counterexample,
        )

    try:
        _check_state(scope, initial)
    except _InvariantError as violation:
        return report(Counterexample(invariant=violation.invariant, message=violation.message, events=()))
    while frontier and depth < scope.depth:
        depth += 1
        next_frontier: deque[State] = deque()
        for state in frontier:
            for event in events:
                try:
                    try:
                        new = _step(scope, state, event)
                    except (ValueError, TypeError, KeyError, AssertionError) as exc:
                        # Outcomes are values: no reachable event may make the kernel raise.
                        raised = f"the kernel raised {type(exc).__name__}"
                        raise _InvariantError("CIS-KERN-2", raised) from None
                    if new is None:
                        continue
                    transitions += 1
                    _check_transition(scope, state, new)
                    if new in parents:
                        continue
                    _check_state(scope, new)
                except _InvariantError as violation:
                    trail = (*path(state), event)
                    return report(
                        Counterexample(invariant=violation.invariant, message=violation.message, events=trail)
                    )
                parents[new] = (state, event)
                next_frontier.append(new)
        frontier = next_frontier
        if progress is not None:
            progress(depth, len(parents))
    return report(None)
