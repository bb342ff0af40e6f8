"""The invariants the stateful machine checks after every step (CIS-STATE-1).

Each invariant's docstring cites its requirement; a failure raises
:class:`~._machine.InvariantViolation` naming it. Rules queue what they observe for
the invariant that owns it, so the report always names the invariant broken.
"""

from __future__ import annotations

from attrs import evolve
from hypothesis.stateful import (
    invariant,
)

from ..boundary import BoundaryResult
from ..kernel import (
    ERROR_MESSAGES,
    CanonicalRecord,
    EvidenceStatus,
    InvocationStatus,
    record_bytes,
    utf8_len,
)
from ._machine import InvariantViolation, MachineCore, text_fields
from ._model import Key
from ._targets import Snapshot, Target
from ._tools import (
    AGENT_FORBIDDEN,
)


class InvariantChecks(MachineCore):
    """The invariants, mixed into :class:`~.stateful.InvocationMachine`."""

    # -- invariants ----------------------------------------------------------------------

    def _live_records(self) -> list[tuple[Target, int, Snapshot, Key, CanonicalRecord]]:
        """(target, index, snapshot, key, record) for every record the stores show this step."""
        self._snapshots()
        return self._live

    @invariant()
    def inv0_reads_answer_what_was_asked(self) -> None:
        """CIS-STORE-6: every read returns the record of the run and tool_call_id asked for, or None."""
        self._raise_pending("inv0_reads_answer_what_was_asked")
        for target, _, _, key, record in self._live_records():
            if (record.run_id, record.tool_call_id) != key:
                raise InvariantViolation(
                    "inv0_reads_answer_what_was_asked",
                    f"{target.name}: asked {key}, served ({record.run_id}, {record.tool_call_id})",
                )

    @invariant()
    def inv1_terminal_records_stay_terminal(self) -> None:
        """CIS-LIFE-3, CIS-LIFE-2: a READY or ERROR record never changes again (same invocation)."""
        self._raise_pending("inv1_terminal_records_stay_terminal")
        for target, index, _, key, record in self._live_records():
            seen = self._terminal[index].get(key)
            if seen is not None and seen.invocation_token == record.invocation_token:
                # The expiry is inv2's to judge; everything else is frozen once terminal.
                if evolve(record, expires_at_ms=seen.expires_at_ms) != seen:
                    raise InvariantViolation(
                        "inv1_terminal_records_stay_terminal",
                        f"{target.name}: {key} was {seen.status}/{seen.error_code}, "
                        f"now {record.status}/{record.error_code}",
                    )
            elif record.terminal:
                self._terminal[index][key] = record

    @invariant()
    def inv2_ttl_never_extended(self) -> None:
        """CIS-TTL-2, CIS-TTL-5, CIS-TTL-1: expiry never moves later and remaining TTL never grows.

        The record's ``expires_at_ms`` stays at or before its value at creation, and
        the store's remaining TTL (Redis PTTL) never increases between two
        observations and never exceeds the TTL it was created with; reads (the
        snapshot itself) must not touch it.
        """
        self._raise_pending("inv2_ttl_never_extended")
        for target, index, snap, key, record in self._live_records():
            created = self._expiry_by_token.get(record.invocation_token)
            if created is not None and record.expires_at_ms > created:
                raise InvariantViolation(
                    "inv2_ttl_never_extended",
                    f"{target.name}: {key} expiry moved from {created} to {record.expires_at_ms}",
                )
            ttl = snap.ttl.get(key)
            if key not in snap.ttl:
                continue
            limit = record.expires_at_ms - record.created_at_ms
            if ttl is None or not 0 < ttl <= limit:
                raise InvariantViolation(
                    "inv2_ttl_never_extended",
                    f"{target.name}: {key} remaining TTL {ttl} outside (0, {limit}]",
                )
            slot = (key, record.invocation_token)
            last = self._last_ttl[index].get(slot)
            if last is not None and ttl > last:
                raise InvariantViolation(
                    "inv2_ttl_never_extended", f"{target.name}: {key} remaining TTL grew from {last} to {ttl}"
                )
            self._last_ttl[index][slot] = ttl

    @invariant()
    def inv3_no_fallback_ids(self) -> None:
        """CIS-ID-6, CIS-ID-4, CIS-PRE-1: every stored id came, exactly, from a call that passed preflight."""
        self._raise_pending("inv3_no_fallback_ids")
        for target, snap in zip(self.targets, self._snapshots(), strict=True):
            for run_id in snap.calls:
                supplied = self._supplied.get(run_id, set())
                unknown = [
                    tcid for tcid in (*snap.calls[run_id], *snap.completed[run_id]) if tcid not in supplied
                ]
                if unknown:
                    raise InvariantViolation(
                        "inv3_no_fallback_ids",
                        f"{target.name}: run {run_id} holds ids nobody supplied: {unknown}",
                    )
        for target, _, _, key, record in self._live_records():
            if key[1] not in self._supplied.get(key[0], ()):
                raise InvariantViolation(
                    "inv3_no_fallback_ids", f"{target.name}: a record under {key} that no admitted call made"
                )
            if self._arguments_by_token.get(record.invocation_token) is None:
                raise InvariantViolation(
                    "inv3_no_fallback_ids", f"{target.name}: {key} holds an invocation nobody admitted"
                )

    @invariant()
    def inv4_byte_limits_hold(self) -> None:
        """CIS-SIZE-1, CIS-SIZE-3, CIS-REC-2, CIS-REC-3: every field within its limit, none truncated.

        The request is the exact arguments text; the raw response, when kept, is the
        executor's complete output; request, raw, agent result and the whole record
        are within their UTF-8 byte limits.
        """
        self._raise_pending("inv4_byte_limits_hold")
        limits = self.limits
        for target, _, _, key, record in self._live_records():
            token = record.invocation_token
            arguments_text = self._arguments_by_token.get(token)
            if arguments_text is not None and record.request_json != arguments_text:
                raise InvariantViolation(
                    "inv4_byte_limits_hold", f"{target.name}: {key} request is not as supplied"
                )
            if record.raw_response is not None and record.raw_response != self._raw_by_token.get(token):
                raise InvariantViolation(
                    "inv4_byte_limits_hold",
                    f"{target.name}: {key} raw response ({utf8_len(record.raw_response)} bytes) is not the "
                    "complete response the tool returned",
                )
            sizes = (
                ("request", utf8_len(record.request_json) or 0, limits.request_bytes),
                ("raw", utf8_len(record.raw_response or "") or 0, limits.raw_bytes),
                (
                    "agent result",
                    (utf8_len(record.agent_result or "") or 0) + (utf8_len(record.scope or "") or 0),
                    limits.agent_result_bytes,
                ),
                ("record", record_bytes(record), limits.record_bytes),
            )
            for name, size, limit in sizes:
                if size > limit:
                    raise InvariantViolation(
                        "inv4_byte_limits_hold", f"{target.name}: {key} {name} is {size} bytes > {limit}"
                    )

    @invariant()
    def inv5_duplicates_never_overwrite(self) -> None:
        """CIS-ID-5, CIS-BND-6, CIS-PRE-1: one execution per admitted call, none for refused ones.

        Each executor ran exactly for the calls the kernel admitted, once each (the
        timeout tool at most once), and every live record still belongs to the first
        invocation admitted under its key.
        """
        self._raise_pending("inv5_duplicates_never_overwrite")
        expected = self._expected_runs
        for target in self.targets:
            ran = [nonce for nonce in target.kit.executed if nonce not in self._slow_nonces]
            slow = [nonce for nonce in target.kit.executed if nonce in self._slow_nonces]
            if ran != expected or len(slow) != len(set(slow)):
                extra = [nonce for nonce in ran if nonce not in expected]
                raise InvariantViolation(
                    "inv5_duplicates_never_overwrite",
                    f"{target.name}: executors ran {len(ran)} times for {len(expected)} admitted calls "
                    f"(unexpected nonces {extra[:5]})",
                )
        for target, _, _, key, record in self._live_records():
            first = self.model.get(*key)
            if first is not None and first.invocation_token != record.invocation_token:
                raise InvariantViolation(
                    "inv5_duplicates_never_overwrite",
                    f"{target.name}: {key} was overwritten by another invocation",
                )

    @invariant()
    def inv6_agent_sees_no_raw(self) -> None:
        """CIS-ERR-1, CIS-BND-4, CIS-REC-3, CIS-ERR-2: the agent never sees raw data, secrets or keys.

        Every BoundaryResult, Citation and ProgressReport of the step is scanned for
        raw responses, exception text, tracebacks, Redis key fragments and URLs; a
        failure carries its code's fixed message only. The boundary's log messages
        of the step are scanned for the same fragments (types and codes only).
        """
        self._raise_pending("inv6_agent_sees_no_raw")
        view, self._agent_view = self._agent_view, []
        for target in self.targets:
            for message in target.logs.messages:
                for fragment in AGENT_FORBIDDEN:
                    if fragment in message:
                        raise InvariantViolation(
                            "inv6_agent_sees_no_raw", f"{target.name} logged {fragment!r} (CIS-ERR-2)"
                        )
            target.logs.messages.clear()
        for value in view:
            for text in text_fields(value):
                for fragment in AGENT_FORBIDDEN:
                    if fragment in text:
                        raise InvariantViolation(
                            "inv6_agent_sees_no_raw",
                            f"the agent was shown {fragment!r} in {type(value).__name__}",
                        )
            if (
                isinstance(value, BoundaryResult)
                and not value.ok
                and (value.code is None or value.message != ERROR_MESSAGES.get(value.code) or value.content)
            ):
                raise InvariantViolation(
                    "inv6_agent_sees_no_raw", f"a failure shows more than its code: {value.code}"
                )

    @invariant()
    def inv7_status_and_evidence_agree(self) -> None:
        """CIS-EVID-1, CIS-REF-3, CIS-LIFE-5: READY has evidence, ERROR has a code, PROJECTING neither."""
        self._raise_pending("inv7_status_and_evidence_agree")
        for target, _, _, key, record in self._live_records():
            status, evidence = record.status, record.evidence_status
            if status is InvocationStatus.READY:
                ok = (
                    evidence in (EvidenceStatus.EVIDENCE_FOUND, EvidenceStatus.NO_EVIDENCE)
                    and record.error_code is None
                    and record.agent_result is not None
                )
            elif status is InvocationStatus.ERROR:
                ok = (
                    evidence is EvidenceStatus.ERROR
                    and record.error_code is not None
                    and record.agent_result is None
                )
            else:
                ok = evidence is None and record.error_code is None and record.agent_result is None
            if not ok:
                raise InvariantViolation(
                    "inv7_status_and_evidence_agree",
                    f"{target.name}: {key} is {status} with evidence {evidence} and code {record.error_code}",
                )

    @invariant()
    def inv8_progress_is_ready_records(self) -> None:
        """CIS-PROG-2, CIS-PROG-3, CIS-PROG-1: the tracker lists exactly the run's completed records.

        Every live terminal record of a run appears in the run's completed list; the
        progress rule checks that the facts are exactly the READY ones, in order,
        within the caps.
        """
        self._raise_pending("inv8_progress_is_ready_records")
        for target, snap in zip(self.targets, self._snapshots(), strict=True):
            for run_id, done in snap.completed.items():
                if snap.runs.get(run_id) is None:
                    continue
                listed = set(done)
                for tcid in self._tcids:
                    record = snap.records.get((run_id, tcid))
                    if record is None:
                        continue
                    if record.terminal and tcid not in listed:
                        raise InvariantViolation(
                            "inv8_progress_is_ready_records",
                            f"{target.name}: {run_id}/{tcid} is {record.status} "
                            "but not in the completed list",
                        )

    @invariant()
    def inv9_stores_agree_with_kernel(self) -> None:
        """CIS-STORE-8, CIS-STATE-1, CIS-LIFE-4: every store shows exactly what the kernel decided.

        Every operation's result equals the kernel's (checked as it happens); run
        states, call lists, completed lists and records (with raw) equal the model's,
        for every run and key the machine has touched, on every store.
        """
        self._raise_pending("inv9_stores_agree_with_kernel")
        model = self.model
        expected_runs = {run_id: model.run(run_id) for run_id in self._run_ids}
        expected_calls = {run_id: model.calls(run_id) for run_id in self._run_ids}
        expected_done = {run_id: model.completed(run_id) for run_id in self._run_ids}
        for target, snap in zip(self.targets, self._snapshots(), strict=True):
            for run_id in self._run_ids:
                for label, got, want in (
                    ("run", snap.runs[run_id], expected_runs[run_id]),
                    ("calls", snap.calls[run_id], expected_calls[run_id]),
                    ("completed", snap.completed[run_id], expected_done[run_id]),
                ):
                    if got != want:
                        raise InvariantViolation(
                            "inv9_stores_agree_with_kernel",
                            f"{target.name}: {label} of {run_id} is {got!r}, the kernel says {want!r}",
                        )
            for key, record in snap.records.items():
                want_record = model.get(*key)
                if record != want_record:
                    raise InvariantViolation(
                        "inv9_stores_agree_with_kernel",
                        f"{target.name}: {key} is {record!r}, the kernel says {want_record!r}",
                    )
