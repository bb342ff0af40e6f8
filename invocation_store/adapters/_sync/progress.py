# Generated from invocation_store/adapters/_async/progress.py by scripts/unasync.py: do not edit by hand.
"""Progress reads: only the fields facts need (CIS-PERF-3, CIS-PROG-1, CIS-PROG-5), written once.

Every store of this package has ``get_progress(run_id, tool_call_ids)`` (part of the
store Protocol): like ``get_many(..., include_raw=False)`` but answering, per id, only a
:class:`~invocation_store.kernel.ProgressView` (or ``None``), read in one round trip
(Redis: one pipelined ``HMGET`` of :data:`~invocation_store.kernel.PROGRESS_FIELDS`
per record, never the request text, the raw response or the token). A store written
before the Protocol named it may lack it: :func:`progress_reader` then falls back
to ``get_many(..., include_raw=False)``. The sync flavour is generated from this
source by ``scripts/unasync.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from ...kernel import CanonicalRecord, ProgressView

__all__ = ["ProgressReader", "Views", "progress_reader", "read_progress"]

#: Progress views by tool_call_id (None: absent, unsafe or lapsed).
ViewMap = Mapping[str, ProgressView | None]

Views = Mapping[str, ProgressView | None] | Mapping[str, CanonicalRecord | None]


@runtime_checkable
class ProgressReader(Protocol):
    """A store with a progress read (see the module docstring)."""

    def get_progress(self, run_id: str, tool_call_ids: Sequence[str]) -> ViewMap:
        """Views of the records of ``tool_call_ids`` in run ``run_id``; None if absent or expired."""
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


def read_progress(store: Any, run_id: str, tool_call_ids: Sequence[str]) -> ViewMap:
    """``store``'s progress views of ``tool_call_ids``, through :func:`progress_reader`."""
    found = progress_reader(store)(run_id, tool_call_ids)
    return {
        tcid: value if value is None or isinstance(value, ProgressView) else ProgressView.of(value)
        for tcid, value in found.items()
    }
