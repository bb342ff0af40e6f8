# Generated from invocation_store/adapters/_async/forwarding.py by scripts/unasync.py: do not edit by hand.
"""A store that forwards every operation to another, written once as asyncio code.

The sync flavour (:class:`~invocation_store.adapters.ForwardingStore`) is generated
from this source by ``scripts/unasync.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ...kernel import Admission, AdmissionRequest, CanonicalRecord, ErrorCode, Limits, ProgressView, RunState
from .progress import read_progress
from .protocol import InvocationStore, decision_clock

__all__ = ["ForwardingStore"]

#: Progress views by tool_call_id (None: absent, unsafe or lapsed).
ViewMap = Mapping[str, ProgressView | None]


class ForwardingStore:
    """An :class:`InvocationStore` that hands every call to ``inner`` unchanged.

    Subclass it and override the operations a wrapper observes or changes
    (recording a trace, counting calls, injecting faults); everything else keeps
    ``inner``'s contract exactly (CIS-STORE-1). ``get_progress`` forwards to the
    inner store's progress read (or its ``get_many`` without raw responses when it
    has none).
    """

    def __init__(self, inner: InvocationStore) -> None:
        self.inner = inner

    def now_ms(self) -> int:
        """``inner.now_ms()``."""
        return self.inner.now_ms()

    def synced_now_ms(self) -> int:
        """``inner``'s clock for a decision (:func:`~.protocol.decision_clock`, CIS-STORE-10)."""
        return decision_clock(self.inner)

    def open_run(
        self, run_id: str, *, deadline_ms: int, ttl_ms: int, tool_call_budget: int, byte_budget: int
    ) -> RunState | ErrorCode:
        """``inner.open_run(...)``."""
        return self.inner.open_run(
            run_id,
            deadline_ms=deadline_ms,
            ttl_ms=ttl_ms,
            tool_call_budget=tool_call_budget,
            byte_budget=byte_budget,
        )

    def cancel_run(self, run_id: str) -> RunState | ErrorCode:
        """``inner.cancel_run(run_id)``."""
        return self.inner.cancel_run(run_id)

    def close_run(self, run_id: str) -> RunState | ErrorCode:
        """``inner.close_run(run_id)``."""
        return self.inner.close_run(run_id)

    def get_run(self, run_id: str) -> RunState | None:
        """``inner.get_run(run_id)``."""
        return self.inner.get_run(run_id)

    def create(self, request: AdmissionRequest, limits: Limits) -> Admission | ErrorCode:
        """``inner.create(request, limits)``."""
        return self.inner.create(request, limits)

    def complete(self, before: CanonicalRecord, after: CanonicalRecord) -> CanonicalRecord | ErrorCode:
        """``inner.complete(before, after)``."""
        return self.inner.complete(before, after)

    def get(self, run_id: str, tool_call_id: str) -> CanonicalRecord | None:
        """``inner.get(run_id, tool_call_id)``."""
        return self.inner.get(run_id, tool_call_id)

    def get_many(
        self, run_id: str, tool_call_ids: Sequence[str], *, include_raw: bool = True
    ) -> Mapping[str, CanonicalRecord | None]:
        """``inner.get_many(run_id, tool_call_ids, include_raw=...)``."""
        return self.inner.get_many(run_id, tool_call_ids, include_raw=include_raw)

    def get_progress(self, run_id: str, tool_call_ids: Sequence[str]) -> ViewMap:
        """The inner store's progress read (``get_many`` without raw where it has none)."""
        return read_progress(self.inner, run_id, tool_call_ids)

    def completed(self, run_id: str) -> tuple[str, ...]:
        """``inner.completed(run_id)``."""
        return self.inner.completed(run_id)

    def calls(self, run_id: str) -> tuple[str, ...]:
        """``inner.calls(run_id)``."""
        return self.inner.calls(run_id)

    def ttl_remaining_ms(self, run_id: str, tool_call_id: str) -> int | None:
        """``inner.ttl_remaining_ms(run_id, tool_call_id)``."""
        return self.inner.ttl_remaining_ms(run_id, tool_call_id)

    def close(self) -> None:
        """``inner.close()``."""
        self.inner.close()
