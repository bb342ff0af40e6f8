"""A store written by someone else, defined only here, verified with the shipped kit (CIS-STATE-1).

:class:`DocumentStore` keeps JSON documents in a key-value mapping (as a document
database would): one document per run (its state and both lists) and one per record.
It copies no rule from MemoryStore: every decision is a kernel call (``admit``,
``decide_completion``, ``open_run``/``cancel_run``/``close_run``, ``lapsed``,
``remaining_ms``), and its reads answer through the shared helper
(``read_records``/``read_views``). The shipped store contract and the stateful machine
then run on it with a few lines each, which is what a third party writes.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from invocation_store import codec
from invocation_store.adapters import InvocationStore, MemoryStore, read_records, read_views, wanted_ids
from invocation_store.kernel import (
    Admission,
    AdmissionRequest,
    CanonicalRecord,
    CompareAndSet,
    ErrorCode,
    Limits,
    ProgressView,
    RunState,
    admit,
    cancel_run,
    close_run,
    decide_completion,
    lapsed,
    open_run,
    remaining_ms,
)
from invocation_store.testing import FakeClock, MachineStats, make_invocation_machine
from invocation_store.testing.contract import StoreContract


class DocumentStore:
    """A third-party store: JSON documents under string keys, one lock, the kernel for every rule."""

    def __init__(self, clock: FakeClock) -> None:
        self._clock = clock
        self._docs: dict[str, str] = {}
        self._lock = threading.Lock()

    # -- documents -----------------------------------------------------------------

    def _load_run(self, run_id: str, now: int) -> tuple[RunState | None, dict[str, list[str]]]:
        text = self._docs.get(f"run/{run_id}")
        if text is None:
            return None, {"calls": [], "done": []}
        doc = json.loads(text)
        run = codec.run_state_from_obj(doc["state"])
        if lapsed(run, now):  # the run lapsed: it and its lists go
            del self._docs[f"run/{run_id}"]
            return None, {"calls": [], "done": []}
        return run, {"calls": doc["calls"], "done": doc["done"]}

    def _save_run(self, run: RunState, lists: Mapping[str, list[str]]) -> None:
        doc = {"state": codec.unstructure(run), **lists}
        self._docs[f"run/{run.run_id}"] = json.dumps(doc)

    def _load_record(self, run_id: str, tool_call_id: str, now: int) -> CanonicalRecord | None:
        text = self._docs.get(f"record/{run_id}/{tool_call_id}")
        if text is None:
            return None
        record = codec.record_from_obj(json.loads(text))
        if lapsed(record, now):
            del self._docs[f"record/{run_id}/{tool_call_id}"]
            return None
        return record

    def _save_record(self, record: CanonicalRecord) -> None:
        self._docs[f"record/{record.run_id}/{record.tool_call_id}"] = codec.dumps(record)

    # -- the Protocol ----------------------------------------------------------------

    def now_ms(self) -> int:
        return self._clock()

    def open_run(
        self, run_id: str, *, deadline_ms: int, ttl_ms: int, tool_call_budget: int, byte_budget: int
    ) -> RunState | ErrorCode:
        with self._lock:
            now = self._clock()
            existing, lists = self._load_run(run_id, now)
            result = open_run(
                existing,
                run_id=run_id,
                now_ms=now,
                deadline_ms=deadline_ms,
                ttl_ms=ttl_ms,
                tool_call_budget=tool_call_budget,
                byte_budget=byte_budget,
            )
            if isinstance(result, RunState):
                self._save_run(result, lists)
            return result

    def _end(self, run_id: str, cancel: bool) -> RunState | ErrorCode:
        with self._lock:
            now = self._clock()
            run, lists = self._load_run(run_id, now)
            result = cancel_run(run, now) if cancel else close_run(run, now)
            if isinstance(result, RunState):
                self._save_run(result, lists)
            return result

    def cancel_run(self, run_id: str) -> RunState | ErrorCode:
        return self._end(run_id, cancel=True)

    def close_run(self, run_id: str) -> RunState | ErrorCode:
        return self._end(run_id, cancel=False)

    def get_run(self, run_id: str) -> RunState | None:
        with self._lock:
            return self._load_run(run_id, self._clock())[0]

    def create(self, request: AdmissionRequest, limits: Limits) -> Admission | ErrorCode:
        with self._lock:
            now = self._clock()
            run, lists = self._load_run(request.run_id, now)
            existing = self._load_record(request.run_id, request.tool_call_id, now)
            result = admit(run, existing, request, limits, now)
            if isinstance(result, Admission) and not result.replayed:
                self._save_record(result.record)
                if result.append_call:
                    lists["calls"].append(result.record.tool_call_id)
                self._save_run(result.run, lists)
            return result

    def complete(self, before: CanonicalRecord, after: CanonicalRecord) -> CanonicalRecord | ErrorCode:
        with self._lock:
            now = self._clock()
            stored = self._load_record(before.run_id, before.tool_call_id, now)
            run, lists = self._load_run(after.run_id, now)
            effect = decide_completion(stored, before, after, run, now)
            if isinstance(effect, ErrorCode):
                return effect
            if effect.action is CompareAndSet.WRITE:
                self._save_record(effect.record)
                if effect.run is not None:
                    if effect.append_done:
                        lists["done"].append(effect.record.tool_call_id)
                    self._save_run(effect.run, lists)
            return effect.record

    def _found(
        self, run_id: str, tool_call_ids: Sequence[str], now: int
    ) -> dict[str, CanonicalRecord | None]:
        return {tcid: self._load_record(run_id, tcid, now) for tcid in wanted_ids(tool_call_ids)}

    def get(self, run_id: str, tool_call_id: str) -> CanonicalRecord | None:
        return self.get_many(run_id, [tool_call_id])[tool_call_id]

    def get_many(
        self, run_id: str, tool_call_ids: Sequence[str], *, include_raw: bool = True
    ) -> Mapping[str, CanonicalRecord | None]:
        with self._lock:
            now = self._clock()
            return read_records(
                run_id, tool_call_ids, self._found(run_id, tool_call_ids, now), now, include_raw=include_raw
            )

    def get_progress(self, run_id: str, tool_call_ids: Sequence[str]) -> Mapping[str, ProgressView | None]:
        with self._lock:
            now = self._clock()
            return read_views(run_id, tool_call_ids, self._found(run_id, tool_call_ids, now), now)

    def completed(self, run_id: str) -> tuple[str, ...]:
        with self._lock:
            return tuple(self._load_run(run_id, self._clock())[1]["done"])

    def calls(self, run_id: str) -> tuple[str, ...]:
        with self._lock:
            return tuple(self._load_run(run_id, self._clock())[1]["calls"])

    def ttl_remaining_ms(self, run_id: str, tool_call_id: str) -> int | None:
        with self._lock:
            now = self._clock()
            return remaining_ms(self._load_record(run_id, tool_call_id, now), now)

    def close(self) -> None:
        self._docs.clear()


# -- what a third party writes to verify it ---------------------------------------------


class TestDocumentStore(StoreContract):
    """CIS-STORE-1, CIS-STORE-8: the shipped store contract passes on a store defined in this file."""

    @pytest.fixture
    def make_store(self) -> Any:
        return DocumentStore


def test_document_store_passes_the_stateful_machine() -> None:
    """CIS-STATE-1, CIS-STORE-8: the shipped stateful machine, single and differential against MemoryStore,
    passes on the third-party store (same factory, no other code)."""
    for factories in ((DocumentStore,), (MemoryStore, DocumentStore)):
        stats = MachineStats()
        machine = make_invocation_machine(*factories, stats=stats)
        run_state_machine_as_test(machine, settings=settings(max_examples=20, deadline=None))
        assert stats.steps > 0


def test_document_store_is_a_store() -> None:
    """CIS-STORE-1: the third-party store satisfies the Protocol structurally (get_progress too)."""
    assert isinstance(DocumentStore(FakeClock()), InvocationStore)
