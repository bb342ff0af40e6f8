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
- :func:`unknown_completes`: ``P`` completions whose outcome is unknown, then a read of
  the run: the case no pruning helps (every subset of the completions is a state),
  with a run usage that is possible or that no subset gives.

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

__all__ = ["T0", "merge", "overlapping_completes", "overlapping_creates", "unknown_completes"]

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


def _ready(record: CanonicalRecord, content: str) -> CanonicalRecord:
    raw = transition(record, RawReceived(raw_response="RAW", now_ms=T0 + 1), _LIMITS)
    assert isinstance(raw, CanonicalRecord)
    projection = Projection(evidence_status="EVIDENCE_FOUND", content=content, scope="web")
    done = transition(raw, ProjectionReceived(projection=projection, now_ms=T0 + 1), _LIMITS)
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


def unknown_completes(p: int, *, forged: bool, run_id: str = _RUN) -> list[str]:
    """A run, ``p`` calls created in turn, ``p`` completions of unknown outcome, then a read of the run.

    Each completion may or may not have taken effect, so the search must consider
    every subset of them. The read observes the run after all of them took effect, or
    with ``forged`` one byte more than any subset gives.
    """
    lines = _Lines()
    charged, ops = _created_in_turn(lines, p, run_id)
    for n, record in enumerate(ops):
        after = _ready(record, f"fact {n}")
        op_id = lines.invoke(1 + n, "complete", {"now_ms": T0 + 2, "before": record, "after": after})
        lines.lines.append({"type": "info", "id": op_id, "process": 1 + n, "reason": "TimeoutError"})
        charged = evolve(charged, bytes_used=charged.bytes_used + completion_charge(record, after))
    observed = evolve(charged, bytes_used=charged.bytes_used + 1) if forged else charged
    op_id = lines.invoke(0, "get_run", {"run_id": run_id, "now_ms": T0 + 3})
    lines.ok(op_id, 0, "get_run", observed)
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
