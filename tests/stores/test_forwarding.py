"""ForwardingStore: the base for store wrappers keeps the wrapped store's contract."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Sequence
from typing import Any

from attrs import evolve

from invocation_store.adapters import (
    AsyncFace,
    AsyncForwardingStore,
    AsyncInvocationStore,
    AsyncMemoryStore,
    ForwardingStore,
    InvocationStore,
    MemoryStore,
)
from invocation_store.adapters._face import on_thread
from invocation_store.kernel import Admission, AdmissionRequest, Limits, ProgressView, RunState
from invocation_store.testing import FakeClock

from ._support import ready as _ready


def test_forwarding_store_names_every_operation() -> None:
    """CIS-STORE-1: every Protocol operation is defined on ForwardingStore (none falls through)."""
    protocol_methods = {
        name
        for name, _ in inspect.getmembers(InvocationStore, inspect.isfunction)
        if not name.startswith("_")
    }
    assert protocol_methods <= set(vars(ForwardingStore))
    assert isinstance(ForwardingStore(MemoryStore(FakeClock())), InvocationStore)


def test_forwarding_store_forwards_every_operation() -> None:
    """CIS-STORE-1: every Protocol operation is forwarded, with the same answers."""
    clock = FakeClock()
    inner = MemoryStore(clock)
    store = ForwardingStore(inner)
    run = store.open_run(
        "run-1", deadline_ms=clock() + 1_000, ttl_ms=5_000, tool_call_budget=2, byte_budget=100
    )
    assert run == inner.get_run("run-1") == store.get_run("run-1")
    request = AdmissionRequest(
        run_id="run-1",
        tool_call_id="call_1",
        tool_name="t",
        request_json="{}",
        invocation_token="t1",
    )
    admission = store.create(request, Limits())
    assert isinstance(admission, Admission)
    assert inner.get("run-1", "call_1") == store.get("run-1", "call_1") == admission.record
    done = _ready(admission.record, clock())
    assert store.complete(admission.record, done) == done
    assert store.get_many("run-1", ["call_1"]) == {"call_1": done}  # raw included by default
    assert store.get_many("run-1", ["call_1"], include_raw=False) == {
        "call_1": evolve(done, raw_response=None)
    }
    assert store.calls("run-1") == ("call_1",)
    assert store.ttl_remaining_ms("run-1", "call_1") == 5_000
    assert store.now_ms() == clock()


def test_async_forwarding_store_and_the_async_face_name_every_operation() -> None:
    """CIS-STORE-1, CIS-STORE-4: the asyncio forwarding store (the source of the sync one) and the
    asyncio face of a sync store (AsyncMemoryStore) define every Protocol operation."""
    protocol_methods = {
        name
        for name, _ in inspect.getmembers(AsyncInvocationStore, inspect.isfunction)
        if not name.startswith("_")
    }
    assert protocol_methods <= set(vars(AsyncForwardingStore))
    assert isinstance(AsyncMemoryStore(clock=FakeClock()), AsyncInvocationStore)


def test_async_forwarding_store_and_the_async_face_forward_every_operation() -> None:
    """CIS-STORE-1, CIS-STORE-4: the asyncio forwarding store and the asyncio face of a sync store
    (AsyncMemoryStore) answer as the inner store."""
    clock = FakeClock()
    face = AsyncMemoryStore(clock=clock)
    store = AsyncForwardingStore(face)

    async def scenario() -> None:
        run = await store.open_run(
            "run-1", deadline_ms=clock() + 1_000, ttl_ms=5_000, tool_call_budget=2, byte_budget=100
        )
        assert run == face.sync.get_run("run-1")
        request = AdmissionRequest(
            run_id="run-1", tool_call_id="call_1", tool_name="t", request_json="{}", invocation_token="t1"
        )
        admission = await store.create(request, Limits())
        assert isinstance(admission, Admission)
        record = admission.record
        assert await store.get_many("run-1", ["call_1", "bad id"], include_raw=False) == {
            "call_1": record,
            "bad id": None,
        }
        assert await store.get_progress("run-1", ["call_1"]) == {"call_1": ProgressView.of(record)}
        done = _ready(record, clock())
        assert await store.complete(record, done) == done
        assert await store.get_many("run-1", ["call_1"]) == {"call_1": done}  # raw included by default
        assert await store.calls("run-1") == ("call_1",)
        assert await store.ttl_remaining_ms("run-1", "call_1") == 5_000
        await store.close()

    asyncio.run(scenario())
    assert store.now_ms() == clock()


def test_an_async_face_runs_a_blocking_store_on_a_thread() -> None:
    """CIS-STORE-1: ``on_thread`` runs each operation of the wrapped store off the event loop's thread."""
    seen: list[int] = []

    class Watching(MemoryStore):
        def get_run(self, run_id: str) -> RunState | None:
            seen.append(threading.get_ident())
            return super().get_run(run_id)

    face = AsyncFace(Watching(FakeClock()), on_thread)
    assert asyncio.run(face.get_run("run-1")) is None
    assert len(seen) == 1
    assert seen[0] != threading.get_ident()


def test_the_progress_read_of_a_store_without_one_falls_back_to_lean_records() -> None:
    """CIS-PERF-3, CIS-PROG-5: forwarding a store that predates get_progress answers its views from
    get_many(include_raw=False)."""

    class Old:
        def __init__(self, inner: MemoryStore) -> None:
            self.inner = inner

        def get_many(self, run_id: str, ids: Sequence[str], *, include_raw: bool = True) -> Any:
            assert include_raw is False
            return self.inner.get_many(run_id, ids, include_raw=include_raw)

    clock = FakeClock()
    inner = MemoryStore(clock)
    inner.open_run("run-1", deadline_ms=clock() + 1_000, ttl_ms=5_000, tool_call_budget=2, byte_budget=100)
    request = AdmissionRequest(
        run_id="run-1", tool_call_id="call_1", tool_name="t", request_json="{}", invocation_token="t1"
    )
    admission = inner.create(request, Limits())
    assert isinstance(admission, Admission)
    store = ForwardingStore(Old(inner))  # type: ignore[arg-type]
    assert store.get_progress("run-1", ["call_1", "nope"]) == {
        "call_1": ProgressView.of(admission.record),
        "nope": None,
    }
