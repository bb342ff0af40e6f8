"""Progress projection, citations and the stale sweep through the sync boundary, on every store."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from attrs import evolve

from invocation_store import (
    AsyncToolBoundary,
    CitationKind,
    ErrorCode,
    EvidenceStatus,
    ExclusionReason,
    InvocationStatus,
    Limits,
    ObservedFact,
    ProgressReport,
    Projection,
    RunContext,
    StoreUnavailableError,
    ToolRegistry,
)
from invocation_store.kernel import AdmissionRequest
from invocation_store.kernel import project_progress as kernel_progress
from invocation_store.testing import FakeClock

from ._fakes import (
    MARKER,
    OTHER_RUN,
    RUN,
    CountingStore,
    FailingStore,
    FakeExecutor,
    TrackerStore,
    boundary_for,
    envelope,
    no_evidence,
    open_run,
    tool,
)


@pytest.fixture
def store(make_store: Any, clock: FakeClock) -> Any:
    return make_store(clock)


def by_query(found: str = "found") -> Any:
    """A projector whose evidence depends on the arguments: q=="none" is NO_EVIDENCE."""

    def project(_raw: str, args: Any) -> Projection:
        if args["q"] == "none":
            return no_evidence(f"scope {args['q']}")
        return Projection(
            evidence_status=EvidenceStatus.EVIDENCE_FOUND, content=f"{found} {args['q']}", scope="s"
        )

    return project


def crashed_worker(store: Any, tool_call_id: str, clock: FakeClock) -> None:
    """Create a PROJECTING record the way a worker that then crashed would have."""
    admission = store.create(
        AdmissionRequest(
            run_id=RUN,
            tool_call_id=tool_call_id,
            tool_name="search",
            request_json="{}",
            invocation_token=f"tok-{tool_call_id}",
        ),
        Limits(),
    )
    assert not isinstance(admission, ErrorCode), admission


# ---------------------------------------------------------------------------
# Progress


def test_completed_calls_become_bounded_facts_in_order(store: Any) -> None:
    """CIS-PROG-2, CIS-PROG-1, CIS-BND-4, CIS-EVID-3: READY calls in execution order; NO_EVIDENCE negative."""
    boundary = boundary_for(store, tool(FakeExecutor(f"raw {MARKER}"), by_query()))
    context = open_run(boundary)
    for i, q in enumerate(["a", "none", "c"]):
        assert boundary.invoke(context, envelope(f"call_{i}", arguments=f'{{"q":"{q}"}}')).ok

    report = boundary.project_progress(context)

    assert [f.tool_call_id for f in report.facts] == ["call_0", "call_1", "call_2"]
    assert [f.sequence for f in report.facts] == [1, 2, 3]
    assert [f.negative for f in report.facts] == [False, True, False]
    assert report.facts[1].evidence_status is EvidenceStatus.NO_EVIDENCE
    assert report.facts[1].scope == "scope none"
    assert report.facts[0].content == "found a"
    assert dict(report.excluded) == {}
    assert report.omitted == 0
    assert MARKER not in repr(report)


def test_invalid_identities_are_excluded_and_counted(store: Any, clock: FakeClock) -> None:
    """CIS-PROG-3, CIS-REF-3: missing, expired, other-run, PROJECTING and ERROR ids never become facts."""
    executor = FakeExecutor("raw")
    boundary = boundary_for(store, tool(executor, by_query()))
    context = open_run(boundary)
    assert boundary.invoke(context, envelope("ok_1", arguments='{"q":"a"}')).ok
    executor.raises = RuntimeError("down")
    assert boundary.invoke(context, envelope("err_1")).code is ErrorCode.EXECUTION_FAILED
    executor.raises = None
    assert boundary.invoke(context, envelope("ok_2", arguments='{"q":"none"}')).ok
    crashed_worker(store, "proj_1", clock)
    ready = store.get(RUN, "ok_1")
    substitutes = {
        "old_1": evolve(ready, tool_call_id="old_1", expires_at_ms=clock.now),  # expired as of now
        "foreign": evolve(ready, run_id=OTHER_RUN, tool_call_id="foreign"),  # another run's record
    }
    tracker = TrackerStore(store, ["ghost", "proj_1", "old_1", "foreign"], substitutes)

    report = boundary_for(tracker).project_progress(context)

    assert [f.tool_call_id for f in report.facts] == ["ok_1", "ok_2"]
    assert dict(report.excluded) == {
        ExclusionReason.ERROR: 1,
        ExclusionReason.MISSING: 1,
        ExclusionReason.PROJECTING: 1,
        ExclusionReason.EXPIRED: 1,
        ExclusionReason.OTHER_RUN: 1,
    }
    assert tracker.get_many_calls == 1


def test_expired_records_drop_out_of_progress(store: Any, clock: FakeClock) -> None:
    """CIS-PROG-3, CIS-TTL-4: once a record's TTL passes, it is excluded (read as missing or expired)."""
    boundary = boundary_for(store)
    context = open_run(boundary, ttl_ms=1_000, deadline_ms=500)
    assert boundary.invoke(context, envelope()).ok
    assert len(boundary.project_progress(context).facts) == 1
    clock.advance(1_000)
    report = boundary.project_progress(context)
    assert report.facts == ()
    assert sum(report.excluded.values()) <= 1
    assert set(report.excluded) <= {ExclusionReason.MISSING, ExclusionReason.EXPIRED}


def test_facts_are_capped_in_count_and_bytes_never_truncated(store: Any) -> None:
    """CIS-PROG-4: over the caps, whole facts are omitted and counted; none is cut."""
    boundary = boundary_for(store, tool(FakeExecutor("raw"), by_query()), limits=Limits(max_facts=2))
    context = open_run(boundary)
    for i in range(3):
        assert boundary.invoke(context, envelope(f"call_{i}", arguments=f'{{"q":"q{i}"}}')).ok
    report = boundary.project_progress(context)
    assert [f.tool_call_id for f in report.facts] == ["call_0", "call_1"]
    assert report.omitted == 1

    # "found q0" + "s" = 9 bytes per fact: 20 bytes hold two facts, not three.
    tight = boundary_for(store, limits=Limits(max_fact_bytes=20)).project_progress(context)
    assert [f.content for f in tight.facts] == ["found q0", "found q1"]
    assert tight.omitted == 1


def test_progress_is_one_batched_read_without_raw(store: Any) -> None:
    """CIS-PROG-5, CIS-PROG-1: the ordered ids, then one batched read; no per-record reads."""
    boundary = boundary_for(store)
    context = open_run(boundary)
    for i in range(5):
        assert boundary.invoke(context, envelope(f"call_{i}")).ok
    counting = CountingStore(store)
    report = boundary_for(counting).project_progress(context)
    assert len(report.facts) == 5
    assert counting.log == ["completed", "get_progress"]


def test_progress_of_an_empty_run_reads_no_records(store: Any) -> None:
    """CIS-PROG-5: nothing completed, nothing to read."""
    counting = CountingStore(store)
    boundary = boundary_for(counting)
    context = open_run(boundary)
    counting.log.clear()
    report = boundary.project_progress(context)
    assert report.facts == ()
    assert report.omitted == 0
    assert counting.log == ["completed"]


def test_progress_of_another_run_is_separate(store: Any) -> None:
    """CIS-PROG-3, CIS-PRE-3: a run's progress never includes another run's calls."""
    boundary = boundary_for(store)
    first, second = open_run(boundary), open_run(boundary, OTHER_RUN)
    assert boundary.invoke(first, envelope("call_1")).ok
    assert boundary.invoke(second, envelope("call_2", run_id=OTHER_RUN)).ok
    assert [f.tool_call_id for f in boundary.project_progress(first).facts] == ["call_1"]
    assert [f.tool_call_id for f in boundary.project_progress(second).facts] == ["call_2"]


# ---------------------------------------------------------------------------
# Citations


def test_cite_kinds(store: Any, clock: FakeClock) -> None:
    """CIS-REF-1, CIS-REF-2, CIS-REF-3: evidence, negative observation, or not referencable with a reason."""
    executor = FakeExecutor(f"raw {MARKER}")
    boundary = boundary_for(store, tool(executor, by_query()))
    context = open_run(boundary)
    other = open_run(boundary, OTHER_RUN)
    assert boundary.invoke(context, envelope("found", arguments='{"q":"a"}')).ok
    assert boundary.invoke(context, envelope("nothing", arguments='{"q":"none"}')).ok
    assert boundary.invoke(other, envelope("theirs", run_id=OTHER_RUN)).ok
    executor.raises = RuntimeError("x")
    assert not boundary.invoke(context, envelope("failed")).ok
    crashed_worker(store, "running", clock)

    evidence = boundary.cite(context, "found")
    assert (evidence.kind, evidence.content, evidence.scope) == (CitationKind.EVIDENCE, "found a", "s")
    negative = boundary.cite(context, "nothing")
    assert (negative.kind, negative.scope) == (CitationKind.NEGATIVE_OBSERVATION, "scope none")
    for tool_call_id, reasons in [
        ("failed", {ExclusionReason.ERROR}),
        ("running", {ExclusionReason.PROJECTING}),
        ("absent", {ExclusionReason.MISSING}),
        ("theirs", {ExclusionReason.MISSING, ExclusionReason.OTHER_RUN}),
        ("bad id{", {ExclusionReason.UNSAFE_ID}),
    ]:
        citation = boundary.cite(context, tool_call_id)
        assert citation.kind is CitationKind.NOT_REFERENCABLE, tool_call_id
        assert citation.reason in reasons, tool_call_id
        assert citation.content is None
    for citation in (evidence, negative):
        assert MARKER not in repr(citation)


def test_cite_after_expiry_is_not_referencable(store: Any, clock: FakeClock) -> None:
    """CIS-REF-3, CIS-TTL-4: an expired record is never cited."""
    boundary = boundary_for(store)
    context = open_run(boundary, ttl_ms=1_000, deadline_ms=500)
    assert boundary.invoke(context, envelope()).ok
    assert boundary.cite(context, "call_1").kind is CitationKind.EVIDENCE
    clock.advance(1_000)
    citation = boundary.cite(context, "call_1")
    assert citation.kind is CitationKind.NOT_REFERENCABLE
    assert citation.reason in {ExclusionReason.MISSING, ExclusionReason.EXPIRED}


def test_cite_of_an_unsafe_id_does_not_touch_the_store(store: Any) -> None:
    """CIS-REF-3, CIS-ID-3: an unsafe id is answered without a store read."""
    counting = CountingStore(store)
    boundary = boundary_for(counting)
    context = open_run(boundary)
    counting.log.clear()
    assert boundary.cite(context, "x*").reason is ExclusionReason.UNSAFE_ID
    assert counting.log == []


# ---------------------------------------------------------------------------
# Stale sweep


def test_sweep_moves_only_old_projecting_records_to_error(store: Any, clock: FakeClock) -> None:
    """CIS-LIFE-7: PROJECTING records at least the given age become ERROR/STALE_PROJECTION; others stay."""
    boundary = boundary_for(store)
    context = open_run(boundary)
    crashed_worker(store, "old", clock)
    assert boundary.invoke(context, envelope("done")).ok
    clock.advance(4_000)
    crashed_worker(store, "young", clock)
    clock.advance(1_000)  # old: 5 s, young: 1 s

    assert boundary.sweep_stale(context, 5_001) == 0
    assert boundary.sweep_stale(context, 5_000) == 1

    old = store.get(RUN, "old")
    assert (old.status, old.error_code, old.evidence_status) == (
        InvocationStatus.ERROR,
        ErrorCode.STALE_PROJECTION,
        EvidenceStatus.ERROR,
    )
    assert store.get(RUN, "young").status is InvocationStatus.PROJECTING
    assert store.get(RUN, "done").status is InvocationStatus.READY
    assert boundary.sweep_stale(context, 5_000) == 0  # idempotent
    assert boundary.cite(context, "old").reason is ExclusionReason.ERROR
    assert boundary.project_progress(context).excluded == {ExclusionReason.ERROR: 1}
    assert boundary.sweep_stale(context, 0) == 1  # young too, at age 0
    with pytest.raises(ValueError, match="older_than_ms"):
        boundary.sweep_stale(context, -1)


def test_sweep_after_a_store_failure_on_complete(store: Any, clock: FakeClock) -> None:
    """CIS-LIFE-7, CIS-FAIL-5: a call whose completion failed is left PROJECTING, then swept."""
    failing = boundary_for(FailingStore(store, ["complete"]))
    context = open_run(boundary_for(store))
    assert failing.invoke(context, envelope()).code is ErrorCode.STORE_UNAVAILABLE
    clock.advance(60_000)
    assert boundary_for(store).sweep_stale(context, 30_000) == 1
    assert store.get(RUN, "call_1").error_code is ErrorCode.STALE_PROJECTION


def test_a_sweep_during_projection_wins_the_compare_and_set(store: Any, clock: FakeClock) -> None:
    """CIS-LIFE-7, CIS-STORE-3: a sweep while the projector runs wins; the late READY is refused."""
    holder: dict[str, Any] = {}

    def stuck_projector(_raw: str, _args: Any) -> Projection:
        clock.advance(10_000)
        # Another worker sweeps while this projector runs; the raw is not in the store
        # yet (one write per call), so the swept record has none either.
        holder["swept"] = holder["boundary"].sweep_stale(holder["context"], 1_000)
        return Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content="late", scope="s")

    boundary = boundary_for(store, tool(FakeExecutor("raw"), stuck_projector))
    holder.update(boundary=boundary, context=open_run(boundary))
    assert boundary.invoke(holder["context"], envelope()).code is ErrorCode.INVALID_TRANSITION
    assert holder["swept"] == 1
    record = store.get(RUN, "call_1")
    assert record.error_code is ErrorCode.STALE_PROJECTION
    assert record.agent_result is None


# ---------------------------------------------------------------------------
# Store failures on reads


@pytest.mark.parametrize(
    ("operation", "fail_on"),
    [("progress", "completed"), ("progress", "get_progress"), ("cite", "get"), ("sweep", "calls")],
)
def test_read_failures_raise_a_safe_store_unavailable(store: Any, operation: str, fail_on: str) -> None:
    """CIS-FAIL-5, CIS-ERR-1: read paths raise StoreUnavailableError with fixed text, nothing chained."""
    boundary = boundary_for(store)
    context = open_run(boundary)
    assert boundary.invoke(context, envelope()).ok
    failing = boundary_for(FailingStore(store, [fail_on]))
    call = {
        "progress": lambda: failing.project_progress(context),
        "cite": lambda: failing.cite(context, "call_1"),
        "sweep": lambda: failing.sweep_stale(context, 0),
    }[operation]
    with pytest.raises(StoreUnavailableError) as info:
        call()
    assert info.value.__cause__ is None
    assert info.value.__suppress_context__ is True
    assert MARKER not in str(info.value)
    assert "STORE_UNAVAILABLE" in str(info.value)


def test_sweep_counts_a_readmitted_id_once(store: Any, clock: FakeClock) -> None:
    """CIS-LIFE-7: an id re-admitted after its record expired is listed twice by calls(); swept once."""
    boundary = boundary_for(store)
    context = open_run(boundary, ttl_ms=1_000)
    crashed_worker(store, "call_1", clock)
    clock.advance(1_500)  # the first record has expired; the id may be admitted again
    crashed_worker(store, "call_1", clock)
    clock.advance(500)
    assert store.calls(RUN) == ("call_1", "call_1")
    assert boundary.sweep_stale(context, 100) == 1
    assert store.get(RUN, "call_1").error_code is ErrorCode.STALE_PROJECTION


# ---------------------------------------------------------------------------
# Completion order and fact content, threads (sync) and tasks (async)

#: Four calls admitted in this order (sequence 1..4), on two tools.
ORDERED_CALLS = (("c0", "search"), ("c1", "grep_logs"), ("c2", "search"), ("c3", "grep_logs"))
#: The order in which their executors are released: the facts' order (CIS-PROG-2).
COMPLETION_ORDER = ("c2", "c0", "c3", "c1")


def _projection_of(tool_call_id: str) -> Projection:
    """Odd calls found nothing (empty content, a scope); even ones found text (empty scope)."""
    if int(tool_call_id[1]) % 2:
        return Projection(
            evidence_status=EvidenceStatus.NO_EVIDENCE, content="", scope=f"logs of {tool_call_id}"
        )
    return Projection(
        evidence_status=EvidenceStatus.EVIDENCE_FOUND, content=f"found {tool_call_id}", scope=""
    )


def _expected_facts() -> tuple[ObservedFact, ...]:
    """The facts the spec derives, field by field, independently of any store (CIS-PROG-2)."""
    sequence = {tool_call_id: index for index, (tool_call_id, _) in enumerate(ORDERED_CALLS, start=1)}
    tools = dict(ORDERED_CALLS)
    facts = []
    for tool_call_id in COMPLETION_ORDER:
        projection = _projection_of(tool_call_id)
        evidence = EvidenceStatus(projection.evidence_status)
        facts.append(
            ObservedFact(
                tool_call_id=tool_call_id,
                tool_name=tools[tool_call_id],
                sequence=sequence[tool_call_id],
                evidence_status=evidence,
                negative=evidence is EvidenceStatus.NO_EVIDENCE,
                content=projection.content,
                scope=projection.scope,
            )
        )
    return tuple(facts)


def _check_report(report: ProgressReport, records: Any, now_ms: int, limits: Limits) -> None:
    """The report equals the spec's facts and the kernel's projection of the stored records."""
    assert report.facts == _expected_facts()
    assert (dict(report.excluded), report.omitted) == ({}, 0)
    assert report == kernel_progress(RUN, list(COMPLETION_ORDER), records, now_ms, limits)


def test_facts_follow_completion_order_across_threads(store: Any, clock: FakeClock) -> None:
    """CIS-PROG-2, CIS-PROG-1, CIS-BND-1: calls admitted 1..4 and completed 3, 1, 4, 2 in threads.

    Each fact is compared in full (id, tool name, sequence, evidence, negativity,
    content, scope) with what the spec derives and with kernel ``project_progress``.
    """
    entered = {tool_call_id: threading.Event() for tool_call_id, _ in ORDERED_CALLS}
    gates = {tool_call_id: threading.Event() for tool_call_id, _ in ORDERED_CALLS}

    def executor(args: Any) -> str:
        entered[args["id"]].set()
        assert gates[args["id"]].wait(10)
        return f"raw {args['id']} {MARKER}"

    def projector(_raw: str, args: Any) -> Projection:
        return _projection_of(args["id"])

    names = sorted({name for _, name in ORDERED_CALLS})
    boundary = boundary_for(store, *(tool(executor, projector, name=name) for name in names))
    context = open_run(boundary)
    results: dict[str, Any] = {}
    threads: dict[str, threading.Thread] = {}
    for tool_call_id, name in ORDERED_CALLS:
        call = envelope(tool_call_id, tool_name=name, arguments=f'{{"id": "{tool_call_id}"}}')
        threads[tool_call_id] = threading.Thread(
            target=lambda call=call, key=tool_call_id: results.__setitem__(
                key, boundary.invoke(context, call)
            )
        )
        threads[tool_call_id].start()
        assert entered[tool_call_id].wait(10)  # admitted before the next one starts
    for tool_call_id in COMPLETION_ORDER:
        gates[tool_call_id].set()
        threads[tool_call_id].join(10)
        assert results[tool_call_id].ok, results[tool_call_id]
    assert store.completed(RUN) == COMPLETION_ORDER
    report = boundary.project_progress(context)
    _check_report(report, store.get_many(RUN, list(COMPLETION_ORDER), include_raw=False), clock(), Limits())
    assert MARKER not in repr(report)


def test_facts_follow_completion_order_across_tasks(make_async_store: Any, clock: FakeClock) -> None:
    """CIS-PROG-2, CIS-PROG-1, CIS-BND-1: the same four calls as asyncio tasks on the async boundary."""

    async def main() -> None:
        store = make_async_store(clock)
        entered = {tool_call_id: asyncio.Event() for tool_call_id, _ in ORDERED_CALLS}
        gates = {tool_call_id: asyncio.Event() for tool_call_id, _ in ORDERED_CALLS}

        async def executor(args: Any) -> str:
            entered[args["id"]].set()
            await gates[args["id"]].wait()
            return f"raw {args['id']}"

        async def projector(_raw: str, args: Any) -> Projection:
            await asyncio.sleep(0)
            return _projection_of(args["id"])

        names = sorted({name for _, name in ORDERED_CALLS})
        registry = ToolRegistry([tool(executor, projector, name=name) for name in names])
        try:
            boundary = AsyncToolBoundary(store, registry, limits=Limits())
            context = await boundary.open_run(
                RUN, deadline_ms=clock() + 600_000, ttl_ms=3_600_000, tool_call_budget=10, byte_budget=1 << 20
            )
            assert isinstance(context, RunContext)
            tasks = {}
            for tool_call_id, name in ORDERED_CALLS:
                call = envelope(tool_call_id, tool_name=name, arguments=f'{{"id": "{tool_call_id}"}}')
                tasks[tool_call_id] = asyncio.create_task(boundary.invoke(context, call))
                await asyncio.wait_for(entered[tool_call_id].wait(), 10)
            for tool_call_id in COMPLETION_ORDER:
                gates[tool_call_id].set()
                result = await asyncio.wait_for(tasks[tool_call_id], 10)
                assert result.ok, result
            assert await store.completed(RUN) == COMPLETION_ORDER
            report = await boundary.project_progress(context)
            records = await store.get_many(RUN, list(COMPLETION_ORDER), include_raw=False)
            _check_report(report, records, clock(), Limits())
        finally:
            await store.close()

    asyncio.run(main())


def test_the_fact_byte_cap_counts_the_scope(store: Any, clock: FakeClock) -> None:
    """CIS-PROG-4: content and scope both count towards max_fact_bytes, at the cap and one byte under."""

    def projector(_raw: str, args: Any) -> Projection:
        return Projection(evidence_status=EvidenceStatus.NO_EVIDENCE, content="", scope="s" * int(args["n"]))

    boundary = boundary_for(store, tool(FakeExecutor("raw"), projector))
    context = open_run(boundary)
    for index, size in enumerate((4, 5, 6)):
        assert boundary.invoke(context, envelope(f"call_{index}", arguments=f'{{"n": {size}}}')).ok
    exact = boundary_for(store, limits=Limits(max_fact_bytes=15)).project_progress(context)
    assert [(fact.tool_call_id, fact.content, fact.scope) for fact in exact.facts] == [
        ("call_0", "", "ssss"),
        ("call_1", "", "sssss"),
        ("call_2", "", "ssssss"),
    ]
    short = boundary_for(store, limits=Limits(max_fact_bytes=14)).project_progress(context)
    assert [fact.tool_call_id for fact in short.facts] == ["call_0", "call_1"]
    assert short.omitted == 1
