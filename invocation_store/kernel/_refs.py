"""References and progress: what of a run may be cited, and the observed facts.

Only READY records of the current run are referencable: READY + EVIDENCE_FOUND as
evidence, READY + NO_EVIDENCE only as a scoped negative observation (CIS-REF-1,
CIS-REF-2). PROJECTING, ERROR, missing, expired and other-run records never are
(CIS-REF-3). The progress projection resolves the tracker's ordered identities into
bounded facts without keeping any raw data (CIS-PROG-1..5).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence

from attrs import frozen

from ._ids import is_safe_id
from ._models import CanonicalRecord, EvidenceStatus, InvocationStatus, Limits, check_now
from ._sizes import utf8_len
from ._views import FactSource

__all__ = [
    "Citation",
    "CitationKind",
    "ExclusionReason",
    "ObservedFact",
    "ProgressReport",
    "cite",
    "classify",
    "project_progress",
]


class CitationKind(enum.StrEnum):
    """How a record may be cited (CIS-REF-1..3)."""

    #: READY + EVIDENCE_FOUND of this run.
    EVIDENCE = "EVIDENCE"
    #: READY + NO_EVIDENCE of this run: nothing found within ``scope``.
    NEGATIVE_OBSERVATION = "NEGATIVE_OBSERVATION"
    #: Anything else.
    NOT_REFERENCABLE = "NOT_REFERENCABLE"


class ExclusionReason(enum.StrEnum):
    """Why an identity is not referencable (CIS-REF-3, CIS-PROG-3)."""

    #: The id is not a safe id.
    UNSAFE_ID = "UNSAFE_ID"
    #: No record under the key.
    MISSING = "MISSING"
    #: The record's TTL has passed.
    EXPIRED = "EXPIRED"
    #: The record belongs to another run (or answers another id).
    OTHER_RUN = "OTHER_RUN"
    #: The record is still PROJECTING.
    PROJECTING = "PROJECTING"
    #: The record is ERROR.
    ERROR = "ERROR"


@frozen(kw_only=True)
class Citation:
    """The answer to "may the agent cite this call?" (CIS-REF-1..3).

    ``content``/``scope`` are the bounded agent result, present only for EVIDENCE
    and NEGATIVE_OBSERVATION; ``reason`` only for NOT_REFERENCABLE. ``tool_call_id``
    echoes the id asked about when it is a safe id, and is ``None`` otherwise: an
    id that is not safe is never echoed, here as in every agent-facing value
    (CIS-ERR-1). Never raw data.
    """

    kind: CitationKind
    tool_call_id: str | None
    content: str | None = None
    scope: str | None = None
    reason: ExclusionReason | None = None


@frozen(kw_only=True)
class ObservedFact:
    """One bounded fact of a progress projection (CIS-PROG-2).

    ``negative`` is True for a NO_EVIDENCE fact (a scoped negative observation).
    """

    tool_call_id: str
    tool_name: str
    sequence: int
    evidence_status: EvidenceStatus
    negative: bool
    content: str
    scope: str


@frozen(kw_only=True)
class ProgressReport:
    """Facts in completion order plus what was left out (CIS-PROG-2..4).

    ``excluded`` counts non-referencable identities by reason; ``omitted`` counts
    READY records left out because the count or byte cap was reached (facts are
    never truncated: the first fact that does not fit ends the list).
    """

    facts: tuple[ObservedFact, ...]
    excluded: Mapping[ExclusionReason, int]
    omitted: int


def classify(
    run_id: str, tool_call_id: str, record: CanonicalRecord | FactSource | None, now_ms: int
) -> ExclusionReason | None:
    """Return why ``record`` (read under ``run_id``/``tool_call_id``) is not citable, or None."""
    if not is_safe_id(tool_call_id):
        return ExclusionReason.UNSAFE_ID
    if record is None:
        return ExclusionReason.MISSING
    if record.run_id != run_id or record.tool_call_id != tool_call_id:
        return ExclusionReason.OTHER_RUN
    if now_ms >= record.expires_at_ms:
        return ExclusionReason.EXPIRED
    if record.status is InvocationStatus.PROJECTING:
        return ExclusionReason.PROJECTING
    if record.status is InvocationStatus.ERROR or record.evidence_status not in (
        EvidenceStatus.EVIDENCE_FOUND,
        EvidenceStatus.NO_EVIDENCE,
    ):
        return ExclusionReason.ERROR
    return None


def cite(run_id: str, tool_call_id: str, record: CanonicalRecord | None, now_ms: int) -> Citation:
    """Classify ``record`` for citation by run ``run_id`` at ``now_ms`` (CIS-REF-1..3).

    ``Citation.tool_call_id`` echoes the id only when it is a safe id; an unsafe one
    is cited as ``None`` with reason UNSAFE_ID (CIS-ERR-1). ``run_id`` is only compared
    with the record's: an unsafe one matches no record (MISSING or OTHER_RUN), and the
    safe tool_call_id is still echoed. Raises ``ValueError`` when ``now_ms`` is not an
    int in ``[0, 2**53 - 1]``.
    """
    check_now(now_ms)
    reason = classify(run_id, tool_call_id, record, now_ms)
    if reason is not None or record is None:
        return Citation(
            kind=CitationKind.NOT_REFERENCABLE,
            # An unsafe id is not echoed: it may be anything the agent wrote,
            # unbounded and key-like.
            tool_call_id=tool_call_id if is_safe_id(tool_call_id) else None,
            reason=reason or ExclusionReason.MISSING,
        )
    kind = (
        CitationKind.EVIDENCE
        if record.evidence_status is EvidenceStatus.EVIDENCE_FOUND
        else CitationKind.NEGATIVE_OBSERVATION
    )
    return Citation(kind=kind, tool_call_id=tool_call_id, content=record.agent_result, scope=record.scope)


def project_progress(
    run_id: str,
    identities: Sequence[str],
    records: Mapping[str, CanonicalRecord | None] | Mapping[str, FactSource | None],
    now_ms: int,
    limits: Limits,
) -> ProgressReport:
    """Turn the tracker's ordered identities into bounded observed facts (CIS-PROG-2..4).

    ``identities`` are tool_call_ids in completion order: an id listed twice is judged
    once, at its first position (one fact or one exclusion); an identity that is not
    a text is counted UNSAFE_ID each time it occurs. ``records`` maps each to what the
    store read (``None`` if absent): records, or just their progress fields
    (:class:`ProgressView`, CIS-PERF-3). Keeps only READY records of ``run_id``
    (CIS-PROG-3), at most ``limits.max_facts`` facts and ``limits.max_fact_bytes``
    UTF-8 bytes of content + scope (CIS-PROG-4). Raises ``ValueError`` when
    ``now_ms`` is not an int in ``[0, 2**53 - 1]``.
    """
    check_now(now_ms)
    facts: list[ObservedFact] = []
    excluded: dict[ExclusionReason, int] = {}
    omitted = 0
    total = 0
    full = False
    seen: set[str] = set()
    for tool_call_id in identities:
        if type(tool_call_id) is not str:  # no id at all: never a key to look up
            excluded[ExclusionReason.UNSAFE_ID] = excluded.get(ExclusionReason.UNSAFE_ID, 0) + 1
            continue
        if tool_call_id in seen:
            continue
        seen.add(tool_call_id)
        record = records.get(tool_call_id)
        reason = classify(run_id, tool_call_id, record, now_ms)
        if reason is not None:
            excluded[reason] = excluded.get(reason, 0) + 1
            continue
        assert record is not None
        assert record.evidence_status is not None
        content = record.agent_result or ""
        scope = record.scope or ""
        size = (utf8_len(content) or 0) + (utf8_len(scope) or 0)
        if full or len(facts) >= limits.max_facts or total + size > limits.max_fact_bytes:
            full = True
            omitted += 1
            continue
        total += size
        facts.append(
            ObservedFact(
                tool_call_id=tool_call_id,
                tool_name=record.tool_name,
                sequence=record.sequence,
                evidence_status=record.evidence_status,
                negative=record.evidence_status is EvidenceStatus.NO_EVIDENCE,
                content=content,
                scope=scope,
            )
        )
    return ProgressReport(facts=tuple(facts), excluded=excluded, omitted=omitted)
