"""The machine's core: its state, bookkeeping and the invariant registry (CIS-STATE-1).

:class:`MachineCore` holds everything an example knows (the kernel model, the
targets, what was created and expected); the rules (:mod:`.stateful`,
:mod:`._worker_rules`) and the invariants (:mod:`._invariants`) are mixins over it.
"""

from __future__ import annotations

import collections
import itertools
import json
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar, Final

from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
)

from ..boundary import BoundaryResult
from ..kernel import (
    CanonicalRecord,
    Citation,
    Limits,
    ProgressReport,
    RunContext,
    ToolCallEnvelope,
    ToolPolicy,
)
from ._clock import FakeClock
from ._model import KernelModel, Key, predict_invoke
from ._targets import BoundaryFactory, Snapshot, StoreFactory, Target, make_target
from ._tools import (
    MACHINE_LIMITS,
    SLOW_TOOL,
    TOOL,
    arguments,
    expected_raw,
    raw_text,
)
from ._vocabulary import (
    DEFAULT,
    START_MS,
)

#: The bundles: open runs (RunContext) and created keys ((run id, tool_call_id)).
RUNS: Final = Bundle("runs")
KEYS: Final = Bundle("keys")

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


def text_fields(value: object) -> Iterable[str]:
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


class MachineCore(RuleBasedStateMachine):
    """State and bookkeeping shared by the machine's rules and invariants (see :mod:`.stateful`)."""

    store_factories: ClassVar[tuple[StoreFactory, ...]] = ()
    limits: ClassVar[Limits] = MACHINE_LIMITS
    #: One element: the boundary factory (a tuple, so that it is never bound as a method).
    boundary_factory: ClassVar[tuple[BoundaryFactory | None]] = (None,)
    stats: ClassVar[MachineStats | None] = None
    race_enabled: ClassVar[bool] = True

    runs = RUNS
    keys = KEYS

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
                token_factory=token_factory("t"),
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
            raw = None if envelope.tool_name == SLOW_TOOL else raw_text(expected_raw(loads_object(args)))
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
        run_id: object = DEFAULT,
        args: object = DEFAULT,
    ) -> ToolCallEnvelope:
        text = (
            args
            if args is not DEFAULT
            else arguments(mode=mode, q=q, size=size, lat=lat, pad=pad, nonce=self._next_nonce())
        )
        return ToolCallEnvelope(
            run_id=context.run_id if run_id is DEFAULT else run_id,  # type: ignore[arg-type]
            tool_call_id=tool_call_id,  # type: ignore[arg-type]
            tool_name=tool,  # type: ignore[arg-type]
            arguments=text,  # type: ignore[arg-type]
        )


def loads_object(text: str) -> dict[str, Any]:
    value = json.loads(text)
    assert isinstance(value, dict)
    return value


def token_factory(prefix: str) -> Callable[[], str]:
    """Deterministic invocation tokens ``<prefix>1``, ``<prefix>2``, ... (the model predicts them)."""
    counter = itertools.count(1)

    def draw() -> str:
        return f"{prefix}{next(counter)}"

    return draw
