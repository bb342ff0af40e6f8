"""Progress facts compared in full: every field, the byte cap's parts, duplicates (CIS-PROG-2..4)."""

from __future__ import annotations

from invocation_store.kernel import (
    CanonicalRecord,
    EvidenceStatus,
    ExclusionReason,
    Limits,
    ObservedFact,
    project_progress,
    utf8_len,
)

from ._helpers import RUN_ID, T0, admitted, make_run, ready

NOW = T0 + 30


def _fact(record: CanonicalRecord) -> ObservedFact:
    """The fact the spec derives from a READY record: every field named (CIS-PROG-2)."""
    assert record.evidence_status is not None
    assert record.agent_result is not None
    assert record.scope is not None
    return ObservedFact(
        tool_call_id=record.tool_call_id,
        tool_name=record.tool_name,
        sequence=record.sequence,
        evidence_status=record.evidence_status,
        negative=record.evidence_status is EvidenceStatus.NO_EVIDENCE,
        content=record.agent_result,
        scope=record.scope,
    )


def _three() -> list[CanonicalRecord]:
    run = make_run()
    records = []
    for index, (tool, evidence, content, scope) in enumerate(
        [
            ("search", EvidenceStatus.EVIDENCE_FOUND, "Paris: 18 C", ""),
            ("grep_logs", EvidenceStatus.NO_EVIDENCE, "", "payments-api.log, last hour"),
            ("sql", EvidenceStatus.EVIDENCE_FOUND, "日本", "orders"),
        ],
        start=1,
    ):
        admission = admitted(f"call_{index}", run=run, token=f"tok-{index}", tool_name=tool)
        run = admission.run
        records.append(ready(admission.record, evidence=evidence, content=content, scope=scope))
    return records


def test_facts_carry_every_field_of_their_record() -> None:
    """CIS-PROG-2, CIS-EVID-3: tool name, sequence, evidence, negativity, content and scope, exactly.

    Empty content (a negative observation) and an empty scope (found evidence) stay empty.
    """
    records = _three()
    order = ["call_3", "call_1", "call_2"]  # completion order, not admission order
    by_id = {record.tool_call_id: record for record in records}
    report = project_progress(RUN_ID, order, by_id, NOW, Limits())
    assert report.facts == tuple(_fact(by_id[tool_call_id]) for tool_call_id in order)
    assert [fact.tool_name for fact in report.facts] == ["sql", "search", "grep_logs"]
    assert [(fact.content, fact.scope) for fact in report.facts] == [
        ("日本", "orders"),
        ("Paris: 18 C", ""),
        ("", "payments-api.log, last hour"),
    ]
    assert (report.excluded, report.omitted) == ({}, 0)


def test_a_repeated_identity_keeps_its_first_place_and_the_rest_follows() -> None:
    """CIS-PROG-2: duplicates in the tracker are skipped, not an end of the list."""
    records = _three()
    by_id = {record.tool_call_id: record for record in records}
    report = project_progress(
        RUN_ID, ["call_2", "call_2", "call_1", "call_2", "call_3"], by_id, NOW, Limits()
    )
    assert report.facts == tuple(_fact(by_id[name]) for name in ("call_2", "call_1", "call_3"))
    assert (report.excluded, report.omitted) == ({}, 0)


def test_the_byte_cap_counts_content_and_scope_exactly() -> None:
    """CIS-PROG-4: max_fact_bytes covers content + scope in UTF-8 bytes; empty parts count 0.

    The three facts need exactly ``total`` bytes: a cap of ``total`` keeps all, one
    byte less ends the list before the last fact (counted as omitted), whole.
    """
    records = _three()
    by_id = {record.tool_call_id: record for record in records}
    order = ["call_1", "call_2", "call_3"]
    sizes = [utf8_len(r.agent_result or "") + utf8_len(r.scope or "") for r in records]  # type: ignore[operator]
    total = sum(sizes)
    assert sizes == [11, 27, 12]
    exact = project_progress(RUN_ID, order, by_id, NOW, Limits(max_fact_bytes=total))
    assert exact.facts == tuple(_fact(record) for record in records)
    assert exact.omitted == 0
    short = project_progress(RUN_ID, order, by_id, NOW, Limits(max_fact_bytes=total - 1))
    assert short.facts == tuple(_fact(record) for record in records[:2])
    assert short.omitted == 1
    scope_only = project_progress(RUN_ID, ["call_2"], by_id, NOW, Limits(max_fact_bytes=sizes[1] - 1))
    assert (scope_only.facts, scope_only.omitted) == ((), 1)  # the scope's bytes alone pass the cap
    empty_scope = project_progress(RUN_ID, ["call_1"], by_id, NOW, Limits(max_fact_bytes=sizes[0]))
    assert empty_scope.facts == (_fact(records[0]),)
    empty_content = project_progress(RUN_ID, ["call_2"], by_id, NOW, Limits(max_fact_bytes=sizes[1]))
    assert empty_content.facts == (_fact(records[1]),)


def test_the_count_cap_keeps_the_first_facts_whole() -> None:
    """CIS-PROG-4: max_facts - 1, max_facts and max_facts + 1 READY records against a cap of 2."""
    records = _three()
    by_id = {record.tool_call_id: record for record in records}
    for count in (1, 2, 3):
        order = [f"call_{index}" for index in range(1, count + 1)]
        report = project_progress(RUN_ID, order, by_id, NOW, Limits(max_facts=2))
        assert report.facts == tuple(_fact(record) for record in records[: min(count, 2)])
        assert report.omitted == max(0, count - 2)
        assert report.excluded == {}


def test_excluded_records_are_counted_not_listed() -> None:
    """CIS-PROG-3: a missing identity is counted by reason and the facts after it still come."""
    records = _three()
    by_id: dict[str, CanonicalRecord | None] = {record.tool_call_id: record for record in records}
    by_id["gone"] = None
    report = project_progress(RUN_ID, ["gone", "call_1"], by_id, NOW, Limits())
    assert report.facts == (_fact(records[0]),)
    assert report.excluded == {ExclusionReason.MISSING: 1}
