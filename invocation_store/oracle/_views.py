"""Wire views: kernel values as the JSON objects a trace carries (CIS-ORC-1).

One function per kind of value, shared by the recorder (what our implementation
observed) and the checker (what the kernel expects), so both sides spell every
value the same way. Each is the value's form in the one codec
(:mod:`invocation_store.codec`) with the members of the trace model's view: enums
as their exact strings, sizes in UTF-8 bytes, times in integer ms. The raw response
never appears in a view, only its size (CIS-REC-3).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from cattrs.gen import make_dict_unstructure_fn, override

from .. import codec
from ..kernel import (
    AgentView,
    CanonicalRecord,
    Citation,
    ErrorCode,
    Limits,
    ObservedFact,
    ProgressReport,
    RunState,
    agent_view,
    is_safe_id,
    utf8_len,
)
from ..kernel import failure_view as kernel_failure_view

__all__ = [
    "citation_view",
    "fact_view",
    "failure_view",
    "limits_view",
    "outcome_view",
    "progress_view",
    "record_view",
    "run_view",
    "success_view",
]


def _size(text: str | None) -> int | None:
    if text is None:
        return None
    size = utf8_len(text)
    return size if size is not None else len(text.encode("utf-8", "surrogatepass"))


#: The codec's record form as a ``RecordView``: the raw response and the request as
#: their UTF-8 sizes, the invocation token left out (it is not an id, CIS-RETRY-1).
_RECORD_VIEW: Final[Callable[[CanonicalRecord], dict[str, Any]]] = make_dict_unstructure_fn(
    CanonicalRecord,
    codec.converter,
    invocation_token=override(omit=True),
    raw_response=override(rename="raw_bytes", unstruct_hook=_size),
    request_json=override(rename="request_bytes", unstruct_hook=_size),
)


def record_view(record: CanonicalRecord, ttl_remaining_ms: int | None = None) -> dict[str, Any]:
    """A ``RecordView`` object of ``record``; ``ttl_remaining_ms`` only if given.

    The record's codec form with the raw response and the request replaced by their
    UTF-8 sizes and the invocation token left out.
    """
    view = _RECORD_VIEW(record)
    if ttl_remaining_ms is not None:
        view["ttl_remaining_ms"] = ttl_remaining_ms
    return view


def run_view(run: RunState) -> dict[str, Any]:
    """A ``RunView`` object of ``run`` (every field reported: the codec's form)."""
    view: dict[str, Any] = codec.unstructure(run)
    return view


def limits_view(limits: Limits) -> dict[str, int]:
    """A ``TraceLimits`` object of ``limits`` (the codec's form: every field by name)."""
    view: dict[str, int] = codec.unstructure(limits)
    return view


def _result_view(view: AgentView) -> dict[str, Any]:
    result: dict[str, Any] = codec.unstructure(view)
    return result


def failure_view(code: ErrorCode, tool_call_id: str | None) -> dict[str, Any]:
    """The agent-facing ``ResultView`` of a failed call: a code and its fixed message (CIS-ERR-1).

    The kernel's :func:`~invocation_store.kernel.failure_view`, in the codec's form.
    """
    return _result_view(kernel_failure_view(code, tool_call_id))


def success_view(record: CanonicalRecord) -> dict[str, Any]:
    """The agent-facing ``ResultView`` of a READY record: the bounded result only (CIS-BND-4).

    The kernel's :func:`~invocation_store.kernel.agent_view`, in the codec's form.
    """
    return _result_view(agent_view(record))


def outcome_view(record: CanonicalRecord, tool_call_id: str | None) -> dict[str, Any]:
    """The agent-facing view of a terminal record: success if READY, else its code."""
    view = agent_view(record)
    if not view.ok and view.code is not None:
        view = kernel_failure_view(view.code, tool_call_id)
    return _result_view(view)


def citation_view(citation: Citation) -> dict[str, Any]:
    """A ``CitationView`` object; an id that is not a safe id is written ``null`` (CIS-ERR-1)."""
    view: dict[str, Any] = codec.unstructure(citation)
    if not is_safe_id(citation.tool_call_id):
        view["tool_call_id"] = None
    return view


def fact_view(fact: ObservedFact) -> dict[str, Any]:
    """A ``FactView`` object (the codec's form of the fact)."""
    view: dict[str, Any] = codec.unstructure(fact)
    return view


def progress_view(report: ProgressReport) -> dict[str, Any]:
    """A ``ProgressObserved`` object (excluded reasons with a zero count are left out)."""
    view: dict[str, Any] = codec.unstructure(report)
    view["excluded"] = {reason: count for reason, count in view["excluded"].items() if count}
    return view
