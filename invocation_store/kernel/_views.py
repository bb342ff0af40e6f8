"""What the progress projection reads of a record (CIS-PERF-3, CIS-PROG-1).

:func:`~invocation_store.kernel.project_progress` and
:func:`~invocation_store.kernel.classify` use nine fields of a record: its ids,
tool name, sequence, status, evidence status, bounded result, scope and expiry
(:data:`PROGRESS_FIELDS`). :class:`FactSource` names them for the type checker (a
:class:`~invocation_store.kernel.CanonicalRecord` is one); :class:`ProgressView` holds
just them, so that a store can answer a progress read without reading the request
text, the raw response or the invocation token.
"""

from __future__ import annotations

from typing import Final, NamedTuple, Protocol

from ._ids import check_tool_call_id, is_safe_id
from ._models import CanonicalRecord, EvidenceStatus, InvocationStatus, is_safe_int

__all__ = ["PROGRESS_FIELDS", "FactSource", "ProgressView", "is_well_formed_outcome", "is_well_formed_view"]

#: The record fields a progress read needs, in this order (CIS-PERF-3).
PROGRESS_FIELDS: Final = (
    "run_id",
    "tool_call_id",
    "tool_name",
    "sequence",
    "status",
    "evidence_status",
    "agent_result",
    "scope",
    "expires_at_ms",
)


class FactSource(Protocol):
    """Anything with a record's :data:`PROGRESS_FIELDS` (read-only)."""

    @property
    def run_id(self) -> str: ...
    @property
    def tool_call_id(self) -> str: ...
    @property
    def tool_name(self) -> str: ...
    @property
    def sequence(self) -> int: ...
    @property
    def status(self) -> InvocationStatus: ...
    @property
    def evidence_status(self) -> EvidenceStatus | None: ...
    @property
    def agent_result(self) -> str | None: ...
    @property
    def scope(self) -> str | None: ...
    @property
    def expires_at_ms(self) -> int: ...


class ProgressView(NamedTuple):
    """The :data:`PROGRESS_FIELDS` of one record, as a store read them (CIS-PERF-3).

    Same meaning and units as the :class:`~invocation_store.kernel.CanonicalRecord`
    fields of the same names (``expires_at_ms`` in integer ms). A named tuple: built
    once per completed call on every progress read, where its construction is several
    times cheaper than a frozen attrs class; immutable all the same.
    """

    run_id: str
    tool_call_id: str
    tool_name: str
    sequence: int
    status: InvocationStatus
    evidence_status: EvidenceStatus | None
    agent_result: str | None
    scope: str | None
    expires_at_ms: int

    @classmethod
    def of(cls, record: CanonicalRecord) -> ProgressView:
        """The view of ``record``."""
        return cls(
            record.run_id,
            record.tool_call_id,
            record.tool_name,
            record.sequence,
            record.status,
            record.evidence_status,
            record.agent_result,
            record.scope,
            record.expires_at_ms,
        )


_VALID_EVIDENCE: Final = (EvidenceStatus.EVIDENCE_FOUND, EvidenceStatus.NO_EVIDENCE)


def is_well_formed_view(view: ProgressView) -> bool:
    """:func:`~invocation_store.kernel.is_well_formed` restricted to what a view holds.

    :func:`is_well_formed_outcome`, and the ids are safe. A store answers a view for
    which this is False with STORE_UNAVAILABLE (CIS-STORE-6).
    """
    return (
        is_well_formed_outcome(view)
        and is_safe_id(view.run_id)
        and check_tool_call_id(view.tool_call_id) is None
    )


def is_well_formed_outcome(view: FactSource) -> bool:
    """The part of :func:`is_well_formed_view` that is not about ids.

    PROJECTING has no evidence, result or scope; READY has evidence FOUND or
    NO_EVIDENCE, a result and a scope; ERROR has evidence ERROR and no result or
    scope; the sequence and the expiry are ints in ``[1, 2**53 - 1]`` (an expiry
    follows a creation time of 0 or later). For a store that already compared the ids read
    with the safe ids it asked for (CIS-STORE-6).
    """
    status = view.status
    if status is InvocationStatus.READY:
        outcome_ok = (
            view.evidence_status in _VALID_EVIDENCE
            and type(view.agent_result) is str
            and type(view.scope) is str
        )
    elif status is InvocationStatus.ERROR:
        outcome_ok = (
            view.evidence_status is EvidenceStatus.ERROR and view.agent_result is None and view.scope is None
        )
    elif status is InvocationStatus.PROJECTING:
        outcome_ok = view.evidence_status is None and view.agent_result is None and view.scope is None
    else:
        return False
    # A record's expiry follows its creation (at 0 or later), so it is at least 1.
    return outcome_ok and is_safe_int(view.sequence, 1) and is_safe_int(view.expires_at_ms, 1)
