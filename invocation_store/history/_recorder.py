"""Record a concurrent history from any store (CIS-HIST-1).

:class:`HistoryRecorder` is a :class:`~invocation_store.adapters.ForwardingStore`:
hand one to each worker (a thread or a process: one recorder per thread of
control, identified by its ``process`` number) around the store they share, and
give it to a :class:`~invocation_store.boundary.ToolBoundary` as its store, so every
boundary operation is recorded as the store operations it performs. Each operation
writes its ``invoke`` line before calling the store and its ``ok`` line (or
``info``, when the store raised: the outcome is unknown) after it returned, so the
order of the lines is real time.

:class:`HistoryWriter` appends lines to one file with ``O_APPEND`` and one
``write`` per line, so threads and processes may share it: each line lands whole,
and in the order the writes happened.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TypeVar

from .._decided import watch_decisions
from ..adapters import ForwardingStore, InvocationStore
from ..kernel import Admission, AdmissionRequest, CanonicalRecord, ErrorCode, Limits, RunState
from ._format import encode_args, encode_result, header_line

__all__ = ["HistoryRecorder", "HistoryWriter"]

_R = TypeVar("_R")

#: Operation ids of one recorder are ``process * ID_STRIDE + n``: unique across workers.
ID_STRIDE: Final = 1_000_000_000


class HistoryWriter:
    """Appends history lines (JSON objects) to ``path``; safe across threads and processes.

    ``limits``: when given, the file is created (truncated) and the header written;
    workers in other processes open the same path without ``limits`` and append.
    """

    def __init__(
        self, path: str | os.PathLike[str], limits: Limits | None = None, implementation: str | None = None
    ) -> None:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        if limits is not None:
            flags |= os.O_TRUNC
        self.path = os.fspath(path)
        self._fd: int | None = os.open(self.path, flags, 0o600)
        if limits is not None:
            self.write(header_line(limits, implementation))

    def write(self, obj: Mapping[str, Any]) -> None:
        """Append one line (compact JSON, ASCII-escaped, ``\\n``-terminated) in one ``write``."""
        if self._fd is None:
            raise ValueError("the history writer is closed")
        data = (json.dumps(obj, ensure_ascii=True, separators=(",", ":")) + "\n").encode("ascii")
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]

    def close(self) -> None:
        """Close the file (idempotent)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class HistoryRecorder(ForwardingStore):
    """A store wrapper that records every operation as history lines (CIS-HIST-1).

    ``process`` (an int >= 0) identifies the worker; it must not be shared by two
    threads (a process has at most one operation outstanding). ``now_ms`` of an
    operation is the request's for ``create`` and the store clock's, read just
    before the call, for the others: keep the clock still while operations that
    read it are in flight, or record from a store that takes the time from its
    caller. Exceptions from the store are re-raised unchanged after an ``info``
    line naming their type.
    """

    def __init__(self, inner: InvocationStore, writer: HistoryWriter, process: int) -> None:
        super().__init__(inner)
        self.writer = writer
        self.process = process
        self._ids = itertools.count(process * ID_STRIDE)

    def _record(self, name: str, now_ms: int, args: Mapping[str, Any], call: Callable[[], _R]) -> _R:
        """Write ``name``'s invoke line, run ``call``, write its completion line; an ``ok`` line carries
        the time the store reported it decided at, on its own clock (CIS-STORE-10)."""
        op_id = next(self._ids)
        self.writer.write(
            {
                "type": "invoke",
                "id": op_id,
                "process": self.process,
                "op": name,
                "args": encode_args(name, {**args, "now_ms": now_ms}),
            }
        )
        try:
            with watch_decisions() as decided:
                result = call()
        except BaseException as exc:
            self.writer.write(
                {"type": "info", "id": op_id, "process": self.process, "reason": type(exc).__name__}
            )
            raise
        line = {"type": "ok", "id": op_id, "process": self.process, "result": encode_result(name, result)}
        if decided:  # the store reported the time it decided at (its clock)
            line["decided_at_ms"] = decided[-1]
        self.writer.write(line)
        return result

    def open_run(
        self, run_id: str, *, deadline_ms: int, ttl_ms: int, tool_call_budget: int, byte_budget: int
    ) -> RunState | ErrorCode:
        """Recorded ``open_run``."""
        args = {
            "run_id": run_id,
            "deadline_ms": deadline_ms,
            "ttl_ms": ttl_ms,
            "tool_call_budget": tool_call_budget,
            "byte_budget": byte_budget,
        }
        return self._record(
            "open_run",
            self.inner.now_ms(),
            args,
            lambda: self.inner.open_run(
                run_id,
                deadline_ms=deadline_ms,
                ttl_ms=ttl_ms,
                tool_call_budget=tool_call_budget,
                byte_budget=byte_budget,
            ),
        )

    def cancel_run(self, run_id: str) -> RunState | ErrorCode:
        """Recorded ``cancel_run``."""
        return self._record(
            "cancel_run", self.inner.now_ms(), {"run_id": run_id}, lambda: self.inner.cancel_run(run_id)
        )

    def close_run(self, run_id: str) -> RunState | ErrorCode:
        """Recorded ``close_run``."""
        return self._record(
            "close_run", self.inner.now_ms(), {"run_id": run_id}, lambda: self.inner.close_run(run_id)
        )

    def get_run(self, run_id: str) -> RunState | None:
        """Recorded ``get_run``."""
        return self._record(
            "get_run", self.inner.now_ms(), {"run_id": run_id}, lambda: self.inner.get_run(run_id)
        )

    def create(self, request: AdmissionRequest, limits: Limits) -> Admission | ErrorCode:
        """Recorded ``create`` (its ``now_ms`` is the store clock's, as for every operation)."""
        args = {
            "run_id": request.run_id,
            "tool_call_id": request.tool_call_id,
            "tool_name": request.tool_name,
            "request_json": request.request_json,
            "invocation_token": request.invocation_token,
            "limits": limits,
        }
        return self._record("create", self.inner.now_ms(), args, lambda: self.inner.create(request, limits))

    def complete(self, before: CanonicalRecord, after: CanonicalRecord) -> CanonicalRecord | ErrorCode:
        """Recorded ``complete``."""
        args = {"before": before, "after": after}
        return self._record("complete", self.inner.now_ms(), args, lambda: self.inner.complete(before, after))

    def get(self, run_id: str, tool_call_id: str) -> CanonicalRecord | None:
        """Recorded ``get``."""
        args = {"run_id": run_id, "tool_call_id": tool_call_id}
        return self._record("get", self.inner.now_ms(), args, lambda: self.inner.get(run_id, tool_call_id))

    def get_many(
        self, run_id: str, tool_call_ids: Sequence[str], *, include_raw: bool = True
    ) -> Mapping[str, CanonicalRecord | None]:
        """Recorded ``get_many``."""
        ids = tuple(tool_call_ids)
        args = {"run_id": run_id, "tool_call_ids": ids, "include_raw": include_raw}
        return self._record(
            "get_many",
            self.inner.now_ms(),
            args,
            lambda: self.inner.get_many(run_id, ids, include_raw=include_raw),
        )

    def completed(self, run_id: str) -> tuple[str, ...]:
        """Recorded ``completed``."""
        return self._record(
            "completed", self.inner.now_ms(), {"run_id": run_id}, lambda: self.inner.completed(run_id)
        )

    def calls(self, run_id: str) -> tuple[str, ...]:
        """Recorded ``calls``."""
        return self._record(
            "calls", self.inner.now_ms(), {"run_id": run_id}, lambda: self.inner.calls(run_id)
        )
