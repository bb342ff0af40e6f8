"""HistoryRecorder and HistoryWriter: what a recorded history holds (issue 14, CIS-HIST-1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from invocation_store.adapters import ForwardingStore, MemoryStore, StoreUnavailableError
from invocation_store.history import HistoryRecorder, HistoryWriter, check_history_lines, decode_history
from invocation_store.kernel import Admission, AdmissionRequest, ErrorCode, Limits, RunState
from invocation_store.testing import FakeClock


class _Flaky(ForwardingStore):
    """Forwards to a MemoryStore, but every ``get`` fails as an unreachable Redis would."""

    def get(self, run_id: str, tool_call_id: str) -> None:
        raise StoreUnavailableError("TimeoutError")


def test_recorder_writes_invoke_then_completion_and_unknown_on_failure(tmp_path: Path) -> None:
    """CIS-HIST-1: each operation is an invoke line (arguments with now_ms) then ok with its result;
    a store failure becomes an info line naming the exception type, and is re-raised unchanged."""
    clock = FakeClock()
    path = tmp_path / "h.jsonl"
    writer = HistoryWriter(path, Limits(), "unit")
    store = HistoryRecorder(_Flaky(MemoryStore(clock)), writer, process=3)
    run = store.open_run(
        "run-1", deadline_ms=clock.now + 1_000, ttl_ms=10_000, tool_call_budget=2, byte_budget=100
    )
    assert isinstance(run, RunState)
    request = AdmissionRequest(
        run_id="run-1",
        tool_call_id="call_1",
        tool_name="t",
        request_json="{}",
        invocation_token="k",
    )
    store.create(request, Limits())
    with pytest.raises(StoreUnavailableError):
        store.get("run-1", "call_1")
    writer.close()
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [line["type"] for line in lines] == ["header", "invoke", "ok", "invoke", "ok", "invoke", "info"]
    assert lines[0]["implementation"] == "unit"
    assert {line["process"] for line in lines[1:]} == {3}
    assert lines[1]["args"]["now_ms"] == clock.now
    assert lines[3]["args"]["invocation_token"] == "k"
    assert lines[4]["result"]["record"]["status"] == "PROJECTING"
    assert lines[6] == {"type": "info", "id": lines[5]["id"], "process": 3, "reason": "StoreUnavailableError"}
    history = decode_history(path.read_bytes().splitlines(keepends=True))
    assert [op.outcome.value for op in history.ops] == ["ok", "ok", "info"]
    assert check_history_lines(path.read_bytes().splitlines(keepends=True)).violation is None


def test_writer_appends_whole_lines_and_refuses_after_close(tmp_path: Path) -> None:
    """CIS-HIST-1: a second writer without limits appends to the same file (a worker process);
    writing after close is a programming error."""
    path = tmp_path / "h.jsonl"
    first = HistoryWriter(path, Limits())
    second = HistoryWriter(path)
    second.write(
        {"type": "invoke", "id": 1, "process": 1, "op": "calls", "args": {"run_id": "r", "now_ms": 0}}
    )
    first.write({"type": "ok", "id": 1, "process": 1, "result": {"tool_call_ids": []}})
    first.close()
    first.close()
    second.close()
    assert check_history_lines(path.read_bytes().splitlines(keepends=True)).operations == 1
    with pytest.raises(ValueError, match="closed"):
        first.write({"type": "info"})


class _Slow(ForwardingStore):
    """Forwards to a MemoryStore whose clock moves between the caller's reading and the store's decision."""

    def __init__(self, inner: MemoryStore, clock: FakeClock) -> None:
        super().__init__(inner)
        self.clock = clock

    def create(self, request: AdmissionRequest, limits: Limits) -> Admission | ErrorCode:
        self.clock.advance(250)  # the request travels: the store decides later than the caller read
        return super().create(request, limits)


def test_the_time_a_store_decided_at_replaces_the_callers_reading(tmp_path: Path) -> None:
    """CIS-HIST-1: a store that decides on its own clock reports the time; the ok line carries it as
    ``decided_at_ms`` and the checker replays the operation at it, not at the invocation's ``now_ms``."""
    clock = FakeClock()
    path = tmp_path / "h.jsonl"
    writer = HistoryWriter(path, Limits(), "unit")
    store = HistoryRecorder(_Slow(MemoryStore(clock), clock), writer, process=1)
    store.open_run("run-1", deadline_ms=clock.now + 5_000, ttl_ms=10_000, tool_call_budget=2, byte_budget=100)
    read_at = clock.now
    request = AdmissionRequest(
        run_id="run-1", tool_call_id="call_1", tool_name="t", request_json="{}", invocation_token="k"
    )
    admitted = store.create(request, Limits())
    assert isinstance(admitted, Admission)
    writer.close()
    raw = path.read_text(encoding="utf-8").splitlines()
    lines = [json.loads(line) for line in raw]
    assert lines[3]["args"]["now_ms"] == read_at
    assert lines[4]["decided_at_ms"] == read_at + 250 == admitted.record.created_at_ms
    ops = decode_history(raw).ops
    assert ops[1].now_ms == read_at + 250
    assert check_history_lines(raw).violation is None
    # Without the reported time, the kernel replayed at the caller's reading disagrees.
    stripped = [json.dumps({k: v for k, v in line.items() if k != "decided_at_ms"}) for line in lines]
    assert check_history_lines(stripped).violation is not None
