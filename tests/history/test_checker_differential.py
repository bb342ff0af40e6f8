"""The WGL search agrees with brute force on small random histories (CIS-HIST-2).

Brute force: every subset of the unknown operations, every order of the chosen
operations that respects real time, run through the same sequential
specification. Histories are small (up to six operations on one run, two keys,
budget 1-2), their observed results come from some random order (so about half of
them are linearizable), and some operations have unknown outcomes.
"""

from __future__ import annotations

import itertools
from typing import Any

import attrs
from hypothesis import event, given, settings
from hypothesis import strategies as st

from invocation_store.history import Budget, HistoryOp, Outcome, _checker, is_linearizable
from invocation_store.history._search import Meter
from invocation_store.history._spec import EMPTY, RunModel, apply
from invocation_store.kernel import (
    AdmissionRequest,
    Begin,
    CanonicalRecord,
    Projection,
    ProjectionReceived,
    RawReceived,
    transition,
)

from ._build import LIMITS, T0, open_args

_OPEN = {key: value for key, value in open_args().items() if key != "run_id"}


def _op(index: int, name: str, args: Any) -> HistoryOp:
    return HistoryOp(
        index=index,
        op_id=index,
        process=index,
        name=name,
        run_id="run-1",
        now_ms=T0,
        args=args,
        outcome=Outcome.OK,
        result=None,
        invoke_line=0,
        complete_line=None,
    )


@st.composite
def histories(draw: st.DrawFn) -> list[HistoryOp]:
    budget = draw(st.integers(1, 2))
    ops = [_op(0, "open_run", {**_OPEN, "tool_call_budget": budget})]
    for index in range(1, draw(st.integers(1, 5)) + 1):
        kind = draw(st.sampled_from(["create", "create", "get", "calls"]))
        key = draw(st.sampled_from(["call_a", "call_b"]))
        if kind == "create":
            request = AdmissionRequest(
                run_id="run-1",
                tool_call_id=key,
                tool_name="t",
                request_json="{}",
                invocation_token=f"t{index}",
            )
            ops.append(_op(index, "create", (request, LIMITS)))
        elif kind == "get":
            ops.append(_op(index, "get", {"tool_call_id": key}))
        else:
            ops.append(_op(index, "calls", {}))
    # Observed results: what some order (the open first) returns.
    order = [0, *draw(st.permutations(range(1, len(ops))))]
    state: RunModel = EMPTY
    for i in order:
        ops[i].result, state = apply(state, ops[i])
    unknown = {i for i in range(1, len(ops)) if draw(st.booleans()) and draw(st.booleans())}
    _interleave(draw, ops, unknown)
    return ops


def _interleave(draw: st.DrawFn, ops: list[HistoryOp], unknown: set[int]) -> None:
    """Real time: a random interleaving of invocations and completions; ``unknown`` never complete."""
    pending = list(range(len(ops)))
    started: list[int] = []
    line = 0
    while pending or started:
        choices = [("invoke", i) for i in pending[:1]] + [("complete", i) for i in started]
        kind, i = draw(st.sampled_from(choices))
        line += 1
        if kind == "invoke":
            pending.remove(i)
            ops[i].invoke_line = line
            started.append(i)
        else:
            started.remove(i)
            if i in unknown:
                ops[i].outcome, ops[i].result = Outcome.UNKNOWN, None
            else:
                ops[i].complete_line = line


def _brute_force(ops: list[HistoryOp]) -> bool:
    known = [op for op in ops if op.outcome is Outcome.OK]
    unknown = [op for op in ops if op.outcome is Outcome.UNKNOWN]
    for size in range(len(unknown) + 1):
        for chosen in itertools.combinations(unknown, size):
            for order in itertools.permutations([*known, *chosen]):
                if any(
                    b.complete_line is not None and b.complete_line < a.invoke_line
                    for n, a in enumerate(order)
                    for b in order[n + 1 :]
                ):
                    continue  # b returned before a was invoked, yet comes after it
                state: RunModel = EMPTY
                for op in order:
                    result, state = apply(state, op)
                    if op.outcome is Outcome.OK and result != op.result:
                        break
                else:
                    return True
    return False


@settings(max_examples=300, deadline=None)
@given(histories())
def test_search_agrees_with_brute_force(ops: list[HistoryOp]) -> None:
    """CIS-HIST-2: linearizable by the WGL search (memoised, per run, unknown outcomes lazily placed)
    exactly when some real-time order of the known and some of the unknown operations explains every
    observed result."""
    verdict = _brute_force(ops)
    event(f"linearizable: {verdict}")
    assert is_linearizable(ops) == verdict


def _ready(record: CanonicalRecord) -> CanonicalRecord:
    raw = transition(record, RawReceived(raw_response="r", now_ms=T0), LIMITS)
    assert isinstance(raw, CanonicalRecord)
    done = transition(
        raw,
        ProjectionReceived(
            projection=Projection(evidence_status="EVIDENCE_FOUND", content="c", scope="s"), now_ms=T0
        ),
        LIMITS,
    )
    assert isinstance(done, CanonicalRecord)
    return done


def _ghost(key: str) -> CanonicalRecord:
    """A PROJECTING record of ``key`` no create of the history made (its completion is refused)."""
    begin = Begin(
        run_id="run-1",
        tool_call_id=key,
        tool_name="t",
        request_json="{}",
        invocation_token="ghost",
        sequence=1,
        ttl_ms=3_600_000,
        now_ms=T0,
    )
    record = transition(None, begin, LIMITS)
    assert isinstance(record, CanonicalRecord)
    return record


@st.composite
def mixed_histories(draw: st.DrawFn) -> list[HistoryOp]:
    """Creates, completions, reads and list reads of two keys; results from some sequential order."""
    budget = draw(st.integers(1, 3))
    ops = [_op(0, "open_run", {**_OPEN, "tool_call_budget": budget})]
    kinds = ["create", "create", "complete", "complete", "get", "get_many", "calls", "completed"]
    for index in range(1, draw(st.integers(1, 6)) + 1):
        ops.append(_op(index, draw(st.sampled_from(kinds)), draw(st.sampled_from(["call_a", "call_b"]))))
    order = [0, *draw(st.permutations(range(1, len(ops))))]
    state: RunModel = EMPTY
    for i in order:
        op = ops[i]
        key = op.args
        if op.name == "create":
            op.args = (
                AdmissionRequest(
                    run_id="run-1",
                    tool_call_id=key,
                    tool_name="t",
                    request_json="{}",
                    invocation_token=f"t{i}",
                ),
                LIMITS,
            )
        elif op.name == "complete":
            stored = next((rec for tcid, rec in state[1] if tcid == key and not rec.terminal), None)
            before = stored if stored is not None else _ghost(key)
            op.args = (before, _ready(before) if draw(st.booleans()) else before)
        elif op.name == "get":
            op.args = {"tool_call_id": key}
        elif op.name == "get_many":
            op.args = {"tool_call_ids": ["call_a", "call_b"], "include_raw": draw(st.booleans())}
        elif op.name in ("calls", "completed"):
            op.args = {}
        op.result, state = apply(state, op)
    unknown = {i for i in range(1, len(ops)) if draw(st.booleans()) and draw(st.booleans())}
    if draw(st.booleans()):  # forge one known result: often no order explains it any more
        forged = draw(st.sampled_from([i for i in range(1, len(ops)) if i not in unknown] or [0]))
        if (
            forged
            and ops[forged].name in ("get", "complete")
            and isinstance(ops[forged].result, CanonicalRecord)
        ):
            ops[forged].result = attrs.evolve(ops[forged].result, invocation_token="forged")
        elif forged and ops[forged].name in ("calls", "completed"):
            ops[forged].result = (*ops[forged].result, "call_a")
    _interleave(draw, ops, unknown)
    return ops


@settings(max_examples=400, deadline=None)
@given(mixed_histories())
def test_pruned_and_per_key_search_agrees_with_brute_force(ops: list[HistoryOp]) -> None:
    """CIS-HIST-2: with completions, reads, list reads and forged results, the pruned search (frozen
    results, append-only lists, impossible admissions) and the per-key projection first decide exactly
    as brute force does: a key that refutes is never wrong, and the run's search decides the rest."""
    verdict = _brute_force(ops)
    event(f"linearizable: {verdict}")
    assert is_linearizable(ops) == verdict
    found = _checker._check_run("run-1", ops, Meter(Budget()))
    assert not isinstance(found, _checker.Undecided)
    assert (found is None) == verdict
