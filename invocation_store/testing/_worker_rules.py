"""Rules of workers that talk to the store directly: crashes, late completions, races (CIS-STATE-1).

A crashed or late worker bypasses the boundary: it creates and completes through the
store as a second process would, so the machine checks the store's compare-and-set,
retries and races against the kernel model, not only the boundary's happy path.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import (
    multiple,
    precondition,
    rule,
)

from ..kernel import (
    Admission,
    AdmissionRequest,
    CanonicalRecord,
    ErrorCode,
    EvidenceStatus,
    Failed,
    InvocationStatus,
    Projection,
    ProjectionReceived,
    RawReceived,
    RunContext,
    transition,
)
from ._machine import KEYS, RUNS, MachineCore
from ._model import KernelModel, Key
from ._tools import (
    RAW_MARK,
    TOOL,
    arguments,
)
from ._vocabulary import (
    RACE_ARGUMENTS,
    RACE_SETS,
    TOOL_CALL_IDS,
)


class WorkerRules(MachineCore):
    """The direct-store rules, mixed into :class:`~.stateful.InvocationMachine`."""

    # -- workers talking to the store directly -----------------------------------------

    def _worker_request(self, run_id: str, tool_call_id: str, args: str) -> AdmissionRequest:
        self._workers += 1
        return AdmissionRequest(
            run_id=run_id,
            tool_call_id=tool_call_id,
            tool_name=TOOL,
            request_json=args,
            invocation_token=f"w{self._workers}",
        )

    @rule(target=KEYS, context=RUNS, tool_call_id=st.sampled_from(TOOL_CALL_IDS), retried=st.booleans())
    def crash_worker(self, context: RunContext, tool_call_id: str, retried: bool) -> Any:
        """CIS-PRE-8, CIS-STORE-2, CIS-RETRY-2: a worker creates its record and dies (PROJECTING stays).

        With ``retried`` the client library resends the same create at once (a
        timeout on the reply): the store recognises the invocation token and writes
        nothing more.
        """
        self._begin_step()
        return self._crash(context, tool_call_id, retried)

    def _crash(self, context: RunContext, tool_call_id: str, retried: bool) -> Any:
        args = arguments(mode="found", q="alpha", size=0, lat=0, pad="", nonce=self._next_nonce())
        request = self._worker_request(context.run_id, tool_call_id, args)
        expected = self.model.create(request)
        observed = [target.create(request, self.limits) for target in self.targets]
        self._expect("create", observed, expected)
        if retried:
            again = self.model.create(request)
            self._expect(
                "retried create", [target.create(request, self.limits) for target in self.targets], again
            )
            if isinstance(again, Admission) and again.replayed:
                self._count("create:replayed")
        if not isinstance(expected, Admission) or expected.replayed:
            return multiple()
        self._note_created(expected.record, f"{RAW_MARK} worker {request.invocation_token}")
        return (context.run_id, tool_call_id)

    @rule(target=KEYS, key=KEYS, retried=st.booleans())
    def crash_worker_again(self, key: Key, retried: bool) -> Any:
        """CIS-ID-5, CIS-TTL-4, CIS-PRE-8: another worker creates a known key: a duplicate while the
        record lives, a new invocation once it has expired."""
        self._begin_step()
        return self._crash(RunContext(run_id=key[0]), key[1], retried)

    @rule(
        key=KEYS,
        outcome=st.sampled_from(("ready", "no_evidence", "failed", "replay")),
        worker=st.sampled_from(("latest", "first")),
    )
    def complete_direct(self, key: Key, outcome: str, worker: str) -> None:
        """CIS-STORE-3, CIS-LIFE-2, CIS-LIFE-3, CIS-RETRY-2: a late or replayed completion.

        A worker holding the record as it created it completes it: a PROJECTING
        record is written once; a terminal one refuses with INVALID_TRANSITION, or,
        for the exact stored result, is a no-op replay. The ``first`` worker of a key
        holds the key's first invocation and a clock that lags (it still believes its
        record alive): once the key was re-created by another invocation, its
        completion must never land on the new record (the store compares tokens).
        """
        self._begin_step()
        history = self._created_all.get(key)
        if not history:
            return
        self._late_complete(
            key, history[-1] if worker == "latest" else history[0], outcome, lagging=worker != "latest"
        )

    @rule(target=KEYS, key=KEYS, outcome=st.sampled_from(("ready", "failed")))
    def takeover(self, key: Key, outcome: str) -> Any:
        """CIS-STORE-3, CIS-RETRY-1, CIS-TTL-4: a slow worker's record lapses, another worker re-creates
        the key, then the slow worker (its clock lagging) completes: the store must refuse it, since
        the stored record is another invocation's."""
        self._begin_step()
        model = self.model
        record = model.get(*key)
        run = model.run(key[0])
        if record is not None and (run is None or record.expires_at_ms >= run.deadline_ms):
            return multiple()  # lapsing this record would end its run too: no takeover possible
        if record is not None:  # let the record lapse: the clock lands on its expiry
            delta = record.expires_at_ms - model.now
            model.now += delta
            for target in self.targets:
                target.clock.advance(delta)
        history = list(self._created_all.get(key, ()))
        taken = self._crash(RunContext(run_id=key[0]), key[1], False)
        if not history or len(self._created_all.get(key, [])) == len(history):
            return taken  # nothing re-created (run ended, budget spent): no takeover
        self._late_complete(key, history[-1], outcome, lagging=True)
        return taken

    def _late_complete(self, key: Key, before: CanonicalRecord, outcome: str, *, lagging: bool) -> None:
        """``before``'s worker completes now with ``outcome`` (a lagging clock stays within its TTL)."""
        model = self.model
        now = max(before.created_at_ms, min(model.now, before.expires_at_ms - 1)) if lagging else model.now
        after: CanonicalRecord | ErrorCode
        if outcome == "replay":
            stored = model.get(*key)
            if stored is None or stored.invocation_token != before.invocation_token:
                return
            after = stored
            if not stored.terminal:
                after = transition(before, Failed(code=ErrorCode.EXECUTION_FAILED, now_ms=now), self.limits)
        elif outcome == "failed":
            after = transition(before, Failed(code=ErrorCode.EXECUTION_FAILED, now_ms=now), self.limits)
        else:
            raw = self._raw_by_token.get(before.invocation_token)
            if raw is None:
                return
            after = transition(before, RawReceived(raw_response=raw, now_ms=now), self.limits)
            if isinstance(after, CanonicalRecord) and after.status is InvocationStatus.PROJECTING:
                evidence = EvidenceStatus.EVIDENCE_FOUND if outcome == "ready" else EvidenceStatus.NO_EVIDENCE
                projection = Projection(evidence_status=evidence, content="late", scope="worker")
                after = transition(after, ProjectionReceived(projection=projection, now_ms=now), self.limits)
        if isinstance(after, ErrorCode):
            return  # the worker's own kernel refuses: the record expired under it
        stored = model.get(*key)
        expected = model.complete(before, after)
        observed = [target.complete(before, after) for target in self.targets]
        self._expect(f"complete {outcome}", observed, expected)
        if isinstance(expected, ErrorCode):
            self._count("complete:refused")
        else:
            self._count("complete:replayed" if expected is stored else "complete:written")

    @precondition(lambda self: self.race_enabled and len(self.targets) == 1)
    @rule(context=RUNS, tool_call_ids=st.sampled_from(RACE_SETS))
    def race(self, context: RunContext, tool_call_ids: tuple[str, ...]) -> None:
        """CIS-RUN-5, CIS-PRE-8: workers creating at once never overspend the tool-call budget.

        All requests have the same size, so however they interleave the number
        admitted is fixed; the admitted ones hold the next sequence numbers, one each.
        """
        self._begin_step()
        model = self.model
        requests = [self._worker_request(context.run_id, tcid, RACE_ARGUMENTS) for tcid in tool_call_ids]
        (results,) = [target.race(requests, self.limits) for target in self.targets]
        admitted = [
            (result, request)
            for result, request in zip(results, requests, strict=True)
            if isinstance(result, Admission)
        ]
        admitted.sort(key=lambda pair: pair[0].record.sequence)
        run = model.run(context.run_id)
        # The count every serial order admits (requests are distinct, equal-sized).
        probe = KernelModel(self.limits, model.now)
        probe.runs, probe.records = dict(model.runs), dict(model.records)
        count = sum(1 for request in requests if isinstance(probe.create(request), Admission))
        del probe
        if count < len(requests) and count > 0:
            self._count("race:contended")
        if len(admitted) != count:
            self._violation(
                "inv9_stores_agree_with_kernel",
                f"race: {len(admitted)} of {len(requests)} admitted, every serial order admits {count} "
                f"(budget {None if run is None else (run.tool_calls_used, run.tool_call_budget)})",
            )
        for request in requests:
            self._supplied.setdefault(request.run_id, set()).add(request.tool_call_id)
        sequences = [result.record.sequence for result, _ in admitted]
        first = 1 if run is None else run.tool_calls_used + 1
        if sequences != list(range(first, first + len(sequences))):
            self._violation(
                "inv9_stores_agree_with_kernel",
                f"race (CIS-RUN-5): concurrent creates took sequence numbers {sequences}; "
                f"any serial order gives {list(range(first, first + len(sequences)))}",
            )
            return
        for admission, request in admitted:
            serial = model.create(request)
            if serial != admission:
                self._violation(
                    "inv9_stores_agree_with_kernel",
                    f"race: admission of {request.tool_call_id} is {admission!r}, serially {serial!r}",
                )
                continue
            assert isinstance(serial, Admission)
            self._note_created(serial.record, f"{RAW_MARK} worker {request.invocation_token}")
        for result, request in zip(results, requests, strict=True):
            if isinstance(result, ErrorCode) and isinstance(model.admission(request), Admission):
                self._violation(
                    "inv9_stores_agree_with_kernel",
                    f"race: {request.tool_call_id} refused {result} but admissible",
                )
