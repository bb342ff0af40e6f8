"""The stateful verification kit: a Hypothesis machine that checks any store (CIS-STATE-1).

Theory of operation
-------------------
:func:`make_invocation_machine` builds a :class:`~hypothesis.stateful.RuleBasedStateMachine`
around store *factories* (``factory(clock) -> store``, sync or async), so that anyone
can verify their own store with it (the zarr ``testing/stateful.py`` pattern). Each
example gets fresh stores on a fresh :class:`FakeClock`; all model state lives on the
instance. Given one factory the machine checks that store; given several it is the
*differential* machine: every operation is applied to all of them, and what they
return is compared with each other and with the model after every step (the
Hypothesis ``test_redis_exampledatabase`` pattern).

The model (:class:`~invocation_store.testing._model.KernelModel`) is the kernel itself
applied to dictionaries, so the machine always knows the exact record and result
each operation must produce. Rules drive the public boundary (open, cancel, close,
invoke with every outcome, cite, progress, sweep) and, as a crashed or late worker
would, the store directly (create, complete, a retried create, racing creates). Time
only moves when a rule moves it.

After every step the named invariants below run on one snapshot of each store; each
docstring cites its requirement. A failure raises :class:`InvariantViolation` (an
``AssertionError``) naming the invariant; rules that observe a violation queue it
for the invariant that owns it, so the report always names the invariant broken.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import (
    consumes,
    initialize,
    multiple,
    rule,
)

from ..kernel import (
    CitationKind,
    ErrorCode,
    ExclusionReason,
    InvocationStatus,
    Limits,
    RunContext,
    RunState,
    cite,
    is_safe_id,
    project_progress,
    utf8_len,
    without_raw,
)
from ._invariants import InvariantChecks
from ._machine import INVARIANTS, KEYS, RUNS, InvariantViolation, MachineStats
from ._model import Key
from ._targets import BoundaryFactory, StoreFactory
from ._tools import (
    MACHINE_LIMITS,
    SLOW_TOOL,
    TOOL,
)
from ._vocabulary import (
    ADVANCES,
    CALL_SHAPES,
    DEFAULT,
    FIRST_RUN_SHAPES,
    NOT_CALL_OUTCOMES,
    OUTCOME_RULES,
    READY_SHAPES,
    REFUSALS,
    RUN_IDS,
    RUN_SHAPES,
    SWEEP_AGES,
    TOOL_CALL_IDS,
    CallShape,
    Refusal,
    RunShape,
)
from ._worker_rules import WorkerRules

__all__ = [
    "INVARIANTS",
    "MACHINE_LIMITS",
    "NOT_CALL_OUTCOMES",
    "OUTCOME_RULES",
    "InvariantViolation",
    "InvocationMachine",
    "MachineStats",
    "make_invocation_machine",
]


class InvocationMachine(WorkerRules, InvariantChecks):
    """Base class of the machines :func:`make_invocation_machine` builds (see the module doc).

    Its rules drive the public boundary (here), the store directly
    (:class:`~._worker_rules.WorkerRules`) and are checked by the invariants
    (:class:`~._invariants.InvariantChecks`) over :class:`~._machine.MachineCore`'s state.
    """

    # -- runs --------------------------------------------------------------------------

    @initialize(target=RUNS, shape=st.sampled_from(FIRST_RUN_SHAPES))
    def open_first_run(self, shape: RunShape) -> Any:
        """CIS-RUN-1: every example starts with one open run, so that every rule has a context."""
        return self.open_run(shape)

    @rule(target=RUNS, shape=st.sampled_from(RUN_SHAPES))
    def open_run(self, shape: RunShape) -> Any:
        """CIS-RUN-1, CIS-RETRY-3: open a run (deadline, TTL, budgets); an unsafe id is RUN_MISMATCH."""
        self._begin_step()
        run_id = shape.run_id
        params = {
            "deadline_ms": self.model.now + shape.deadline,
            "ttl_ms": shape.ttl,
            "tool_call_budget": shape.budget,
            "byte_budget": shape.byte_budget,
        }
        expected: RunState | ErrorCode = (
            self.model.open_run(run_id, **params) if is_safe_id(run_id) else ErrorCode.RUN_MISMATCH
        )
        view: object = RunContext(run_id=run_id) if isinstance(expected, RunState) else expected
        self._expect("open_run", [target.open_run(run_id, **params) for target in self.targets], view)
        if not isinstance(expected, RunState):
            return multiple()
        if expected.opened_at_ms == self.model.now and expected.deadline_ms == params["deadline_ms"]:
            self._open_params[run_id] = params
        if run_id not in self._run_ids:
            self._run_ids.append(run_id)
        return RunContext(run_id=run_id)

    @rule(context=RUNS)
    def reopen_run(self, context: RunContext) -> None:
        """CIS-RETRY-3: reopening a live run with its own parameters returns it unchanged."""
        self._begin_step()
        params = self._open_params.get(context.run_id)
        if params is None:
            return
        expected = self.model.open_run(context.run_id, **params)
        view: object = RunContext(run_id=context.run_id) if isinstance(expected, RunState) else expected
        self._expect(
            "reopen_run", [target.open_run(context.run_id, **params) for target in self.targets], view
        )

    @rule(context=consumes(RUNS), cancel=st.booleans())
    def end_run(self, context: RunContext, cancel: bool) -> None:
        """CIS-RUN-2, CIS-RUN-3: cancel or close a run; only ACTIVE runs move.

        The context leaves the bundle (a harness stops using a run it ended), so the
        example goes on with live runs; copies of it from reopening stay, and keep
        calls on ended runs (RUN_INACTIVE) in the mix.
        """
        self._begin_step()
        expected = self.model.end_run(context.run_id, cancel=cancel)
        observed = [target.end_run(context, cancel=cancel) for target in self.targets]
        self._expect("cancel_run" if cancel else "close_run", observed, expected)

    # -- tool calls through the boundary -----------------------------------------------

    @rule(
        target=KEYS,
        context=RUNS,
        tool_call_id=st.sampled_from(TOOL_CALL_IDS),
        call=st.sampled_from(CALL_SHAPES),
    )
    def submit(self, context: RunContext, tool_call_id: str, call: CallShape) -> Any:
        """CIS-BND-1, CIS-BND-2, CIS-REC-4, CIS-REC-5: a valid call with one of every outcome.

        Outcomes: found, no evidence, executor raises, unserializable or non-UTF-8 raw,
        raw over its limit, projector raises, invalid status, blank scope, not a
        Projection, oversized agent result; over budget and past deadline follow from
        the run's state (CIS-RUN-4..6).
        """
        self._begin_step()
        envelope = self._envelope(
            context, tool_call_id, mode=call.mode, q=call.q, size=call.size, lat=call.lat, pad="p" * call.pad
        )
        created = self._invoke(context, envelope, f"invoke {call.mode}")
        return multiple() if created is None else (context.run_id, tool_call_id)

    @rule(
        target=KEYS,
        context=RUNS,
        tool_call_id=st.sampled_from(TOOL_CALL_IDS),
        call=st.sampled_from(READY_SHAPES),
    )
    def submit_ready(self, context: RunContext, tool_call_id: str, call: CallShape) -> Any:
        """CIS-REC-5, CIS-EVID-3: a call whose tool finds something or reports a scoped NO_EVIDENCE."""
        return self.submit(context, tool_call_id, call)

    @rule(target=KEYS, context=RUNS, tool_call_id=st.sampled_from(TOOL_CALL_IDS))
    def submit_slow(self, context: RunContext, tool_call_id: str) -> Any:
        """CIS-FAIL-3: an executor that overruns its timeout makes the record ERROR/EXECUTION_TIMEOUT."""
        self._begin_step()
        envelope = self._envelope(context, tool_call_id, tool=SLOW_TOOL)
        created = self._invoke(context, envelope, "invoke slow")
        return multiple() if created is None else (context.run_id, tool_call_id)

    @rule(key=KEYS, mode=st.sampled_from(("found", "raise")))
    def submit_duplicate(self, key: Key, mode: str) -> None:
        """CIS-ID-5: the same run and tool_call_id again: refused with the first call's fate."""
        self._begin_step()
        context = RunContext(run_id=key[0])
        self._invoke(context, self._envelope(context, key[1], mode=mode), "invoke duplicate")

    @rule(context=RUNS, tool_call_id=st.sampled_from(TOOL_CALL_IDS), refusal=st.sampled_from(REFUSALS))
    def submit_refused(self, context: RunContext, tool_call_id: str, refusal: Refusal) -> None:
        """CIS-PRE-1..CIS-PRE-6, CIS-ID-2, CIS-ID-3, CIS-JSON-1, CIS-SIZE-2: preflight refuses the call.

        One field of an otherwise valid envelope is wrong: a missing or unsafe id, the
        run id of another run, arguments that are not one I-JSON object or too large,
        an unauthorized, writable, string-flagged or unknown tool. Nothing is written,
        the executor never runs and no id is ever made up (CIS-ID-6).
        """
        self._begin_step()
        value = refusal.value
        if refusal.field == "run_id" and value == context.run_id:
            value = f"{value}x"
        envelope = self._envelope(
            context,
            value if refusal.field == "tool_call_id" else tool_call_id,
            run_id=value if refusal.field == "run_id" else DEFAULT,
            args=value if refusal.field == "arguments" else DEFAULT,
            tool=value if refusal.field == "tool_name" else TOOL,
        )
        self._invoke(context, envelope, f"invoke refused ({refusal.field})")

    # -- reads, citations, progress, sweeps --------------------------------------------

    @rule(key=KEYS, other_run=st.sampled_from((None, *RUN_IDS)))
    def read(self, key: Key, other_run: str | None) -> None:
        """CIS-TTL-5, CIS-STORE-6: a read returns the record asked for, as stored, and touches nothing.

        ``other_run`` reads the same tool_call_id under another run, which must never
        serve this run's record.
        """
        self._begin_step()
        run_id, tool_call_id = (key[0] if other_run is None else other_run), key[1]
        expected = self.model.get(run_id, tool_call_id)
        observed = [target.get(run_id, tool_call_id) for target in self.targets]
        for target, record in zip(self.targets, observed, strict=True):
            if record is not None and (record.run_id, record.tool_call_id) != (run_id, tool_call_id):
                self._violation(
                    "inv0_reads_answer_what_was_asked",
                    f"{target.name}: get({run_id}, {tool_call_id}) served "
                    f"({record.run_id}, {record.tool_call_id})",
                )
        self._expect("get", observed, expected)

    @rule(key=KEYS, variant=st.sampled_from(("same run", "same run", "other run", "unsafe id")))
    def cite_call(self, key: Key, variant: str) -> None:
        """CIS-REF-1, CIS-REF-2, CIS-REF-3: only READY records of this run are citable, by kind.

        The call is cited by its own run, by another run, or under an unsafe id.
        """
        self._begin_step()
        run_id, tool_call_id = key
        if variant == "other run":
            run_id = next(r for r in RUN_IDS if r != key[0])
        elif variant == "unsafe id":
            tool_call_id = f"{tool_call_id} "
        context = RunContext(run_id=run_id)
        now = self.model.now
        safe = is_safe_id(tool_call_id)
        record = self.model.get(run_id, tool_call_id) if safe else None
        expected = cite(run_id, tool_call_id, record, now if safe else 0)
        observed = [target.cite(context, tool_call_id) for target in self.targets]
        self._agent_view.extend(observed)
        for target, citation in zip(self.targets, observed, strict=True):
            if citation.reason is ExclusionReason.OTHER_RUN:  # only a record the store served for another key
                self._violation(
                    "inv0_reads_answer_what_was_asked",
                    f"{target.name}: cite({run_id}, {tool_call_id}) was served another run's record",
                )
            if citation.kind is not CitationKind.NOT_REFERENCABLE and (
                record is None or record.status is not InvocationStatus.READY
            ):
                self._violation(
                    "inv7_status_and_evidence_agree",
                    f"{target.name}: {tool_call_id} cited as {citation.kind} but is "
                    f"{None if record is None else record.status}",
                )
        self._expect("cite", observed, expected)
        self._count(f"cite:{expected.kind}")

    @rule(context=RUNS)
    def progress(self, context: RunContext) -> None:
        """CIS-PROG-1..CIS-PROG-5: facts are exactly the run's READY records, in order, within caps."""
        self._begin_step()
        model = self.model
        identities = model.completed(context.run_id)
        records = {
            tcid: None if (found := model.get(context.run_id, tcid)) is None else without_raw(found)
            for tcid in identities
        }
        expected = project_progress(context.run_id, identities, records, model.now, self.limits)
        # Independently: READY records of this run, in completion order, first-seen, capped.
        ready: list[str] = []
        for tcid in dict.fromkeys(identities):
            record = model.get(context.run_id, tcid)
            if record is not None and record.status is InvocationStatus.READY:
                ready.append(tcid)
        observed = [target.progress(context) for target in self.targets]
        self._agent_view.extend(observed)
        for target, report in zip(self.targets, observed, strict=True):
            facts = [fact.tool_call_id for fact in report.facts]
            size = sum((utf8_len(f.content) or 0) + (utf8_len(f.scope) or 0) for f in report.facts)
            if (
                facts != ready[: len(facts)]
                or len(facts) + report.omitted != len(ready)
                or len(facts) > self.limits.max_facts
                or size > self.limits.max_fact_bytes
            ):
                self._violation(
                    "inv8_progress_is_ready_records",
                    f"{target.name}: facts {facts} (+{report.omitted} omitted); READY in order: {ready}",
                )
        self._expect("project_progress", observed, expected)
        if expected.facts:
            self._count("progress:facts")
        if expected.omitted:
            self._count("progress:omitted")

    @rule(context=RUNS, older_than=st.sampled_from(SWEEP_AGES))
    def sweep(self, context: RunContext, older_than: int) -> None:
        """CIS-LIFE-7: PROJECTING records at least ``older_than`` ms old become ERROR/STALE_PROJECTION."""
        self._begin_step()
        expected = self.model.sweep(context.run_id, older_than)
        self._expect("sweep_stale", [target.sweep(context, older_than) for target in self.targets], expected)
        if expected:
            self._count("sweep:swept")

    # -- time --------------------------------------------------------------------------

    @rule(delta=st.sampled_from(ADVANCES))
    def advance_clock(self, delta: int) -> None:
        """CIS-TTL-4, CIS-RUN-4: time passes (deadlines and TTLs lapse; nothing is refreshed)."""
        self._begin_step()
        self.model.now += delta
        for target in self.targets:
            target.clock.advance(delta)

    @rule(key=KEYS, edge=st.sampled_from(("expiry", "deadline")))
    def advance_to_edge(self, key: Key, edge: str) -> None:
        """CIS-TTL-4, CIS-RUN-4: the clock lands exactly on an expiry or a deadline (>= is lapsed)."""
        self._begin_step()
        if edge == "expiry":
            record = self._created.get(key)
            moment = None if record is None else record.expires_at_ms
        else:
            run = self.model.runs.get(key[0])
            moment = None if run is None else run.deadline_ms
        if moment is None or moment <= self.model.now:
            return
        delta = moment - self.model.now
        self.model.now = moment
        for target in self.targets:
            target.clock.advance(delta)


def make_invocation_machine(
    *store_factories: StoreFactory,
    limits: Limits = MACHINE_LIMITS,
    boundary_factory: BoundaryFactory | None = None,
    stats: MachineStats | None = None,
    race: bool = True,
    name: str | None = None,
) -> type[InvocationMachine]:
    """Build the stateful machine over fresh stores from ``store_factories`` (CIS-STATE-1).

    - ``store_factories``: one or more ``factory(clock) -> store``; each example calls
      every factory with a fresh :class:`FakeClock` (integer ms) and gets fresh,
      empty stores (for Redis: a fresh key prefix). A store is an
      :class:`~invocation_store.adapters.InvocationStore` or an
      :class:`~invocation_store.adapters.AsyncInvocationStore` (driven through
      :class:`~invocation_store.boundary.AsyncToolBoundary` on a private loop). With
      two or more factories the machine is differential: every operation goes to
      every store and their results must be identical (CIS-STORE-8). A factory may
      define ``release(store)``, called at teardown after ``store.close()``.
    - ``limits``: byte limits (UTF-8 bytes) for the boundary and the kernel model;
      the default is small, so that every limit is reached.
    - ``boundary_factory``: ``(store, registry, limits, token_factory) -> boundary``;
      ``None`` uses the library's boundaries. Mutants plant faulty ones here.
    - ``stats``: a :class:`MachineStats` to count examples, steps and checks.
    - ``race``: include the racing-creates rule (single-store machines only).

    Run it with ``run_state_machine_as_test(machine, settings=...)`` or as a unittest
    ``machine.TestCase``. A broken invariant raises :class:`InvariantViolation`. Raises
    ``ValueError`` when no factory is given.
    """
    if not store_factories:
        raise ValueError("make_invocation_machine needs at least one store factory")
    attributes = {
        "store_factories": tuple(store_factories),
        "limits": limits,
        "boundary_factory": (boundary_factory,),
        "stats": stats,
        "race_enabled": race,
    }
    machine_name = name or ("DifferentialMachine" if len(store_factories) > 1 else "InvocationMachine")
    return type(machine_name, (InvocationMachine,), attributes)
