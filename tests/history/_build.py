"""Hand-built histories: a small builder over the history format's encoders."""

from __future__ import annotations

import json
from typing import Any

from invocation_store.history import (
    HistoryReport,
    Violation,
    check_history_lines,
    encode_args,
    encode_result,
    header_line,
)
from invocation_store.kernel import (
    Admission,
    AdmissionRequest,
    CanonicalRecord,
    Limits,
    RawReceived,
    RunState,
    admit,
    open_run,
    transition,
)

T0 = 1_700_000_000_000
LIMITS = Limits()
RUN = "run-1"


class Builder:
    """Lines of one history; ``invoke`` returns the operation id to complete later."""

    def __init__(self, limits: Limits = LIMITS) -> None:
        self.lines: list[dict[str, Any]] = [header_line(limits, "hand-built")]
        self._next = 0
        self._names: dict[int, tuple[str, int]] = {}

    def invoke(self, process: int, name: str, now_ms: int = T0, **args: Any) -> int:
        op_id = self._next
        self._next += 1
        self._names[op_id] = (name, process)
        self.lines.append(
            {
                "type": "invoke",
                "id": op_id,
                "process": process,
                "op": name,
                "args": encode_args(name, {**args, "now_ms": now_ms}),
            }
        )
        return op_id

    def ok(self, op_id: int, result: Any) -> None:
        name, process = self._names[op_id]
        self.lines.append(
            {"type": "ok", "id": op_id, "process": process, "result": encode_result(name, result)}
        )

    def info(self, op_id: int) -> None:
        _name, process = self._names[op_id]
        self.lines.append({"type": "info", "id": op_id, "process": process, "reason": "TimeoutError"})

    def fail(self, op_id: int) -> None:
        _name, process = self._names[op_id]
        self.lines.append({"type": "fail", "id": op_id, "process": process})

    def call(self, process: int, name: str, result: Any, now_ms: int = T0, **args: Any) -> int:
        op_id = self.invoke(process, name, now_ms, **args)
        self.ok(op_id, result)
        return op_id

    def text(self) -> str:
        return "".join(json.dumps(line) + "\n" for line in self.lines)

    def check(self) -> HistoryReport:
        return check_history_lines(self.text().splitlines(keepends=True))


OPEN_ARGS = {"deadline_ms": T0 + 60_000, "ttl_ms": 3_600_000, "tool_call_budget": 5, "byte_budget": 10_000}


def opened(budget: int = 5, run_id: str = RUN) -> RunState:
    run = open_run(None, run_id=run_id, now_ms=T0, **{**OPEN_ARGS, "tool_call_budget": budget})
    assert isinstance(run, RunState)
    return run


def open_args(budget: int = 5, run_id: str = RUN) -> dict[str, Any]:
    return {"run_id": run_id, **OPEN_ARGS, "tool_call_budget": budget}


def request(tool_call_id: str, token: str, run_id: str = RUN, now_ms: int = T0) -> AdmissionRequest:
    return AdmissionRequest(
        run_id=run_id,
        tool_call_id=tool_call_id,
        tool_name="search",
        request_json='{"q":1}',
        invocation_token=token,
    )


def create_args(req: AdmissionRequest) -> dict[str, Any]:
    return {
        "run_id": req.run_id,
        "tool_call_id": req.tool_call_id,
        "tool_name": req.tool_name,
        "request_json": req.request_json,
        "invocation_token": req.invocation_token,
    }


def admitted(run: RunState, req: AdmissionRequest, existing: CanonicalRecord | None = None) -> Admission:
    result = admit(run, existing, req, LIMITS, T0)
    assert isinstance(result, Admission)
    return result


def with_raw(record: CanonicalRecord, raw: str = "raw", now_ms: int = T0) -> CanonicalRecord:
    after = transition(record, RawReceived(raw_response=raw, now_ms=now_ms), LIMITS)
    assert isinstance(after, CanonicalRecord)
    return after


#: The rules a window of a create race may name: two admissions of one key (CIS-ID-5), an
#: admission in a state no order reaches (CIS-PRE-8), counters updated from a stale read
#: (CIS-RUN-5, CIS-RUN-6); or, seen from one key, a read (CIS-STORE-1) or a completion
#: (CIS-STORE-3) of a record the second admission replaced.
RACE_RULES = frozenset({"CIS-ID-5", "CIS-PRE-8", "CIS-RUN-5", "CIS-RUN-6"})
RACE_KEY_RULES = frozenset({"CIS-STORE-1", "CIS-STORE-3"})


def assert_race_window(violation: Violation) -> None:
    """The window of a planted create race shows the race: a create in it under one of
    :data:`RACE_RULES`, or one key's read or completion of the record it replaced."""
    if any(op.name == "create" for op in violation.window):
        assert violation.rule in RACE_RULES | RACE_KEY_RULES, violation.rule
    else:
        assert violation.key is not None, violation.render()
        assert violation.rule in RACE_KEY_RULES, violation.render()
