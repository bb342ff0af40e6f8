"""The header, clock and run lines of a trace (CIS-RUN-1, CIS-RUN-2, CIS-RETRY-3)."""

from __future__ import annotations

import heapq
from typing import Any

from .. import codec
from ..kernel import (
    ErrorCode,
    RunState,
    cancel_run,
    close_run,
    open_run,
)
from ._model import TRACE_FORMAT, TRACE_VERSION, Header
from ._report import (
    SIZE_MISREADINGS,
    _Mismatch,
    _mismatch,
)
from ._state import (
    OracleState,
    _RunBook,
)
from ._validate import structure_line
from ._views import run_view


class RunLines(OracleState):
    """Checkers of the header, clock, run_open, run_cancel and run_close lines."""

    def _op_header(self, obj: dict[str, Any]) -> _Mismatch | None:
        if self.limits is not None:
            raise self._malformed("op", "a second header")
        if obj["format"] != TRACE_FORMAT:
            raise self._malformed("format", f'expected "{TRACE_FORMAT}"')
        if obj["version"] != TRACE_VERSION:
            raise self._malformed("version", f"unsupported version (this oracle reads {TRACE_VERSION})")
        header = structure_line(obj)  # the strict cattrs codec, on the one cold line
        assert isinstance(header, Header)
        self.limits = codec.limits_from_obj(codec.unstructure(header.limits))
        self.now = header.now_ms
        return None

    def _op_clock(self, _obj: dict[str, Any]) -> _Mismatch | None:
        return None  # the clock already moved in feed()

    def _op_run_open(self, obj: dict[str, Any]) -> _Mismatch | None:
        run_id = obj["run_id"]
        existing = self._live_run(run_id)
        try:
            result = open_run(
                existing,
                run_id=run_id,
                now_ms=self.now,
                deadline_ms=obj["deadline_ms"],
                ttl_ms=obj["ttl_ms"],
                tool_call_budget=obj["tool_call_budget"],
                byte_budget=obj["byte_budget"],
            )
        except ValueError:
            raise self._malformed("<line>", "run parameters out of range") from None
        requirement = "CIS-RETRY-3" if existing is not None else "CIS-RUN-1"
        if isinstance(result, RunState) and result is not existing:
            self.runs[run_id] = result
            self.books[run_id] = _RunBook()
            heapq.heappush(self._run_expiry, (result.expires_at_ms, run_id))
        return self._run_outcome(obj, run_id, result, requirement)

    def _op_run_cancel(self, obj: dict[str, Any]) -> _Mismatch | None:
        run_id = obj["run_id"]
        result = cancel_run(self._live_run(run_id), self.now)
        if isinstance(result, RunState):
            self.runs[run_id] = result
        return self._run_outcome(obj, run_id, result, "CIS-RUN-2")

    def _op_run_close(self, obj: dict[str, Any]) -> _Mismatch | None:
        run_id = obj["run_id"]
        result = close_run(self._live_run(run_id), self.now)
        if isinstance(result, RunState):
            self.runs[run_id] = result
        return self._run_outcome(obj, run_id, result, "CIS-RUN-2")

    def _bytes_used_misreading(self, run_id: str, expected: int, value: object) -> str | None:
        """Why a run's ``bytes_used`` is ``value``, not ``expected``, when it is another count of its texts.

        The run's bytes are the sizes of its admitted arguments and of what its
        completions stored; an implementation counting them in UTF-16 code units (or
        code points, or with replacement bytes) reports their sum in that unit, though
        the trace may omit the record sizes that would show it (CIS-SIZE-1).
        """
        book = self.books.get(run_id)
        if book is None or not isinstance(value, int) or isinstance(value, bool):
            return None
        for (unit, _count), other in zip(SIZE_MISREADINGS, book.misread, strict=True):
            if value == other != expected:
                return (
                    f"sizes are UTF-8 bytes: bytes_used = {expected} UTF-8 bytes (the run's admitted "
                    f"arguments and what its completions stored), but the implementation reported {value}, "
                    f"the same texts' length in {unit}"
                )
        return None

    def _run_outcome(
        self, obj: dict[str, Any], run_id: str, result: RunState | ErrorCode, requirement: str
    ) -> _Mismatch | None:
        observed = obj["observed"]
        expected_code = result.value if isinstance(result, ErrorCode) else None
        if observed["code"] != expected_code:
            return _mismatch(
                "observed.code",
                expected_code,
                observed["code"],
                requirement,
                "the run operation's outcome differs",
            )
        seen = observed["run"]
        if seen is None:
            return None
        run = result if isinstance(result, RunState) else self._live_run(run_id)
        if run is None:
            return _mismatch("observed.run", None, seen, requirement, "the run should not exist")
        expected = run_view(run)
        for name in expected:
            value = seen.get(name)
            if value is None and name not in ("run_id", "status"):
                continue
            if value != expected[name]:
                misread = (
                    self._bytes_used_misreading(run_id, expected[name], value)
                    if name == "bytes_used"
                    else None
                )
                if misread is not None:
                    return _mismatch(f"observed.run.{name}", expected[name], value, "CIS-SIZE-1", misread)
                field_requirement = {"tool_calls_used": "CIS-RUN-5", "bytes_used": "CIS-RUN-6"}.get(
                    name, requirement
                )
                return _mismatch(
                    f"observed.run.{name}",
                    expected[name],
                    value,
                    field_requirement,
                    f"the run's {name} differs",
                )
        return None
