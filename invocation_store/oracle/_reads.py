"""The read, cite, progress and sweep lines of a trace (CIS-TTL-4, CIS-REF-1..3, CIS-LIFE-7)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..kernel import (
    CanonicalRecord,
    CitationKind,
    Completion,
    ErrorCode,
    InvocationStatus,
    SweptStale,
    cite,
    decide_completion,
    is_safe_id,
    project_progress,
    sweep_candidates,
    transition,
)
from ._compare import RecordChecks
from ._explain import explain_sweep
from ._report import (
    _because,
    _contains_raw,
    _Mismatch,
    _mismatch,
)
from ._views import citation_view, progress_view


class ReadLines(RecordChecks):
    """Checkers of the read, cite, progress and sweep lines."""

    def _op_read(self, obj: dict[str, Any]) -> _Mismatch | None:
        key = (obj["run_id"], obj["tool_call_id"])
        record = self._live_record(key)
        seen = obj["observed"]["record"]
        if record is None:
            if seen is not None:
                return _mismatch(
                    "observed.record",
                    None,
                    seen,
                    "CIS-TTL-4",
                    "the record should read as absent (missing or expired)",
                )
            return None
        if seen is None:
            return _mismatch(
                "observed.record",
                record.status.value,
                None,
                "CIS-TTL-1",
                "the record vanished before its expiry",
            )
        status_requirement = "CIS-LIFE-3" if record.terminal else "CIS-LIFE-2"
        return self._compare_record(seen, record, "read", status_requirement, raw=record.raw_response)

    def _op_cite(self, obj: dict[str, Any]) -> _Mismatch | None:
        context_run_id = obj["context_run_id"]
        if not is_safe_id(context_run_id):
            raise self._malformed("context_run_id", "a RunContext holds a safe run id")
        tool_call_id = obj["tool_call_id"]
        record = self._live_record((context_run_id, tool_call_id))
        expected = citation_view(cite(context_run_id, tool_call_id, record, self.now))
        seen = obj["observed"]["citation"]
        raw = None if record is None else record.raw_response
        for name in ("kind", "reason", "tool_call_id", "content", "scope"):
            value = seen[name]
            if value == expected[name]:
                continue
            where = f"observed.citation.{name}"
            if _contains_raw(value, raw):
                return _mismatch(
                    where, expected[name], value, "CIS-BND-4", "the citation carries the raw response"
                )
            if name == "tool_call_id" and expected[name] is None:
                return _mismatch(
                    where, None, value, "CIS-ERR-1", "an id that is not a safe id is never echoed: null"
                )
            kind = expected["kind"]
            requirement = {
                CitationKind.EVIDENCE.value: "CIS-REF-1",
                CitationKind.NEGATIVE_OBSERVATION.value: "CIS-REF-2",
            }.get(kind, "CIS-REF-3")
            return _mismatch(
                where, expected[name], value, requirement, "the citation differs from the kernel's"
            )
        return None

    def _op_progress(self, obj: dict[str, Any]) -> _Mismatch | None:
        limits = self.limits
        assert limits is not None
        run_id = obj["context_run_id"]
        if not is_safe_id(run_id):
            raise self._malformed("context_run_id", "a RunContext holds a safe run id")
        book = self.books.get(run_id) if self._live_run(run_id) is not None else None
        identities = () if book is None else tuple(book.done)
        records = {tcid: self._live_record((run_id, tcid)) for tcid in identities}
        report = project_progress(run_id, identities, records, self.now, limits)
        seen = obj["observed"]
        expected = progress_view(report)
        facts = expected["facts"]
        for index in range(max(len(facts), len(seen["facts"]))):
            want = facts[index] if index < len(facts) else None
            got = seen["facts"][index] if index < len(seen["facts"]) else None
            if want == got:
                continue
            where = f"observed.facts.{index}"
            record = records.get(got["tool_call_id"]) if got is not None else None
            raw = None if record is None else record.raw_response
            if got is not None and _contains_raw(got, raw):
                return _mismatch(where, want, got, "CIS-BND-4", "a fact carries the raw response")
            if got is not None and (record is None or record.status is not InvocationStatus.READY):
                return _mismatch(where, want, got, "CIS-PROG-3", "only READY records of the run become facts")
            if want is None or got is None:
                return _mismatch(where, want, got, "CIS-PROG-4", "the facts are not capped as the limits say")
            return _mismatch(
                where,
                want,
                got,
                "CIS-PROG-2",
                "the facts differ (content, or the completion order of the completed-call list)",
            )
        excluded = expected["excluded"]
        seen_excluded = {reason: count for reason, count in seen["excluded"].items() if count}
        if excluded != seen_excluded:
            return _mismatch(
                "observed.excluded", excluded, seen_excluded, "CIS-PROG-3", "the excluded identities differ"
            )
        if seen["omitted"] != report.omitted:
            return _mismatch(
                "observed.omitted", report.omitted, seen["omitted"], "CIS-PROG-4", "the omitted count differs"
            )
        return None

    def _op_sweep(self, obj: dict[str, Any]) -> _Mismatch | None:
        limits = self.limits
        assert limits is not None
        run_id = obj["context_run_id"]
        if not is_safe_id(run_id):
            raise self._malformed("context_run_id", "a RunContext holds a safe run id")
        book = self.books.get(run_id) if self._live_run(run_id) is not None else None
        swept: list[str] = []
        event = SweptStale(now_ms=self.now, older_than_ms=obj["older_than_ms"])
        held = (self._live_record((run_id, tcid)) for tcid in list(() if book is None else book.projecting))
        before: dict[str, CanonicalRecord] = {}
        for record in sweep_candidates(held, run_id, self.now):
            before[record.tool_call_id] = record
            after = transition(record, event, limits)
            if isinstance(after, ErrorCode):
                continue  # NOT_STALE
            effect = decide_completion(record, record, after, self._live_run(run_id), self.now)
            assert isinstance(effect, Completion)  # the record is live and is ``before``
            self._apply(effect, record)
            swept.append(record.tool_call_id)
        seen = obj["observed"]
        ids = seen.get("tool_call_ids")
        older_than = obj["older_than_ms"]

        def why(tool_call_id: str) -> Callable[[], str]:
            def clause() -> str:
                record = before.get(tool_call_id)
                if record is None:
                    return f"{tool_call_id} held no live PROJECTING record"
                return f"{tool_call_id}: {explain_sweep(record, self.now, older_than)}"

            return clause

        if ids is not None and set(ids) != set(swept):
            extra = sorted(set(ids) - set(swept))
            if extra:
                moved = self._live_record((run_id, extra[0]))
                if moved is not None and moved.terminal:
                    return _mismatch(
                        "observed.tool_call_ids",
                        sorted(swept),
                        sorted(ids),
                        "CIS-LIFE-3",
                        "a sweep moved a terminal record",
                    )
            differing = sorted(set(ids) ^ set(swept))
            first = differing[0] if is_safe_id(differing[0]) else ""
            return _because(
                _mismatch(
                    "observed.tool_call_ids",
                    sorted(swept),
                    sorted(ids),
                    "CIS-LIFE-7",
                    "the sweep moved other records than the stale PROJECTING ones",
                ),
                why(first) if first else None,
            )
        if seen["swept"] != len(swept):
            return _mismatch(
                "observed.swept",
                len(swept),
                seen["swept"],
                "CIS-LIFE-7",
                "the number of swept records differs",
            )
        return None
