"""A small boundary with one read-only tool (``lookup``) and one writable one, for the adapters."""

from __future__ import annotations

import json
from typing import Any

from invocation_store import (
    AsyncMemoryStore,
    AsyncToolBoundary,
    EvidenceStatus,
    MemoryStore,
    Projection,
    RunContext,
    ToolBoundary,
    ToolRegistry,
    ToolSpec,
)

RUN = "run-int"


class Lookup:
    """Counts its calls and echoes the query; the raw response holds a harness-only secret."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(self, arguments: Any) -> dict[str, Any]:
        self.calls.append(dict(arguments))
        return {"rows": [arguments.get("q")], "secret": "RAW-ONLY"}


def project(raw: str, arguments: Any) -> Projection:
    rows = json.loads(raw)["rows"]
    return Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content=f"{len(rows)} row", scope="db")


def registry(lookup: Lookup) -> ToolRegistry:
    return ToolRegistry(
        [
            ToolSpec(name="lookup", executor=lookup, projector=project),
            ToolSpec(name="restart", executor=lookup, projector=project, read_only=False),
        ]
    )


def sync_boundary(lookup: Lookup) -> tuple[ToolBoundary, MemoryStore, RunContext]:
    store = MemoryStore()
    boundary = ToolBoundary(store, registry(lookup))
    context = boundary.open_run(
        RUN, deadline_ms=store.now_ms() + 60_000, ttl_ms=60_000, tool_call_budget=20, byte_budget=1 << 20
    )
    assert isinstance(context, RunContext)
    return boundary, store, context


async def async_boundary(lookup: Lookup) -> tuple[AsyncToolBoundary, AsyncMemoryStore, RunContext]:
    store = AsyncMemoryStore()
    boundary = AsyncToolBoundary(store, registry(lookup))
    context = await boundary.open_run(
        RUN, deadline_ms=store.now_ms() + 60_000, ttl_ms=60_000, tool_call_budget=20, byte_budget=1 << 20
    )
    assert isinstance(context, RunContext)
    return boundary, store, context


def code(text: str) -> str | None:
    """The code of an agent text (None on success)."""
    payload = json.loads(text)
    return None if payload["ok"] else payload["code"]
