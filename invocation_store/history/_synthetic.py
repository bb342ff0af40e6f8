"""Synthetic histories of fully overlapping operations: the checker's hard cases (CIS-HIST-2).

Theory of operation
-------------------
A search for a linearization is cheap when the observed results pin the order
(sequence numbers do) and exponential when ``P`` operations overlap completely and
commute: every subset of them is a state the search may visit. These builders write
such histories, linearizable or with one impossible result, for the benchmark
(``benchmarks/bench_history.py``) and the tests:

- :func:`overlapping_completes`: a run, ``P`` calls created one after another, then
  ``P`` completions (one per call, each its own key) all invoked before any returns;
  ``forged`` makes one completion claim a result no order gives (another content);
- :func:`overlapping_creates`: ``P`` creates of distinct calls, all in flight at once,
  answered as in some order; ``forged`` makes one claim a sequence no order gives;
- two answers competing for one state, each fitting a state alone
  (:func:`competing_creates`: two creates claiming the last budget slot;
  :func:`same_key_creates`: two admissions of one key; :func:`double_completes`: two
  completions of one record; :func:`admissions_read`: a read listing both claimants);
- :func:`unknown_completes`: ``P`` completions whose outcome is unknown (every subset
  of them a state), then a read of the run with a usage that is possible, or that no
  subset gives (above every sum, or between the sums): the run-usage invariants
  decide it at once;
- :func:`unknown_completes_reread`: the same, then a read of one record that the run
  read's usage contradicts: no usage bound sees it, the search visits every subset
  (the case the budget bounds).

Every expected result is the kernel's (``admit``, ``transition``,
``decide_completion``); the lines are the history format's (``spec/history.md``).
Times are integer ms from :data:`T0`; every builder takes the ``run_id`` (default
``run-1``), so that histories of several runs can be merged (:func:`merge`).
"""

from __future__ import annotations

import itertools
import json
from typing import Any, Final

from attrs import evolve

from ..kernel import (
    Admission,
    AdmissionRequest,
    CanonicalRecord,
    ErrorCode,
    Limits,
    Projection,
    ProjectionReceived,
    RawReceived,
    RunState,
    admit,
    completion_charge,
    open_run,
    transition,
)
from ._format import encode_args, encode_result, header_line

__all__ = [
    "T0",
    "admissions_read",
    "competing_creates",
    "double_completes",
    "merge",
    "overlapping_completes",
    "overlapping_creates",
    "same_key_creates",
    "unknown_completes",
    "unknown_completes_reread",
]

#: The clock of every synthetic history: integer ms.
T0: Final = 1_700_000_000_000
_LIMITS: Final = Limits()
_RUN: Final = "run-1"


class _Lines:
    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = [header_line(_LIMITS, "synthetic")]
        self.next_id = 0

    def invoke(self, process: int, name: str, args: dict[str, Any]) -> int:
        op_id = self.next_id
        self.next_id += 1
        self.lines.append(
            {"type": "invoke", "id": op_id, "process": process, "op": name, "args": encode_args(name, args)}
        )
        return op_id

    def ok(self, op_id: int, process: int, name: str, result: Any) -> None:
        self.lines.append(
            {"type": "ok", "id": op_id, "process": process, "result": encode_result(name, result)}
        )

    def text(self) -> list[str]:
        return [json.dumps(line, ensure_ascii=True) + "\n" for line in self.lines]


def _open(lines: _Lines, budget: int, run_id: str) -> RunState:
    args = {
        "deadline_ms": T0 + 600_000,
        "ttl_ms": 3_600_000,
        "tool_call_budget": budget,
        "byte_budget": 1 << 40,
    }
    run = open_run(None, run_id=run_id, now_ms=T0, **args)
    assert isinstance(run, RunState)
    op_id = lines.invoke(0, "open_run", {"run_id": run_id, "now_ms": T0, **args})
    lines.ok(op_id, 0, "open_run", run)
    return run


def _request(n: int, run_id: str) -> AdmissionRequest:
    return AdmissionRequest(
        run_id=run_id,
        tool_call_id=f"call_{n}",
        tool_name="search",
        request_json='{"q":' + str(n) + "}",
        invocation_token=f"tok-{n}",
    )


def _create_args(request: AdmissionRequest) -> dict[str, Any]:
    return {
        "run_id": request.run_id,
        "tool_call_id": request.tool_call_id,
        "tool_name": request.tool_name,
        "request_json": request.request_json,
        "invocation_token": request.invocation_token,
        "now_ms": T0,
    }


def _ready(record: CanonicalRecord, content: str, at_ms: int = T0 + 1) -> CanonicalRecord:
    raw = transition(record, RawReceived(raw_response="RAW", now_ms=at_ms), _LIMITS)
    assert isinstance(raw, CanonicalRecord)
    projection = Projection(evidence_status="EVIDENCE_FOUND", content=content, scope="web")
    done = transition(raw, ProjectionReceived(projection=projection, now_ms=at_ms), _LIMITS)
    assert isinstance(done, CanonicalRecord)
    return done


def _created_in_turn(lines: _Lines, p: int, run_id: str) -> tuple[RunState, list[CanonicalRecord]]:
    """A run opened for ``p`` calls, each created after the last returned: the run after, the records."""
    run = _open(lines, p, run_id)
    records = []
    for n in range(p):
        request = _request(n, run_id)
        admission = admit(run, None, request, _LIMITS, T0)
        assert isinstance(admission, Admission)
        run = admission.run
        op_id = lines.invoke(1 + n, "create", _create_args(request))
        lines.ok(op_id, 1 + n, "create", admission)
        records.append(admission.record)
    return run, records


def overlapping_completes(p: int, *, forged: bool, run_id: str = _RUN) -> list[str]:
    """A run, ``p`` calls created in turn, then ``p`` completions all in flight at once.

    Each completion writes its own call's READY record; they commute (the run's byte
    usage is a sum). With ``forged`` the last completion claims a content other than
    the one it wrote: no order explains it. Returns the history's lines.
    """
    lines = _Lines()
    _run, records = _created_in_turn(lines, p, run_id)
    ops = []
    for n, record in enumerate(records):
        after = _ready(record, f"fact {n}")
        args = {"now_ms": T0 + 2, "before": record, "after": after}
        ops.append((lines.invoke(1 + n, "complete", args), after))
    for n, (op_id, after) in enumerate(ops):
        observed = evolve(after, agent_result="forged") if forged and n == p - 1 else after
        lines.ok(op_id, 1 + n, "complete", observed)
    return lines.text()


def overlapping_creates(p: int, *, forged: bool, run_id: str = _RUN) -> list[str]:
    """``p`` creates of distinct calls, all in flight at once, answered as in the order of their ids.

    Each answer carries its sequence and the run's usage after it, which pin the
    order. With ``forged`` the last create claims sequence ``p + 1``: no order gives it.
    """
    lines = _Lines()
    run = _open(lines, p + 1, run_id)
    answers = []
    for n in range(p):
        request = _request(n, run_id)
        admission = admit(run, None, request, _LIMITS, T0)
        assert isinstance(admission, Admission)
        run = admission.run
        answers.append((lines.invoke(1 + n, "create", _create_args(request)), admission))
    for n, (op_id, admission) in enumerate(answers):
        if forged and n == p - 1:
            admission = evolve(admission, record=evolve(admission.record, sequence=p + 1))  # noqa: PLW2901
        lines.ok(op_id, 1 + n, "create", admission)
    return lines.text()


def unknown_completes(p: int, *, forged: bool, run_id: str = _RUN, within: bool = False) -> list[str]:
    """A run, ``p`` calls created in turn, ``p`` completions of unknown outcome, then a read of the run.

    Each completion may or may not have taken effect: every subset of them is a state.
    The read observes the run after all of them took effect, or with ``forged`` one
    byte more than all of them give (beyond what the usage can reach: refuted at
    once), or with ``forged`` and ``within`` one byte less (within the bounds, yet no
    subset gives it, since every charge is more than one byte: the search still visits
    every subset, the case the budget bounds).
    """
    lines = _Lines()
    charged, ops = _created_in_turn(lines, p, run_id)
    for n, record in enumerate(ops):
        after = _ready(record, f"fact {n}")
        op_id = lines.invoke(1 + n, "complete", {"now_ms": T0 + 2, "before": record, "after": after})
        lines.lines.append({"type": "info", "id": op_id, "process": 1 + n, "reason": "TimeoutError"})
        charged = evolve(charged, bytes_used=charged.bytes_used + completion_charge(record, after))
    observed = evolve(charged, bytes_used=charged.bytes_used + (-1 if within else 1)) if forged else charged
    op_id = lines.invoke(0, "get_run", {"run_id": run_id, "now_ms": T0 + 3})
    lines.ok(op_id, 0, "get_run", observed)
    return lines.text()


def unknown_completes_reread(p: int, *, forged: bool, run_id: str = _RUN) -> list[str]:
    """:func:`unknown_completes` (the run read showing every completion charged), then a read of call 0.

    The record read shows call 0 READY, or with ``forged`` still PROJECTING: the run
    read needs every completion placed before it, the record read needs call 0's
    missing after it. Each answer alone is possible and no usage bound sees the
    contradiction: the search still visits every subset of the completions (the case
    the budget bounds, ``spec/history.md`` section 4).
    """
    text = unknown_completes(p, forged=False, run_id=run_id)
    lines = _Lines()
    lines.lines = [json.loads(line) for line in text]
    lines.next_id = 1 + max(int(line["id"]) for line in lines.lines[1:])
    first = next(line for line in lines.lines if line.get("op") == "complete")
    key = "before" if forged else "after"
    record = first["args"][key]
    op_id = lines.invoke(
        0, "get", {"run_id": run_id, "tool_call_id": record["tool_call_id"], "now_ms": T0 + 4}
    )
    lines.lines.append({"type": "ok", "id": op_id, "process": 0, "result": {"record": record}})
    return lines.text()


def merge(histories: list[list[str]], *, interleave: bool) -> list[str]:
    """One history of several (each of its own run): one header, op ids and processes kept apart.

    ``interleave``: the histories' lines alternate one by one (each history's own order
    kept), as when runs' workers run at once; otherwise each history follows the last.
    """
    parsed = [[json.loads(line) for line in history[1:]] for history in histories]
    for n, lines in enumerate(parsed):
        for line in lines:
            line["id"] = n * 1_000_000 + line["id"]
            line["process"] = f"h{n}-{line['process']}"
    if interleave:
        merged = [line for group in itertools.zip_longest(*parsed) for line in group if line is not None]
    else:
        merged = [line for lines in parsed for line in lines]
    return [histories[0][0], *(json.dumps(line, ensure_ascii=True) + "\n" for line in merged)]


# ---------------------------------------------------------------------------
# Two operations competing for one state (issue 22): each result alone fits a state,
# the pair fits none.


def _in_flight_creates(
    lines: _Lines, requests: list[AdmissionRequest], budget: int, run_id: str
) -> tuple[RunState, list[tuple[int, AdmissionRequest]]]:
    """A run opened for ``budget`` calls and ``requests`` all invoked at once: (the run, invocations)."""
    run = _open(lines, budget, run_id)
    return run, [
        (lines.invoke(1 + n, "create", _create_args(request)), request) for n, request in enumerate(requests)
    ]


def competing_creates(p: int, *, forged: bool, run_id: str = _RUN) -> list[str]:
    """``p`` creates of distinct calls in flight, a budget of ``p - 1`` calls: two compete for the last slot.

    The first ``p - 1`` are admitted in the order of their ids; the last is refused
    TOOL_BUDGET_EXHAUSTED, or with ``forged`` claims the last slot too (sequence
    ``p - 1``, the run counted as after the first ``p - 2`` and itself). Each answer
    alone fits a state; no order admits both claimants of the last slot (CIS-RUN-5).
    """
    lines = _Lines()
    requests = [_request(n, run_id) for n in range(p)]
    run, invoked = _in_flight_creates(lines, requests, p - 1, run_id)
    answers: list[Admission | ErrorCode] = []
    before_last = run
    for n, request in enumerate(requests):
        if n == p - 2:
            before_last = run
        admission = admit(before_last if forged and n == p - 1 else run, None, request, _LIMITS, T0)
        if isinstance(admission, Admission):
            run = admission.run
        answers.append(admission)
    for n, ((op_id, _request_n), answer) in enumerate(zip(invoked, answers, strict=True)):
        lines.ok(op_id, 1 + n, "create", answer)
    return lines.text()


def same_key_creates(p: int, *, forged: bool, run_id: str = _RUN, retried: bool = False) -> list[str]:
    """``p`` creates all in flight, the last two of one call with their own tokens, a budget of ``p`` calls.

    The first ``p - 1`` (distinct calls) are admitted in order; the last, a second
    invocation of call ``p - 2`` with another token, is answered CALL_IN_PROGRESS (the
    first one's record is live and PROJECTING), or with ``forged`` admitted with its
    own token in the next slot: each answer alone fits a state, and the run's usage
    fits both; no order admits one key twice while its record lives (CIS-ID-5). With
    ``retried`` a third create of that call, with a third token, is invoked with them
    and never answered (a timeout): its key's operations are then not checked alone.
    """
    lines = _Lines()
    requests = [_request(n, run_id) for n in range(p - 1)]
    requests.append(evolve(requests[-1], invocation_token=f"tok-{p - 2}-again"))
    run, invoked = _in_flight_creates(lines, requests, p, run_id)
    if retried:
        lines.invoke(
            p + 1, "create", _create_args(evolve(requests[-1], invocation_token=f"tok-{p - 2}-third"))
        )
    answers: list[Admission | ErrorCode] = []
    stored: dict[str, CanonicalRecord] = {}
    for n, request in enumerate(requests):
        existing = None if forged and n == p - 1 else stored.get(request.tool_call_id)
        admission = admit(run, existing, request, _LIMITS, T0)
        if isinstance(admission, Admission):
            run = admission.run
            stored[request.tool_call_id] = admission.record
        answers.append(admission)
    for n, ((op_id, _request_n), answer) in enumerate(zip(invoked, answers, strict=True)):
        lines.ok(op_id, 1 + n, "create", answer)
    return lines.text()


def double_completes(p: int, *, forged: bool, run_id: str = _RUN) -> list[str]:
    """A run, ``p - 1`` calls created in turn, then ``p`` completions in flight: two of the last call.

    One completion per call, plus a second completion of the last call writing another
    content at another time. The second is answered INVALID_TRANSITION (the record
    moved on), or with ``forged`` answered with its own write: one record cannot take
    both (CIS-STORE-3).
    """
    lines = _Lines()
    _run, records = _created_in_turn(lines, p - 1, run_id)
    ops = []
    for n, record in enumerate(records):
        after = _ready(record, f"fact {n}")
        ops.append(
            (lines.invoke(1 + n, "complete", {"now_ms": T0 + 2, "before": record, "after": after}), after)
        )
    other = _ready(records[-1], "another fact", T0 + 2)
    ops.append(
        (lines.invoke(p, "complete", {"now_ms": T0 + 2, "before": records[-1], "after": other}), other)
    )
    for n, (op_id, after) in enumerate(ops):
        if n == p - 1:
            lines.ok(op_id, 1 + n, "complete", after if forged else ErrorCode.INVALID_TRANSITION)
        else:
            lines.ok(op_id, 1 + n, "complete", after)
    return lines.text()


def admissions_read(p: int, *, forged: bool, run_id: str = _RUN) -> list[str]:
    """:func:`competing_creates` (unforged: the last refused), then a read of the run's admitted calls.

    The read lists the ``p - 1`` calls admitted, or with ``forged`` both claimants of the
    last slot: ``p`` calls in a run whose budget is ``p - 1`` (CIS-RUN-5, CIS-PROG-1).
    """
    lines_text = competing_creates(p, forged=False, run_id=run_id)
    lines = _Lines()
    lines.lines = [json.loads(line) for line in lines_text]
    lines.next_id = 1 + max(int(line["id"]) for line in lines.lines[1:])
    admitted = tuple(f"call_{n}" for n in range(p if forged else p - 1))
    op_id = lines.invoke(0, "calls", {"run_id": run_id, "now_ms": T0 + 3})
    lines.ok(op_id, 0, "calls", admitted)
    return lines.text()
