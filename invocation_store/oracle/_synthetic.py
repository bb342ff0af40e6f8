"""Long conforming traces for benchmarks and memory tests, recorded from our own stack.

:func:`write_synthetic_trace` records one *episode* through a real
:class:`~invocation_store.adapters.MemoryStore`, :class:`~invocation_store.boundary.ToolBoundary`
and :class:`~._recorder.RecordingBoundary` (a run with successes, NO_EVIDENCE,
failures, refusals, reads, citations, a sweep, progress, close, and a clock jump past
every expiry), then writes it again and again with a new run id, shifted call
numbers and shifted times. Episodes never overlap in time and each ends with all its
state expired, so the oracle's live state is the same whatever the trace's length.
"""

from __future__ import annotations

import io
import re
from typing import Final, TextIO

from ..adapters import MemoryStore
from ..boundary import ToolRegistry, ToolSpec
from ..kernel import EvidenceStatus, Limits, Projection, RunContext, ToolCallEnvelope
from ..testing import FakeClock
from ._recorder import RecordingBoundary

__all__ = ["write_synthetic_trace"]

_BASE_MS: Final = 7_000_000_000_000  # 13 digits: "70000" + 8 digits of episode time
_EPISODE_SPAN_MS: Final = 100_000_000  # < 10**8: an episode's times differ only in the last 8 digits
_RUN: Final = "benchrun"
_TIME = re.compile(r"(?<![0-9])70000(?=[0-9]{8}(?![0-9]))")
_CALL = re.compile(r'"call":([0-9]+)')


def _registry() -> ToolRegistry:
    def search(arguments: object) -> str:
        query = arguments.get("q", "") if isinstance(arguments, dict) else ""
        return '{"hits":["' + str(query) + '-a","' + str(query) + '-b"],"source":"synthetic index"}'

    def found(raw: str, arguments: object) -> Projection:
        return Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content=raw[:40], scope="index")

    def nothing(raw: str, arguments: object) -> Projection:
        return Projection(evidence_status=EvidenceStatus.NO_EVIDENCE, content="", scope="the whole index")

    def invalid(raw: str, arguments: object) -> Projection:
        return Projection(evidence_status="MAYBE", content="?", scope="")

    def failing(arguments: object) -> str:
        raise RuntimeError("synthetic failure")

    def large(arguments: object) -> str:
        return "x" * 5000

    return ToolRegistry(
        [
            ToolSpec(name="search", executor=search, projector=found),
            ToolSpec(name="lookup", executor=search, projector=nothing),
            ToolSpec(name="guess", executor=search, projector=invalid),
            ToolSpec(name="flaky", executor=failing, projector=found),
            ToolSpec(name="dump", executor=large, projector=found),
            ToolSpec(name="write", executor=search, projector=found, read_only=False),
        ]
    )


def record_episode(calls: int = 24) -> tuple[str, str]:
    """Record one episode; returns (header line, episode lines) as text."""
    clock = FakeClock(_BASE_MS)
    sink = io.StringIO()
    limits = Limits(raw_bytes=4096)
    boundary = RecordingBoundary(
        sink, MemoryStore(clock), _registry(), limits=limits, implementation="synthetic"
    )
    context = boundary.open_run(
        _RUN, deadline_ms=clock.now + 600_000, ttl_ms=3_600_000, tool_call_budget=calls, byte_budget=1 << 20
    )
    assert isinstance(context, RunContext)
    tools = ("search", "search", "lookup", "search", "guess", "flaky", "search", "dump", "write")
    for index in range(calls):
        tool = tools[index % len(tools)]
        envelope = ToolCallEnvelope(
            run_id=_RUN,
            tool_call_id=f"call_{index:04d}",
            tool_name=tool,
            arguments='{"q":"topic ' + str(index) + '","limit":5}',
        )
        boundary.invoke(context, envelope)
        clock.advance(250)
        if index % 4 == 0:
            boundary.read(_RUN, envelope.tool_call_id or "")
            boundary.cite(context, envelope.tool_call_id or "")
        if index % 6 == 5:
            boundary.invoke(context, envelope)  # a duplicate
    boundary.invoke(
        context, ToolCallEnvelope(run_id=_RUN, tool_call_id=None, tool_name="search", arguments="{}")
    )
    boundary.sweep_stale(context, 60_000)
    boundary.project_progress(context)
    boundary.close_run(context)
    clock.advance(5_000_000)  # past every record's and the run's expiry
    boundary.tick()
    lines = sink.getvalue().splitlines(keepends=True)
    return lines[0], "".join(lines[1:])


def write_synthetic_trace(out: TextIO, lines: int) -> int:
    """Write a conforming trace of at least ``lines`` lines to ``out``; returns the count written.

    Episode ``i`` uses run id ``run<i>``, call numbers ``<i+1><nnn>`` and times
    shifted by ``i * 10**8`` ms (all in integer ms).
    """
    header, episode = record_episode()
    per_episode = episode.count("\n")
    template = _CALL.sub(lambda m: f'"call":\x02{int(m.group(1)):03d}', _TIME.sub("\x00", episode))
    template = template.replace(f'"{_RUN}"', '"\x01"')
    out.write(header)
    written = 1
    index = 0
    while written < lines:
        chunk = (
            template.replace("\x00", str(70000 + index))
            .replace("\x01", f"run{index:08d}")
            .replace("\x02", str(index + 1))
        )
        out.write(chunk)
        written += per_episode
        index += 1
    return written
