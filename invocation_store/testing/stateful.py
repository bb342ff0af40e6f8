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

import collections
import itertools
import json
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar, Final

from attrs import evolve, frozen
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
)

from ..boundary import BoundaryResult
from ..kernel import (
    ERROR_MESSAGES,
    Admission,
    AdmissionRequest,
    CanonicalRecord,
    Citation,
    CitationKind,
    ErrorCode,
    EvidenceStatus,
    Failed,
    InvocationStatus,
    Limits,
    ProgressReport,
    Projection,
    ProjectionReceived,
    RawReceived,
    RunContext,
    RunState,
    ToolCallEnvelope,
    ToolPolicy,
    cite,
    is_safe_id,
    project_progress,
    record_bytes,
    transition,
    utf8_len,
)
from ._clock import FakeClock
from ._model import KernelModel, Key, predict_invoke
from ._targets import BoundaryFactory, Snapshot, StoreFactory, Target, make_target
from ._tools import (
    AGENT_FORBIDDEN,
    MACHINE_LIMITS,
    MODES,
    RAW_MARK,
    SLOW_TOOL,
    TOOL,
    arguments,
    expected_raw,
    raw_text,
)

__all__ = [
    "INVARIANTS",
    "MACHINE_LIMITS",
    "InvariantViolation",
    "InvocationMachine",
    "MachineStats",
    "make_invocation_machine",
]

# ---------------------------------------------------------------------------
# Vocabulary (small pools, so that collisions across runs and keys are common)

#: Run ids; a small pool so that runs are reopened, cancelled and closed often.
RUN_IDS: Final = ("run-a", "run-b", "run.c:7")
#: Real framework ids, accepted unchanged (CIS-ID-1); shared by every run.
TOOL_CALL_IDS: Final = (
    "call_9Xb2Lm",
    "toolu_01A09q90qw90lq917835lq9",
    "tooluse_Qz7",
    "aB3dE5gH7",
    "chatcmpl-tool-1f2e",
    "functions.get_weather:0",
    "3f2c1a9e-7b4d-4c1e-9a8f-0e5d6c7b8a90",
    "call_Abc123",
    "toolu_bdrk_01",
    "Zx9Yw8Vu7",
    "functions.search:1",
    "tooluse_kZ-3",
    "c" * 128,
)
#: Missing tool_call_ids (CIS-ID-2).
MISSING_IDS: Final[tuple[object, ...]] = (None, "", "   ", "\t\n", 42)
#: Unsafe tool_call_ids (CIS-ID-3).
UNSAFE_IDS: Final = (
    " call_1",
    "call 1",
    "call_1\n",
    "caf\u00e9",
    "a{b}",
    "x*",
    "q?",
    "[0]",
    "y" * 129,
    "\x00",
)
#: Arguments that are not one I-JSON object, or too large (CIS-JSON-1..6, CIS-SIZE-2).
BAD_ARGUMENTS: Final[tuple[object, ...]] = (
    "[]",
    "{",
    '{"a":1,"a":2}',
    '{"a":NaN}',
    '{"a":"\\ud800"}',
    '{"a":1} x',
    "null",
    '{"a":' * 9 + "1" + "}" * 9,
    '{"n":' + "9" * 5000 + "}",
    '{"q":"' + "x" * 200 + '"}',
    '{"q":"' + "\u00e9" * 70 + '"}',
    None,
    7,
)
#: Tool names preflight refuses: unauthorized, writable, a string flag, unknown, none.
REFUSED_TOOLS: Final[tuple[object, ...]] = ("writer", "forbidden", "flagged", "nope", None)
WORDS: Final = ("alpha", "b\u00e9ta", "\u03b3")
SIZES: Final = (0, 30, 60, 140)
LATENCIES: Final = (0, 0, 0, 300, 45_000)
DEADLINES: Final = (600_000, 20_000, 1_000, 0)
TTLS: Final = (60_000, 3_600_000, 30_000)
BUDGETS: Final = (20, 3, 1, 0)
BYTE_BUDGETS: Final = (100_000, 1_000, 150)
ADVANCES: Final = (1, 250, 1_000, 20_000, 100_000)
SWEEP_AGES: Final = (0, 1_000, 60_000)
#: Ids only racing workers use. Which of them win a contended race is up to the
#: scheduler, so they never enter a bundle: later draws must not depend on it.
RACE_IDS: Final = ("race-1", "race-2", "race-3", "race-4")
RACE_SETS: Final = tuple(combo for size in (2, 3, 4) for combo in itertools.combinations(RACE_IDS, size))
#: Arguments of racing creates: all the same size, so the admitted count is fixed.
RACE_ARGUMENTS: Final = '{"mode":"found","race":true}'
START_MS: Final = 1_700_000_000_000
#: "Use the context's run id" / "write the arguments of the search tool".
_DEFAULT: Final = object()


class _OneLine:
    """Shapes print on one line in failing sequences (Hypothesis' printer would wrap them)."""

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))


@frozen
class CallShape(_OneLine):
    """One valid call of the ``search`` tool: outcome ``mode``, query, raw size, latency, padding."""

    mode: str
    q: str = "alpha"
    size: int = 0
    lat: int = 0
    pad: int = 0


@frozen
class RunShape(_OneLine):
    """How a run is opened: id, deadline offset (ms), record TTL (ms), call and byte budgets."""

    run_id: str
    deadline: int
    ttl: int
    budget: int
    byte_budget: int


# One draw per rule argument keeps Hypothesis' per-step cost low (the machine is
# dominated by drawing, not by the stores); shrinking moves toward the first shape.
CALL_SHAPES: Final = tuple(
    CallShape(mode=m, q=q, size=size, lat=lat, pad=pad)
    for m, q, size, lat, pad in itertools.product(MODES, WORDS, SIZES, LATENCIES, (0, 40))
)
#: Shapes of a run that admits several calls: how every example starts.
FIRST_RUN_SHAPES: Final = tuple(
    RunShape(run_id=r, deadline=d, ttl=t, budget=b, byte_budget=y)
    for r, d, t, b, y in itertools.product(RUN_IDS[:2], (3_600_000,), TTLS, BUDGETS[:1], (100_000, 600))
)
#: Outcomes that make READY records, for the second submit rule.
READY_SHAPES: Final = tuple(shape for shape in CALL_SHAPES if shape.mode in ("found", "none", "json"))
RUN_SHAPES: Final = tuple(
    RunShape(run_id=r, deadline=d, ttl=t, budget=b, byte_budget=y)
    for r, d, t, b, y in itertools.product((*RUN_IDS, "bad run"), DEADLINES, TTLS, BUDGETS, BYTE_BUDGETS)
)


@frozen
class Refusal(_OneLine):
    """One wrong envelope field (``tool_call_id``, ``run_id``, ``arguments``, ``tool_name``) and its value."""

    field: str
    value: object


#: Every refusal, the four fields interleaved (Hypothesis favours the ends of a list).
REFUSALS: Final = tuple(
    refusal
    for group in itertools.zip_longest(
        (Refusal(field="tool_name", value=v) for v in REFUSED_TOOLS),
        (Refusal(field="tool_call_id", value=v) for v in MISSING_IDS + UNSAFE_IDS),
        (Refusal(field="run_id", value=v) for v in (*RUN_IDS, None, "")),
        (Refusal(field="arguments", value=v) for v in BAD_ARGUMENTS),
    )
    for refusal in group
    if refusal is not None
)

#: The invariants, by method name, with the requirements they check.
INVARIANTS: Final = {
    "inv0_reads_answer_what_was_asked": "CIS-STORE-6",
    "inv1_terminal_records_stay_terminal": "CIS-LIFE-3",
    "inv2_ttl_never_extended": "CIS-TTL-2, CIS-TTL-5",
    "inv3_no_fallback_ids": "CIS-ID-6",
    "inv4_byte_limits_hold": "CIS-SIZE-1",
    "inv5_duplicates_never_overwrite": "CIS-ID-5, CIS-BND-6",
    "inv6_agent_sees_no_raw": "CIS-ERR-1, CIS-BND-4",
    "inv7_status_and_evidence_agree": "CIS-EVID-1, CIS-REF-3",
    "inv8_progress_is_ready_records": "CIS-PROG-2, CIS-PROG-3",
    "inv9_stores_agree_with_kernel": "CIS-STORE-8",
}


class InvariantViolation(AssertionError):  # noqa: N818 - it reports a violation, like AssertionError
    """An invariant failed: ``invariant`` is its method name, ``requirement`` its IDs."""

    def __init__(self, invariant_name: str, detail: str) -> None:
        self.invariant = invariant_name
        self.requirement = INVARIANTS.get(invariant_name, "")
        super().__init__(f"{invariant_name} ({self.requirement}): {detail}")


class MachineStats:
    """Counters shared by every example of one machine class (telemetry, not model state).

    ``examples`` finished, ``steps`` (rules run), ``checks`` (invariant evaluations),
    ``elapsed_s`` since creation. ``on_example`` (optional) is called after each
    example, e.g. to print progress.
    """

    def __init__(self, on_example: Callable[[MachineStats], object] | None = None) -> None:
        self.examples = 0
        self.steps = 0
        self.checks = 0
        #: How often each call outcome was expected: an error code or READY/<evidence>.
        self.outcomes: collections.Counter[str] = collections.Counter()
        self.started = time.perf_counter()
        self.on_example = on_example

    @property
    def elapsed_s(self) -> float:
        """Seconds since the counters were created."""
        return time.perf_counter() - self.started

    @property
    def steps_per_second(self) -> float:
        """Steps per wall-clock second so far."""
        elapsed = self.elapsed_s
        return self.steps / elapsed if elapsed > 0 else 0.0


def _text_fields(value: object) -> Iterable[str]:
    """Every string an agent can read in a BoundaryResult, Citation or ProgressReport."""
    if isinstance(value, BoundaryResult):
        fields: tuple[object, ...] = (value.tool_call_id, value.message, value.content, value.scope)
    elif isinstance(value, Citation):
        fields = (value.tool_call_id, value.content, value.scope)
    elif isinstance(value, ProgressReport):
        fields = tuple(text for fact in value.facts for text in (fact.tool_call_id, fact.content, fact.scope))
    else:
        fields = (repr(value),)
    return (text for text in fields if isinstance(text, str))


class InvocationMachine(RuleBasedStateMachine):
    """Base class of the machines :func:`make_invocation_machine` builds (see the module doc)."""

    store_factories: ClassVar[tuple[StoreFactory, ...]] = ()
    limits: ClassVar[Limits] = MACHINE_LIMITS
    #: One element: the boundary factory (a tuple, so that it is never bound as a method).
    boundary_factory: ClassVar[tuple[BoundaryFactory | None]] = (None,)
    stats: ClassVar[MachineStats | None] = None
    race_enabled: ClassVar[bool] = True

    runs = Bundle("runs")
    keys = Bundle("keys")

    def __init__(self) -> None:
        super().__init__()
        self.model = KernelModel(self.limits, START_MS)
        self.targets: list[Target] = []
        self._stores: list[tuple[StoreFactory, Any]] = []
        for index, factory in enumerate(self.store_factories):
            clock = FakeClock(START_MS)
            store = factory(clock)
            self._stores.append((factory, store))
            target = make_target(
                f"{index}:{type(store).__name__}",
                store,
                clock=clock,
                limits=self.limits,
                token_factory=_token_factory("t"),
                boundary_factory=self.boundary_factory[0],
            )
            self.targets.append(target)
        self._policies: dict[str, ToolPolicy] = {}
        for name in self.targets[0].kit.registry.names():
            tool = self.targets[0].kit.registry.get(name)
            assert tool is not None
            self._policies[name] = tool.policy
        self._tokens = 0  # boundary tokens drawn (t1, t2, ...)
        self._workers = 0  # worker tokens drawn (w1, w2, ...)
        self._nonce = 0
        self._step = 0
        self._snap_step = -1
        self._snaps: list[Snapshot] = []
        self._live: list[tuple[Target, int, Snapshot, Key, CanonicalRecord]] = []
        self._pending: list[tuple[str, str]] = []
        self._open_params: dict[str, dict[str, int]] = {}
        self._run_ids: list[str] = []
        self._tcids: list[str] = []
        self._supplied: dict[str, set[str]] = {}
        self._created: dict[Key, CanonicalRecord] = {}
        self._created_all: dict[Key, list[CanonicalRecord]] = {}
        self._arguments_by_token: dict[str, str] = {}
        self._raw_by_token: dict[str, str | None] = {}
        self._expiry_by_token: dict[str, int] = {}
        self._expected_runs: list[object] = []  # nonces the executors must run, in order
        self._slow_nonces: set[object] = set()
        self._terminal: list[dict[Key, CanonicalRecord]] = [{} for _ in self.targets]
        self._last_ttl: list[dict[tuple[Key, str], int]] = [{} for _ in self.targets]
        self._agent_view: list[object] = []

    def teardown(self) -> None:
        """Close every target and let factories release what they made (e.g. Redis keys)."""
        try:
            for target, (factory, store) in zip(self.targets, self._stores, strict=True):
                try:
                    target.close()
                finally:
                    release = getattr(factory, "release", None)
                    if callable(release):
                        release(store)
        finally:
            stats = self.stats
            if stats is not None:
                stats.examples += 1
                stats.steps += self._step
                if stats.on_example is not None:
                    stats.on_example(stats)

    # -- bookkeeping -------------------------------------------------------------------

    def _begin_step(self) -> None:
        self._step += 1

    def _violation(self, invariant_name: str, detail: str) -> None:
        self._pending.append((invariant_name, detail))

    def _raise_pending(self, invariant_name: str) -> None:
        """Every invariant starts here: count the check, raise what rules queued for it."""
        if self.stats is not None:
            self.stats.checks += 1
        for name, detail in self._pending:
            if name == invariant_name:
                raise InvariantViolation(name, detail)

    def _expect(self, label: str, observed: Sequence[object], expected: object) -> None:
        """Every target observed ``expected`` (CIS-STORE-8); queued for inv9 otherwise."""
        for target, value in zip(self.targets, observed, strict=True):
            if value != expected:
                self._violation(
                    "inv9_stores_agree_with_kernel",
                    f"{label} on {target.name}: the kernel says {expected!r}, the store gave {value!r}",
                )
        if len(observed) > 1 and any(value != observed[0] for value in observed[1:]):
            self._violation("inv9_stores_agree_with_kernel", f"{label}: the stores disagree: {observed!r}")

    def _count(self, outcome: str) -> None:
        if self.stats is not None:
            self.stats.outcomes[outcome] += 1

    def _next_nonce(self) -> int:
        self._nonce += 1
        return self._nonce

    def _note_created(self, record: CanonicalRecord, raw: str | None) -> None:
        key = (record.run_id, record.tool_call_id)
        self._created[key] = record
        self._created_all.setdefault(key, []).append(record)
        self._supplied.setdefault(record.run_id, set()).add(record.tool_call_id)
        self._arguments_by_token[record.invocation_token] = record.request_json
        self._raw_by_token[record.invocation_token] = raw
        self._expiry_by_token[record.invocation_token] = record.expires_at_ms
        if record.tool_call_id not in self._tcids:
            self._tcids.append(record.tool_call_id)

    def _check_clocks(self) -> None:
        for target in self.targets:
            if target.clock.now != self.model.now:
                self._violation(
                    "inv9_stores_agree_with_kernel",
                    f"{target.name}: clock at {target.clock.now}, model at {self.model.now}",
                )

    def _snapshots(self) -> list[Snapshot]:
        if self._snap_step != self._step:
            self._snap_step = self._step
            model = self.model
            ttl_keys = [key for key in model.records if model.get(*key) is not None]
            self._snaps = [target.snapshot(self._run_ids, self._tcids, ttl_keys) for target in self.targets]
            self._live = [
                (target, index, snap, key, record)
                for index, (target, snap) in enumerate(zip(self.targets, self._snaps, strict=True))
                for key, record in snap.records.items()
                if record is not None
            ]
        return self._snaps

    def _invoke(self, context: RunContext, envelope: ToolCallEnvelope, label: str) -> CanonicalRecord | None:
        prediction = predict_invoke(self.model, context, envelope, self._policies, f"t{self._tokens + 1}")
        if prediction.token:
            self._tokens += 1
        if prediction.admitted is not None:
            args = envelope.arguments
            assert isinstance(args, str)
            raw = None if envelope.tool_name == SLOW_TOOL else raw_text(expected_raw(_loads(args)))
            self._note_created(prediction.admitted, raw)
        if prediction.executed is not None:
            if envelope.tool_name == SLOW_TOOL:
                self._slow_nonces.add(prediction.executed)
            else:
                self._expected_runs.append(prediction.executed)
        result = prediction.result
        self._count(f"READY/{result.evidence_status}" if result.ok else str(result.code))
        observed = [target.invoke(context, envelope) for target in self.targets]
        self._agent_view.extend(observed)
        self._expect(label, observed, prediction.result)
        self._check_clocks()
        return prediction.admitted

    def _envelope(
        self,
        context: RunContext,
        tool_call_id: object,
        *,
        mode: str = "found",
        q: str = "alpha",
        size: int = 0,
        lat: int = 0,
        pad: str = "",
        tool: object = TOOL,
        run_id: object = _DEFAULT,
        args: object = _DEFAULT,
    ) -> ToolCallEnvelope:
        text = (
            args
            if args is not _DEFAULT
            else arguments(mode=mode, q=q, size=size, lat=lat, pad=pad, nonce=self._next_nonce())
        )
        return ToolCallEnvelope(
            run_id=context.run_id if run_id is _DEFAULT else run_id,  # type: ignore[arg-type]
            tool_call_id=tool_call_id,  # type: ignore[arg-type]
            tool_name=tool,  # type: ignore[arg-type]
            arguments=text,  # type: ignore[arg-type]
        )

    # -- runs --------------------------------------------------------------------------

    @initialize(target=runs, shape=st.sampled_from(FIRST_RUN_SHAPES))
    def open_first_run(self, shape: RunShape) -> Any:
        """CIS-RUN-1: every example starts with one open run, so that every rule has a context."""
        return self.open_run(shape)

    @rule(target=runs, shape=st.sampled_from(RUN_SHAPES))
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

    @rule(context=runs)
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

    @rule(context=consumes(runs), cancel=st.booleans())
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
        target=keys,
        context=runs,
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
        target=keys,
        context=runs,
        tool_call_id=st.sampled_from(TOOL_CALL_IDS),
        call=st.sampled_from(READY_SHAPES),
    )
    def submit_ready(self, context: RunContext, tool_call_id: str, call: CallShape) -> Any:
        """CIS-REC-5, CIS-EVID-3: a call whose tool finds something or reports a scoped NO_EVIDENCE."""
        return self.submit(context, tool_call_id, call)

    @rule(target=keys, context=runs, tool_call_id=st.sampled_from(TOOL_CALL_IDS))
    def submit_slow(self, context: RunContext, tool_call_id: str) -> Any:
        """CIS-FAIL-3: an executor that overruns its timeout makes the record ERROR/EXECUTION_TIMEOUT."""
        self._begin_step()
        envelope = self._envelope(context, tool_call_id, tool=SLOW_TOOL)
        created = self._invoke(context, envelope, "invoke slow")
        return multiple() if created is None else (context.run_id, tool_call_id)

    @rule(key=keys, mode=st.sampled_from(("found", "raise")))
    def submit_duplicate(self, key: Key, mode: str) -> None:
        """CIS-ID-5: the same run and tool_call_id again: DUPLICATE_TOOL_CALL while the first lives."""
        self._begin_step()
        context = RunContext(run_id=key[0])
        self._invoke(context, self._envelope(context, key[1], mode=mode), "invoke duplicate")

    @rule(context=runs, tool_call_id=st.sampled_from(TOOL_CALL_IDS), refusal=st.sampled_from(REFUSALS))
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
            run_id=value if refusal.field == "run_id" else _DEFAULT,
            args=value if refusal.field == "arguments" else _DEFAULT,
            tool=value if refusal.field == "tool_name" else TOOL,
        )
        self._invoke(context, envelope, f"invoke refused ({refusal.field})")

    # -- workers talking to the store directly -----------------------------------------

    def _worker_request(self, run_id: str, tool_call_id: str, args: str) -> AdmissionRequest:
        self._workers += 1
        return AdmissionRequest(
            run_id=run_id,
            tool_call_id=tool_call_id,
            tool_name=TOOL,
            request_json=args,
            invocation_token=f"w{self._workers}",
            now_ms=self.model.now,
        )

    @rule(target=keys, context=runs, tool_call_id=st.sampled_from(TOOL_CALL_IDS), retried=st.booleans())
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

    @rule(target=keys, key=keys, retried=st.booleans())
    def crash_worker_again(self, key: Key, retried: bool) -> Any:
        """CIS-ID-5, CIS-TTL-4, CIS-PRE-8: another worker creates a known key: a duplicate while the
        record lives, a new invocation once it has expired."""
        self._begin_step()
        return self._crash(RunContext(run_id=key[0]), key[1], retried)

    @rule(
        key=keys,
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

    @rule(target=keys, key=keys, outcome=st.sampled_from(("ready", "failed")))
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
    @rule(context=runs, tool_call_ids=st.sampled_from(RACE_SETS))
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

    # -- reads, citations, progress, sweeps --------------------------------------------

    @rule(key=keys, other_run=st.sampled_from((None, *RUN_IDS)))
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

    @rule(key=keys, variant=st.sampled_from(("same run", "same run", "other run", "unsafe id")))
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

    @rule(context=runs)
    def progress(self, context: RunContext) -> None:
        """CIS-PROG-1..CIS-PROG-5: facts are exactly the run's READY records, in order, within caps."""
        self._begin_step()
        model = self.model
        identities = model.completed(context.run_id)
        records = {
            tcid: None
            if (found := model.get(context.run_id, tcid)) is None
            else evolve(found, raw_response=None)
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

    @rule(context=runs, older_than=st.sampled_from(SWEEP_AGES))
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

    @rule(key=keys, edge=st.sampled_from(("expiry", "deadline")))
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
            for text in _text_fields(value):
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


def _loads(text: str) -> dict[str, Any]:
    value = json.loads(text)
    assert isinstance(value, dict)
    return value


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


def _token_factory(prefix: str) -> Callable[[], str]:
    """Deterministic invocation tokens ``<prefix>1``, ``<prefix>2``, ... (the model predicts them)."""
    counter = itertools.count(1)

    def draw() -> str:
        return f"{prefix}{next(counter)}"

    return draw
