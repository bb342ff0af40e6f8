"""ForwardingStore: the base for store wrappers keeps the wrapped store's contract."""

from __future__ import annotations

import inspect

from invocation_store.adapters import ForwardingStore, InvocationStore, MemoryStore
from invocation_store.kernel import AdmissionRequest, Limits
from invocation_store.testing import FakeClock


def test_forwarding_store_forwards_every_operation() -> None:
    """CIS-STORE-1: every Protocol operation is forwarded, with the same answers."""
    protocol_methods = {
        name
        for name, _ in inspect.getmembers(InvocationStore, inspect.isfunction)
        if not name.startswith("_")
    }
    assert protocol_methods <= set(vars(ForwardingStore))
    clock = FakeClock()
    inner = MemoryStore(clock)
    store = ForwardingStore(inner)
    assert isinstance(store, InvocationStore)
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
    assert inner.get("run-1", "call_1") == store.get("run-1", "call_1") == admission.record  # type: ignore[union-attr]
    assert store.calls("run-1") == ("call_1",)
    assert store.ttl_remaining_ms("run-1", "call_1") == 5_000
    assert store.now_ms() == clock()
