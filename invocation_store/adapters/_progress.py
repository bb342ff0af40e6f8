"""Progress reads: only the fields facts need (CIS-PERF-3, CIS-PROG-1, CIS-PROG-5).

A store may offer ``get_progress(run_id, tool_call_ids)``: like
``get_many(..., include_raw=False)`` but answering, per id, only a
:class:`~invocation_store.kernel.ProgressView` (or ``None``), read in one round trip
(Redis: one pipelined ``HMGET`` of :data:`~invocation_store.kernel.PROGRESS_FIELDS`
per record, never the request text, the raw response or the token). Both stores of
this package do; for a store that does not (your own), the boundary falls back to
``get_many(..., include_raw=False)``: :func:`progress_reader` picks the method.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from ..kernel import CanonicalRecord, ProgressView

__all__ = ["AsyncProgressReader", "ProgressReader", "async_progress_reader", "progress_reader"]

Views = Mapping[str, ProgressView | None] | Mapping[str, CanonicalRecord | None]


@runtime_checkable
class ProgressReader(Protocol):
    """A sync store with a progress read (see the module docstring)."""

    def get_progress(self, run_id: str, tool_call_ids: Sequence[str]) -> Mapping[str, ProgressView | None]:
        """Views of the records of ``tool_call_ids`` in run ``run_id``; None if absent or expired."""
        ...


@runtime_checkable
class AsyncProgressReader(Protocol):
    """An async store with a progress read (see the module docstring)."""

    async def get_progress(
        self, run_id: str, tool_call_ids: Sequence[str]
    ) -> Mapping[str, ProgressView | None]:
        """See :meth:`ProgressReader.get_progress`."""
        ...


def progress_reader(store: Any) -> Callable[[str, Sequence[str]], Views]:
    """``store.get_progress`` if the store has one, else ``get_many`` without raw responses."""
    if isinstance(store, ProgressReader):
        return store.get_progress

    def read(run_id: str, tool_call_ids: Sequence[str]) -> Views:
        records: Mapping[str, CanonicalRecord | None] = store.get_many(
            run_id, tool_call_ids, include_raw=False
        )
        return records

    return read


def async_progress_reader(store: Any) -> Callable[[str, Sequence[str]], Awaitable[Views]]:
    """The async twin of :func:`progress_reader`."""
    if isinstance(store, AsyncProgressReader):
        return store.get_progress

    async def read(run_id: str, tool_call_ids: Sequence[str]) -> Views:
        records: Mapping[str, CanonicalRecord | None] = await store.get_many(
            run_id, tool_call_ids, include_raw=False
        )
        return records

    return read
