"""A store that forwards every operation to another, written once as asyncio code.

The sync flavour (:class:`~invocation_store.adapters.ForwardingStore`) is generated
from this source by ``scripts/unasync.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ...kernel import Admission, AdmissionRequest, CanonicalRecord, ErrorCode, Limits, ProgressView, RunState
from .progress import async_read_progress
from .protocol import AsyncInvocationStore, async_decision_clock

__all__ = ["AsyncForwardingStore"]

#: Progress views by tool_call_id (None: absent, unsafe or lapsed).
ViewMap = Mapping[str, ProgressView | None]


class AsyncForwardingStore:
    """An :class:`AsyncInvocationStore` that hands every call to ``inner`` unchanged.

    Subclass it and override the operations a wrapper observes or changes
    (recording a trace, counting calls, injecting faults); everything else keeps
    ``inner``'s contract exactly (CIS-STORE-1). ``get_progress`` forwards to the
    inner store's progress read (or its ``get_many`` without raw responses when it
    has none).
    """

    def __init__(self, inner: AsyncInvocationStore) -> None:
        self.inner = inner

    def now_ms(self) -> int:
        """``inner.now_ms()``."""
        return self.inner.now_ms()

    async def synced_now_ms(self) -> int:
        """``inner``'s clock for a decision (:func:`~.protocol.async_decision_clock`, CIS-STORE-10)."""
        return await async_decision_clock(self.inner)

    async def open_run(
        self, run_id: str, *, deadline_ms: int, ttl_ms: int, tool_call_budget: int, byte_budget: int
    ) -> RunState | ErrorCode:
        """``inner.open_run(...)``."""
        return await self.inner.open_run(
            run_id,
            deadline_ms=deadline_ms,
            ttl_ms=ttl_ms,
            tool_call_budget=tool_call_budget,
            byte_budget=byte_budget,
        )

    async def cancel_run(self, run_id: str) -> RunState | ErrorCode:
        """``inner.cancel_run(run_id)``."""
        return await self.inner.cancel_run(run_id)

    async def close_run(self, run_id: str) -> RunState | ErrorCode:
        """``inner.close_run(run_id)``."""
        return await self.inner.close_run(run_id)

    async def get_run(self, run_id: str) -> RunState | None:
        """``inner.get_run(run_id)``."""
        return await self.inner.get_run(run_id)

    async def create(self, request: AdmissionRequest, limits: Limits) -> Admission | ErrorCode:
        """``inner.create(request, limits)``."""
        return await self.inner.create(request, limits)

    async def complete(self, before: CanonicalRecord, after: CanonicalRecord) -> CanonicalRecord | ErrorCode:
        """``inner.complete(before, after)``."""
        return await self.inner.complete(before, after)

    async def get(self, run_id: str, tool_call_id: str) -> CanonicalRecord | None:
        """``inner.get(run_id, tool_call_id)``."""
        return await self.inner.get(run_id, tool_call_id)

    async def get_many(
        self, run_id: str, tool_call_ids: Sequence[str], *, include_raw: bool = True
    ) -> Mapping[str, CanonicalRecord | None]:
        """``inner.get_many(run_id, tool_call_ids, include_raw=...)``."""
        return await self.inner.get_many(run_id, tool_call_ids, include_raw=include_raw)

    async def get_progress(self, run_id: str, tool_call_ids: Sequence[str]) -> ViewMap:
        """The inner store's progress read (``get_many`` without raw where it has none)."""
        return await async_read_progress(self.inner, run_id, tool_call_ids)

    async def completed(self, run_id: str) -> tuple[str, ...]:
        """``inner.completed(run_id)``."""
        return await self.inner.completed(run_id)

    async def calls(self, run_id: str) -> tuple[str, ...]:
        """``inner.calls(run_id)``."""
        return await self.inner.calls(run_id)

    async def ttl_remaining_ms(self, run_id: str, tool_call_id: str) -> int | None:
        """``inner.ttl_remaining_ms(run_id, tool_call_id)``."""
        return await self.inner.ttl_remaining_ms(run_id, tool_call_id)

    async def close(self) -> None:
        """``inner.close()``."""
        await self.inner.close()
