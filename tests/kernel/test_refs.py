"""References and the progress projection: what of a run an agent may cite (CIS-REF-*, CIS-PROG-*)."""

from __future__ import annotations

import attrs

from invocation_store.kernel import (
    CanonicalRecord,
    CitationKind,
    EvidenceStatus,
    ExclusionReason,
    Limits,
    ObservedFact,
    ProjectionReceived,
    RawReceived,
    cite,
    classify,
    project_progress,
)

from ._helpers import (
    OTHER_RUN_ID,
    RAW,
    RUN_ID,
    T0,
    TTL_MS,
    admitted,
    begun,
    errored,
    make_run,
    projection,
    ready,
    step,
    with_raw,
)

NOW = T0 + 30


def test_ready_found_is_evidence() -> None:
    """CIS-REF-1: a READY + EVIDENCE_FOUND record of the current run is cited as evidence with its result."""
    final = ready(content="Paris: 18 C", scope="weather index")
    citation = cite(RUN_ID, "call_1", final, NOW)
    assert citation.kind is CitationKind.EVIDENCE
    assert (citation.tool_call_id, citation.content, citation.scope) == (
        "call_1",
        "Paris: 18 C",
        "weather index",
    )
    assert citation.reason is None
    assert classify(RUN_ID, "call_1", final, NOW) is None


def test_ready_no_evidence_is_only_a_negative_observation() -> None:
    """CIS-REF-2, CIS-EVID-3: READY + NO_EVIDENCE cites only as a negative observation, with its scope."""
    final = ready(evidence=EvidenceStatus.NO_EVIDENCE, content="no orders", scope="orders table, 2024")
    citation = cite(RUN_ID, "call_1", final, NOW)
    assert citation.kind is CitationKind.NEGATIVE_OBSERVATION
    assert citation.scope == "orders table, 2024"


def test_everything_else_is_not_referencable() -> None:
    """CIS-REF-3: ERROR, PROJECTING, missing, expired and other-run records are never referencable."""
    final = ready()
    cases: list[tuple[str, str, CanonicalRecord | None, int, ExclusionReason]] = [
        (RUN_ID, "call_1", errored(), NOW, ExclusionReason.ERROR),
        (RUN_ID, "call_1", begun(), NOW, ExclusionReason.PROJECTING),
        (RUN_ID, "call_1", with_raw(begun()), NOW, ExclusionReason.PROJECTING),
        (RUN_ID, "call_1", None, NOW, ExclusionReason.MISSING),
        (RUN_ID, "call_1", final, final.expires_at_ms, ExclusionReason.EXPIRED),
        (OTHER_RUN_ID, "call_1", final, NOW, ExclusionReason.OTHER_RUN),
        (RUN_ID, "call_2", final, NOW, ExclusionReason.OTHER_RUN),
        (RUN_ID, "call 1", final, NOW, ExclusionReason.UNSAFE_ID),
    ]
    for run_id, tool_call_id, record, now_ms, reason in cases:
        citation = cite(run_id, tool_call_id, record, now_ms)
        assert citation.kind is CitationKind.NOT_REFERENCABLE, reason
        assert citation.reason is reason
        assert citation.content is None
        assert citation.scope is None


def test_agent_facing_views_never_carry_raw_data() -> None:
    """CIS-REC-3: citations and progress facts hold the bounded result only, never the raw response."""
    final = ready()
    failed = errored(with_raw(begun("call_2")))
    assert "RAW-ONLY" in RAW
    assert final.raw_response == RAW
    assert failed.raw_response == RAW
    views: list[object] = [
        cite(RUN_ID, "call_1", final, NOW),
        cite(RUN_ID, "call_2", failed, NOW),
        project_progress(RUN_ID, ["call_1", "call_2"], {"call_1": final, "call_2": failed}, NOW, Limits()),
    ]
    for view in views:
        assert "RAW-ONLY" not in repr(view)
    assert "raw_response" not in {field.name for field in attrs.fields(ObservedFact)}


def _ready(tool_call_id: str, content: str = "fact", scope: str = "") -> CanonicalRecord:
    return ready(begun(tool_call_id), content=content, scope=scope)


def test_completed_calls_become_facts_in_execution_order() -> None:
    """CIS-PROG-2: READY records become bounded facts in the tracker's order, carrying their identity."""
    run = make_run()
    records: dict[str, CanonicalRecord | None] = {}
    answers = {"call_a": "first", "call_b": "second", "call_c": "nothing"}
    for tool_call_id, content in answers.items():
        admission = admitted(tool_call_id, run=run, token=tool_call_id)
        run = admission.run
        evidence = EvidenceStatus.NO_EVIDENCE if tool_call_id == "call_c" else EvidenceStatus.EVIDENCE_FOUND
        records[tool_call_id] = ready(admission.record, evidence=evidence, content=content, scope="idx")
    report = project_progress(RUN_ID, ["call_a", "call_b", "call_c", "call_a"], records, NOW, Limits())
    assert [fact.tool_call_id for fact in report.facts] == ["call_a", "call_b", "call_c"]
    assert [fact.content for fact in report.facts] == ["first", "second", "nothing"]
    assert [fact.sequence for fact in report.facts] == [1, 2, 3]
    assert [fact.negative for fact in report.facts] == [False, False, True]
    assert report.facts[2].evidence_status is EvidenceStatus.NO_EVIDENCE
    assert report.facts[2].scope == "idx"
    assert report.excluded == {}
    assert report.omitted == 0
    reordered = project_progress(RUN_ID, ["call_c", "call_a"], records, NOW, Limits())
    assert [fact.tool_call_id for fact in reordered.facts] == ["call_c", "call_a"]


def _ready_earlier(tool_call_id: str) -> CanonicalRecord:
    """A READY record created one TTL before ``T0 + 5``: it has expired by ``NOW``."""
    start = T0 + 5 - TTL_MS
    record = admitted(tool_call_id, run=make_run(now_ms=start), now_ms=start).record
    record = step(record, RawReceived(raw_response=RAW, now_ms=start + 1))
    return step(record, ProjectionReceived(projection=projection(), now_ms=start + 2))


def test_invalid_identities_are_excluded_and_counted() -> None:
    """CIS-PROG-3: missing, expired, cross-run, PROJECTING and ERROR identities never become facts."""
    old = _ready_earlier("call_old")
    assert old.expires_at_ms == T0 + 5 < NOW
    records: dict[str, CanonicalRecord | None] = {
        "call_ok": _ready("call_ok"),
        "call_missing": None,
        "call_old": old,
        "call_foreign": ready(begun("call_foreign", run_id=OTHER_RUN_ID)),
        "call_running": begun("call_running"),
        "call_failed": errored(begun("call_failed")),
    }
    identities = [
        "call_missing",
        "call_old",
        "call_foreign",
        "call_running",
        "call_ok",
        "call_failed",
        "bad id",
        "call_unread",
    ]
    report = project_progress(RUN_ID, identities, records, NOW, Limits())
    assert [fact.tool_call_id for fact in report.facts] == ["call_ok"]
    assert report.excluded == {
        ExclusionReason.MISSING: 2,
        ExclusionReason.EXPIRED: 1,
        ExclusionReason.OTHER_RUN: 1,
        ExclusionReason.PROJECTING: 1,
        ExclusionReason.ERROR: 1,
        ExclusionReason.UNSAFE_ID: 1,
    }
    assert report.omitted == 0


def test_facts_are_capped_in_count_and_bytes_never_truncated() -> None:
    """CIS-PROG-4: facts stop whole at the count or byte cap; the rest are counted as omitted."""
    records = {f"call_{index}": _ready(f"call_{index}", "\u20ac" * 3, "s") for index in range(5)}
    ids = list(records)
    by_count = project_progress(RUN_ID, ids, records, NOW, Limits(max_facts=2))
    assert [fact.tool_call_id for fact in by_count.facts] == ["call_0", "call_1"]
    assert by_count.omitted == 3
    # Each fact is 9 + 1 = 10 UTF-8 bytes: 25 bytes hold two whole facts, never a cut third.
    by_bytes = project_progress(RUN_ID, ids, records, NOW, Limits(max_fact_bytes=25))
    assert [fact.content for fact in by_bytes.facts] == ["\u20ac" * 3] * 2
    assert by_bytes.omitted == 3
    exact = project_progress(RUN_ID, ids, records, NOW, Limits(max_fact_bytes=30))
    assert len(exact.facts) == 3
    # A small fact after a fact that did not fit is omitted too: the list ends at the first misfit.
    mixed = dict(records, call_1=_ready("call_1", "x" * 100), call_2=_ready("call_2", "y"))
    ended = project_progress(RUN_ID, ids, mixed, NOW, Limits(max_fact_bytes=50))
    assert [fact.tool_call_id for fact in ended.facts] == ["call_0"]
    assert ended.omitted == 4


def test_citing_an_unsafe_id_does_not_echo_it() -> None:
    """CIS-ERR-1, CIS-REF-3: an unsafe id is cited as None (null in a trace), reason UNSAFE_ID."""
    hostile = "cis:{run-1}:call:x " + "A" * 10_000
    citation = cite("run-1", hostile, None, 0)
    assert citation.kind is CitationKind.NOT_REFERENCABLE
    assert citation.reason is ExclusionReason.UNSAFE_ID
    assert citation.tool_call_id is None
