"""The seed's Redis protocol as a store, so that it runs behind the same ToolBoundary.

The seed keeps one JSON document per call and writes it with four commands:
``SET key json NX PX ttl`` to create (NX is its duplicate check), then, to complete,
``GET`` the document, ``PTTL`` the key and ``SET key json PX remaining`` (the
read-remaining-TTL-then-write that has a race window: between PTTL and SET the TTL
moves on, and a concurrent writer is not seen). Run state, budgets and the completed
list live in this process, as the seed has no shared run state; admission uses the
kernel's ``admit`` so that the same calls are admitted. This is a benchmark
baseline, not a store to use: it exists to compare protocols and nothing else.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import redis
from attrs import asdict

from invocation_store.adapters import wall_clock_ms
from invocation_store.kernel import (
    Admission,
    AdmissionRequest,
    CanonicalRecord,
    ErrorCode,
    EvidenceStatus,
    InvocationStatus,
    Limits,
    RunState,
    admit,
    open_run,
)


def _document(record: CanonicalRecord) -> str:
    return json.dumps(asdict(record), separators=(",", ":"))


def _record(text: bytes | str) -> CanonicalRecord:
    fields: dict[str, Any] = json.loads(text)
    fields["status"] = InvocationStatus(fields["status"])
    if fields["evidence_status"] is not None:
        fields["evidence_status"] = EvidenceStatus(fields["evidence_status"])
    if fields["error_code"] is not None:
        fields["error_code"] = ErrorCode(fields["error_code"])
    return CanonicalRecord(**fields)


class SeedStore:
    """``SET NX PX`` / ``GET`` / ``PTTL`` / ``SET PX`` behind the store interface (benchmarks only)."""

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self.client = client
        self.prefix = prefix
        self._lock = threading.Lock()
        self._runs: dict[str, RunState] = {}
        self._done: dict[str, list[str]] = {}

    def _key(self, run_id: str, tool_call_id: str) -> str:
        return f"{self.prefix}:{{{run_id}}}:seed:{tool_call_id}"

    def now_ms(self) -> int:
        return wall_clock_ms()

    def open_run(
        self, run_id: str, *, deadline_ms: int, ttl_ms: int, tool_call_budget: int, byte_budget: int
    ) -> RunState | ErrorCode:
        with self._lock:
            result = open_run(
                self._runs.get(run_id),
                run_id=run_id,
                now_ms=self.now_ms(),
                deadline_ms=deadline_ms,
                ttl_ms=ttl_ms,
                tool_call_budget=tool_call_budget,
                byte_budget=byte_budget,
            )
            if isinstance(result, RunState):
                self._runs[run_id] = result
            return result

    def create(self, request: AdmissionRequest, limits: Limits) -> Admission | ErrorCode:
        with self._lock:
            result = admit(self._runs.get(request.run_id), None, request, limits, self.now_ms())
            if isinstance(result, ErrorCode):
                return result
            self._runs[request.run_id] = result.run
        record = result.record
        ttl_ms = record.expires_at_ms - record.created_at_ms
        if not self.client.set(
            self._key(record.run_id, record.tool_call_id), _document(record), nx=True, px=ttl_ms
        ):
            return ErrorCode.DUPLICATE_TOOL_CALL
        return result

    def complete(self, before: CanonicalRecord, after: CanonicalRecord) -> CanonicalRecord | ErrorCode:
        key = self._key(before.run_id, before.tool_call_id)
        stored = self.client.get(key)
        remaining = self.client.pttl(key)
        if stored is None or remaining <= 0:
            return ErrorCode.INVALID_TRANSITION
        document = json.loads(stored)
        if document["status"] != "PROJECTING" or document["invocation_token"] != before.invocation_token:
            return ErrorCode.INVALID_TRANSITION
        self.client.set(key, _document(after), px=remaining)
        if after.terminal:
            with self._lock:
                self._done.setdefault(after.run_id, []).append(after.tool_call_id)
        return after

    def get(self, run_id: str, tool_call_id: str) -> CanonicalRecord | None:
        stored = self.client.get(self._key(run_id, tool_call_id))
        return None if stored is None else _record(stored)

    def get_many(
        self, run_id: str, tool_call_ids: Sequence[str], *, include_raw: bool = True
    ) -> Mapping[str, CanonicalRecord | None]:
        return {tcid: self.get(run_id, tcid) for tcid in tool_call_ids}

    def completed(self, run_id: str) -> tuple[str, ...]:
        with self._lock:
            return tuple(self._done.get(run_id, ()))

    def close(self) -> None:
        """The client is the caller's."""
