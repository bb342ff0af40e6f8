"""A planted race for the history checker: a create done as a read, then a write (CIS-HIST-3).

:class:`RacyCreateStore` decides admission with the kernel on what it *read*, then
writes what the kernel decided in a second step, outside the lock, as a store
doing ``HGETALL`` then ``HSET`` instead of one script would. Each step alone is
correct; two workers in the gap both admit the same key, or both spend the last
unit of budget. Sequential tests cannot see it; ``check-history`` on a concurrent
history must (``tests/history/test_jepsen.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..adapters import MemoryStore
from ..kernel import Admission, AdmissionRequest, ErrorCode, Limits, admit

__all__ = ["RacyCreateStore", "racy_postgres_store"]


class RacyCreateStore(MemoryStore):
    """A MemoryStore whose ``create`` reads, decides, sleeps ``gap_s`` seconds, then writes.

    The gap stands for the network round trip between a read and a write.
    """

    def __init__(self, clock: Callable[[], int] | None = None, gap_s: float = 0.002) -> None:
        super().__init__(clock)
        self.gap_s = gap_s

    def create(self, request: AdmissionRequest, limits: Limits) -> Admission | ErrorCode:
        """Read the run and the key, let the kernel decide, then write: two steps, not one."""
        with self._lock:
            now = self._clock()
            run = self._run(request.run_id, now)
            existing = self._record(request.run_id, request.tool_call_id, now)
        result = admit(run, existing, request, limits, now)
        if isinstance(result, Admission) and not result.replayed:
            time.sleep(self.gap_s)
            with self._lock:
                self._runs[request.run_id] = result.run
                self._records[(request.run_id, request.tool_call_id)] = result.record
                self._calls.setdefault(request.run_id, []).append(request.tool_call_id)
        return result


def racy_postgres_store(store: Any, gap_s: float = 0.002) -> Any:
    """``store`` (a PostgresStore) with a planted race: ``create`` reads, then writes in a second transaction.

    The first transaction reads the run and the record without holding their locks
    past it; the kernel decides on what was read; after ``gap_s`` seconds a second
    transaction writes the decision (the call-list insert ignoring a conflict, as a
    store that trusts its read would). Two workers in the gap both admit one key, or
    both spend the last unit of budget: ``check-history`` must catch it.
    """
    from ..adapters._sql import NOW, Execute  # noqa: PLC0415 - only for this test double

    sql = store._sql

    def create(request: AdmissionRequest, limits: Limits) -> Admission | ErrorCode:
        def read() -> Any:
            run = yield from sql._run(request.run_id, lock=False)
            existing = yield from sql._record(request.run_id, request.tool_call_id)
            now = yield NOW
            return run, existing, now

        run, existing, now = store._do(read, write=False)
        result = admit(run, existing, request, limits, now)
        if isinstance(result, Admission) and not result.replayed:
            time.sleep(gap_s)
            record, new_run = result.record, result.run

            def write() -> Any:
                # The store's own writes, with the call-list insert told to skip a row another
                # racing create wrote (its decision was taken outside the locks).
                for step in sql.write_admission(record, new_run):
                    if isinstance(step, Execute) and step.sql == sql.insert_call:
                        yield Execute(step.sql + " ON CONFLICT DO NOTHING", step.params)
                    else:
                        yield step

            store._do(write)
        return result

    store.create = create
    return store
