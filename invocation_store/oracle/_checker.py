"""The reference oracle: replay a trace through the kernel, stop at the first divergence.

Theory of operation
-------------------
:class:`Oracle` holds what a store would hold, decided only by the kernel: run states,
live records by key, each run's completed and PROJECTING ids, and the calls in
flight. Each trace line is checked for shape (:mod:`._validate`), then replayed: the
kernel computes what the implementation should have observed, and the line's
``observed`` object is compared with it. The first difference is a
:class:`Divergence` naming the line, the operation, the JSON path, the expected and
observed values and the requirement ID it violates (CIS-ORC-2). A line that is not
valid trace JSON raises :class:`MalformedTraceError`.

The replay model is the boundary's: a call's worker holds its own copy of the record
it created, applies the executor's and the projector's outcomes to that copy with
:func:`~invocation_store.kernel.transition`, and completes it with one
compare-and-set (:func:`~invocation_store.kernel.decide_completion`) against what the
store holds at that time, so a sweep that won the race makes the completion
INVALID_TRANSITION.

Modules, by concern: :mod:`._decode` (line decoding), :mod:`._report` (divergences,
malformed lines, reports, the requirement of each code), :mod:`._state` (the replay
state and the store effects), :mod:`._compare` (record comparison), and the line
checkers :mod:`._runs` (header, clock, runs), :mod:`._calls` (the call lifecycle) and
:mod:`._reads` (reads, citations, progress, sweeps); this module dispatches each line
to its checker (:class:`Oracle`) and checks whole traces (:func:`check_lines`).

Memory grows with live state only, never with the trace's length: records and runs
are dropped when the trace clock passes their expiry (a heap of expiry times), a
call is dropped when its result line arrives, and lines are read one at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ._calls import CallLines
from ._decode import OVERLONG, OverlongLine, _decode_fast, decode_line
from ._model import LINE_TYPES
from ._reads import ReadLines
from ._report import CheckReport, Divergence, MalformedTraceError
from ._runs import RunLines
from ._validate import ShapeError, line_checker

__all__ = [
    "OVERLONG",
    "CheckReport",
    "Divergence",
    "MalformedTraceError",
    "Oracle",
    "OverlongLine",
    "check_lines",
    "decode_line",
]


class Oracle(RunLines, CallLines, ReadLines):
    """The replaying checker (CIS-ORC-2). Feed it decoded lines in order with :meth:`feed`.

    ``feed`` returns None while the trace conforms and the first :class:`Divergence`
    otherwise; it raises :class:`MalformedTraceError` for a line that is not valid trace
    JSON. After a divergence the oracle's state is undefined: stop feeding.
    """

    def __init__(self) -> None:
        super().__init__()
        self._handlers: dict[str, tuple[Callable[[object], None], Callable[[dict[str, Any]], Any]]] = {
            op: (line_checker(cls), getattr(self, f"_op_{op}")) for op, cls in LINE_TYPES.items()
        }

    # -- entry point ----------------------------------------------------------------

    def feed(self, line: int, obj: dict[str, Any]) -> Divergence | None:
        """Check and replay one decoded line (``line`` is its 1-based number).

        ``obj`` is the line as :func:`decode_line` (or ``json.loads``) gives it; nested
        objects may also be tuples of (name, value) pairs, which the check turns into
        dicts in place.
        """
        self._line = line
        op = obj.get("op")
        entry = self._handlers.get(op) if type(op) is str else None
        if entry is None:
            raise MalformedTraceError(line, "op", "missing or unknown op")
        check, handler = entry
        try:
            check(obj)
        except ShapeError as exc:
            raise MalformedTraceError(line, exc.where, exc.reason) from None
        if self.limits is None and op != "header":
            raise MalformedTraceError(line, "op", "the first line must be the header")
        now = obj.get("now_ms")
        if now is not None and now != self.now and op != "header":
            self._advance(now)
        found = handler(obj)
        if found is None:
            return None
        where, expected, observed, requirement, message = found
        return Divergence(
            line=line,
            op=str(op),
            where=where,
            expected=expected,
            observed=observed,
            requirement=requirement,
            message=message,
        )


# ---------------------------------------------------------------------------
# Whole traces


def check_lines(
    lines: Iterable[bytes | bytearray | str | OverlongLine], *, max_line_bytes: int = 256 * 1024 * 1024
) -> CheckReport:
    """Check a trace given as an iterable of lines (bytes or str, with or without ``\\n``).

    Streams: each line is decoded, checked and dropped before the next is read, so
    memory grows with the trace's live records and unfinished calls only (CIS-ORC-2).
    Never raises for bad input: a non-UTF-8 line, a line longer than
    ``max_line_bytes``, bad JSON or a bad shape is reported as ``malformed``.
    """
    oracle = Oracle()
    feed = oracle.feed
    count = 0
    try:
        for count, raw_line in enumerate(lines, start=1):
            if type(raw_line) is OverlongLine or len(raw_line) > max_line_bytes:  # type: ignore[arg-type]
                raise MalformedTraceError(count, "<line>", f"longer than {max_line_bytes} bytes")
            if type(raw_line) is bytes or type(raw_line) is bytearray:
                try:
                    text = raw_line.decode("utf-8")
                except UnicodeDecodeError:
                    raise MalformedTraceError(count, "<line>", "not UTF-8") from None
            else:
                text = str(raw_line)
            if text == "\n" or not text:
                raise MalformedTraceError(count, "<line>", "empty line")
            divergence = feed(count, _decode_fast(text, count))
            if divergence is not None:
                return CheckReport(
                    lines=count,
                    divergence=divergence,
                    peak_records=oracle.peak_records,
                    peak_calls=oracle.peak_calls,
                    unfinished=len(oracle.calls),
                )
        if oracle.limits is None:
            raise MalformedTraceError(
                count + 1 if count == 0 else count, "<line>", "the trace has no header line"
            )
    except MalformedTraceError as exc:
        return CheckReport(
            lines=count, malformed=exc, peak_records=oracle.peak_records, peak_calls=oracle.peak_calls
        )
    return CheckReport(
        lines=count,
        peak_records=oracle.peak_records,
        peak_calls=oracle.peak_calls,
        unfinished=len(oracle.calls),
    )
