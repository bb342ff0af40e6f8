"""The stateful machine's fake tools: behaviour as data, shared by executors and the model.

Every fake tool is a pure function of its arguments (a JSON object the machine
writes), so that the machine can predict, with the kernel, exactly what the
boundary must store and return. The only side effects of a fake executor are the
ones the machine observes on purpose: it records the call's ``nonce`` (to count
executions per key, CIS-BND-6), advances its clock by ``lat`` ms (tool latency), and
the ``slow`` tool blocks until the machine releases it (a deterministic timeout).

Arguments: ``{"lat": ms, "mode": m, "nonce": n, "pad": text, "q": word, "size": s}``.
``mode`` chooses the outcome (see :data:`MODES`); ``size`` the length of the raw
response; ``pad`` inflates the request. Raw responses start with :data:`RAW_MARK` and
exception texts contain :data:`SECRET_MARK`, so that anything agent-facing can be
scanned for them (CIS-BND-4, CIS-ERR-1).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Mapping
from typing import Any, Final, cast

from ..boundary import ToolRegistry, ToolSpec
from ..kernel import EvidenceStatus, Limits, Projection

__all__ = [
    "AGENT_FORBIDDEN",
    "MACHINE_LIMITS",
    "MODES",
    "RAW_MARK",
    "SECRET_MARK",
    "SLOW_TOOL",
    "TOOL",
    "ToolKit",
    "arguments",
    "expected_projection",
    "expected_raw",
    "raw_text",
]

#: Small limits, so that every size edge is reached with small data (UTF-8 bytes).
MACHINE_LIMITS: Final = Limits(
    request_bytes=128,
    raw_bytes=256,
    agent_result_bytes=64,
    record_bytes=440,
    max_json_depth=8,
    max_facts=2,
    max_fact_bytes=80,
)

#: Every raw response starts with this; no agent-facing text may contain it.
RAW_MARK: Final = "\u27e6raw"
#: Every exception a fake tool raises carries this; no agent-facing text may contain it.
SECRET_MARK: Final = "SECRET-"  # noqa: S105 - a marker to scan for, not a credential
#: Fragments that must never reach the agent: raw data, exception text, tracebacks,
#: Redis key fragments and URLs (CIS-ERR-1, CIS-BND-4).
AGENT_FORBIDDEN: Final = (RAW_MARK, SECRET_MARK, "Traceback", "redis://", "rediss://", "unix://", ":{")

#: The tool that behaves as its ``mode`` says.
TOOL: Final = "search"
#: A tool whose executor never returns by itself, with a 1 ms timeout (CIS-FAIL-3).
SLOW_TOOL: Final = "slow"

#: Outcome modes of the ``search`` tool.
MODES: Final = (
    "found",  # raw text; EVIDENCE_FOUND
    "none",  # raw text; NO_EVIDENCE with a scope
    "json",  # raw is a dict, serialized by the boundary as compact sorted JSON
    "raise",  # executor raises (EXECUTION_FAILED)
    "unserializable",  # executor returns a value JSON cannot encode (SERIALIZATION_FAILED)
    "surrogate",  # raw text with a lone surrogate: no UTF-8 form (SERIALIZATION_FAILED)
    "proj_raise",  # projector raises (PROJECTION_FAILED)
    "proj_status",  # projector returns an unknown evidence status (PROJECTION_INVALID)
    "proj_blank",  # NO_EVIDENCE with a blank scope (PROJECTION_INVALID)
    "proj_type",  # projector returns something that is not a Projection (PROJECTION_INVALID)
    "proj_huge",  # agent result over its limit (RESULT_TOO_LARGE)
)


class _ToolError(Exception):
    """What a fake tool raises; its text carries :data:`SECRET_MARK` and must never leak."""


def arguments(*, mode: str, q: str, size: int, lat: int, pad: str, nonce: int) -> str:
    """The arguments JSON text of one call of the ``search`` tool (compact, sorted keys)."""
    return json.dumps(
        {"lat": lat, "mode": mode, "nonce": nonce, "pad": pad, "q": q, "size": size},
        separators=(",", ":"),
        sort_keys=True,
        ensure_ascii=False,
    )


def expected_raw(args: Mapping[str, Any]) -> object:
    """What the ``search`` executor returns for ``args`` (it raises for ``raise``).

    Sizes: ``size`` two-byte characters after the mark, so byte and character counts
    differ (a character-counting limit would be caught).
    """
    mode = args.get("mode")
    nonce = args.get("nonce")
    body = f"{RAW_MARK} {nonce}\u27e7 {args.get('q')} " + "\u00b7" * int(args.get("size", 0))
    if mode == "json":
        return {
            "mark": RAW_MARK,
            "nonce": nonce,
            "q": args.get("q"),
            "tail": "\u00b7" * int(args.get("size", 0)),
        }
    if mode == "unserializable":
        return {"nonce": nonce, "bad": {1, 2}}
    if mode == "surrogate":
        return body + "\ud800"
    return body


def raw_text(value: object) -> str | None:
    """The boundary's documented normalisation of an executor's value (CIS-FAIL-4).

    A ``str`` is kept; anything else becomes compact, key-sorted JSON without
    NaN/Infinity (``ensure_ascii=False``); a value JSON cannot encode gives None.
    """
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        return None


def expected_projection(raw: str, args: Mapping[str, Any]) -> object:
    """What the ``search`` projector returns for ``raw`` (it raises for ``proj_raise``).

    Contents never include the raw text: only sizes and the query word.
    """
    mode = args.get("mode")
    q = str(args.get("q"))
    if mode == "none":
        return Projection(
            evidence_status=EvidenceStatus.NO_EVIDENCE, content=f"no match: {q}", scope=f"q={q}"
        )
    if mode == "proj_status":
        return Projection(evidence_status="MAYBE", content="?", scope="all")
    if mode == "proj_blank":
        return Projection(evidence_status=EvidenceStatus.NO_EVIDENCE, content="", scope="  ")
    if mode == "proj_type":
        return {"evidence_status": "EVIDENCE_FOUND"}
    if mode == "proj_huge":
        return Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content="y" * 65, scope="")
    return Projection(
        evidence_status=EvidenceStatus.EVIDENCE_FOUND,
        content=f"{q}: {len(raw)} chars",
        scope=f"q={q}",
    )


class ToolKit:
    """The fake tools of one target: a registry plus what its executors observed.

    ``advance`` moves the target's clock (tool latency, in ms). ``executed`` lists the
    nonces the executors were called with, in order (CIS-BND-6). ``asynchronous``
    builds coroutine executors/projectors for :class:`AsyncToolBoundary`. Call
    :meth:`release` at teardown to let blocked ``slow`` executors return.
    """

    def __init__(self, advance: Callable[[int], object], *, asynchronous: bool = False) -> None:
        self.executed: list[object] = []
        self._advance = advance
        self._gate = threading.Event()
        self._agate: asyncio.Event | None = None
        self.registry = self._registry(asynchronous)

    def release(self) -> None:
        """Let every blocked ``slow`` executor return (its result is discarded)."""
        self._gate.set()
        if self._agate is not None:
            self._agate.set()

    # -- sync behaviour -------------------------------------------------------------

    def _execute(self, args: Mapping[str, Any]) -> object:
        self.executed.append(args.get("nonce"))
        lat = args.get("lat", 0)
        if isinstance(lat, int) and lat > 0:
            self._advance(lat)
        if args.get("mode") == "raise":
            raise _ToolError(f"{SECRET_MARK}{args.get('nonce')} Traceback (most recent call last)")
        return expected_raw(args)

    @staticmethod
    def _project(raw: str, args: Mapping[str, Any]) -> Projection:
        if args.get("mode") == "proj_raise":
            raise _ToolError(f"{SECRET_MARK}projector {raw[:8]}")
        return cast(Projection, expected_projection(raw, args))

    def _slow(self, args: Mapping[str, Any]) -> object:
        self.executed.append(args.get("nonce"))
        self._gate.wait(timeout=30)
        return f"{RAW_MARK} late"

    # -- async behaviour ------------------------------------------------------------

    async def _aexecute(self, args: Mapping[str, Any]) -> object:
        return self._execute(args)

    async def _aproject(self, raw: str, args: Mapping[str, Any]) -> Projection:
        return self._project(raw, args)

    async def _aslow(self, args: Mapping[str, Any]) -> object:
        self.executed.append(args.get("nonce"))
        if self._agate is None:
            self._agate = asyncio.Event()
        await self._agate.wait()
        return f"{RAW_MARK} late"

    def _registry(self, asynchronous: bool) -> ToolRegistry:
        """The machine's tools, sync or async; a tool whose read-only flag is a string fails closed
        (CIS-PRE-5)."""
        execute: Any = self._aexecute if asynchronous else self._execute
        project: Any = self._aproject if asynchronous else self._project
        slow: Any = self._aslow if asynchronous else self._slow
        flag: Any = "true"  # a string flag fails closed
        return ToolRegistry(
            [
                ToolSpec(name=TOOL, executor=execute, projector=project),
                ToolSpec(name=SLOW_TOOL, executor=slow, projector=project, timeout_ms=1),
                ToolSpec(name="forbidden", executor=execute, projector=project, authorized=False),
                ToolSpec(name="writer", executor=execute, projector=project, read_only=False),
                ToolSpec(name="flagged", executor=execute, projector=project, authorized=flag),
            ]
        )
