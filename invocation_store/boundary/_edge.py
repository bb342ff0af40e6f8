"""The boundary's edge: what comes in is copied to exact values once (CIS-ID-4..6, CIS-SIZE-4).

A ``str`` subclass can override ``__eq__``, ``__hash__``, ``__len__`` or
``isascii`` and be one string when checked and another when keyed, compared or
measured. Every text the boundary is given (envelope and projection fields, run
ids, cited ids, raw responses) passes :func:`exact_text` before any check; envelopes
and projections are rebuilt from fields read once (:func:`exact_envelope`,
:func:`exact_projection`). The caller's other inputs are checked here too: the run
context (:func:`check_context`) and integer parameters (:func:`check_run_parameters`,
:func:`check_older_than`), whose violations are programming errors (``TypeError``,
``ValueError``). :func:`raw_text` turns an executor's return value into the raw
response text and :func:`copy_json` gives the projector its own copy of the parsed
arguments (CIS-PERF-2).
"""

from __future__ import annotations

import json
from typing import Any

from .._runners import type_name
from ..kernel import MAX_SAFE_INT, ErrorCode, EvidenceStatus, Projection, RunContext, ToolCallEnvelope
from ..kernel import check_run_parameters as kernel_check_run_parameters

__all__ = [
    "check_context",
    "check_older_than",
    "check_run_parameters",
    "copy_json",
    "exact_envelope",
    "exact_projection",
    "exact_text",
    "is_int_in",
    "raw_text",
]


def exact_text(value: object) -> Any:
    """The boundary's edge for text (CIS-ID-4..6, CIS-SIZE-4).

    An exact ``str`` is returned as is; a ``str`` subclass is copied to an exact
    ``str`` of its real characters (``str.__str__`` cannot be intercepted by the
    subclass); an object that is no ``str`` but claims to be one (``__class__``)
    becomes ``None`` (missing text); anything else is returned unchanged for the
    kernel to refuse with its code. Typed ``Any``: the result goes into fields
    the kernel checks totally.
    """
    cls = type(value)
    if cls is str:
        return value
    if issubclass(cls, str):
        return str.__str__(value)
    return None if isinstance(value, str) else value


def raw_text(value: object) -> str | None:
    """Normalise an executor's return value to text; None if it cannot be (CIS-FAIL-4).

    A ``str`` is kept as is (a subclass is copied to a plain ``str``); anything else
    is serialized once as compact, key-sorted JSON without NaN/Infinity.
    """
    if issubclass(type(value), str):
        text: str = exact_text(value)
        return text
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except Exception:  # noqa: BLE001 - any failure to serialize is SERIALIZATION_FAILED
        return None


def check_context(context: object) -> RunContext:
    """The context as an exact RunContext holding an exact ``str`` run id.

    Raises ``TypeError`` for a non-RunContext (for an :class:`ErrorCode`, the refusal
    ``open_run`` returned, the message names the code: the run did not open) and
    ``ValueError`` (RunContext's own check) if a subclass or a mutated context holds an
    unsafe run id.
    """
    if not isinstance(context, RunContext):
        if isinstance(context, ErrorCode):
            raise TypeError(
                f"context must be a RunContext; got ErrorCode.{context.name}: open_run refused the run "
                "(check its result before invoking; the boundary's log says why)"
            )
        raise TypeError(f"context must be a RunContext; got {type_name(context)}")
    run_id = context.run_id
    if type(context) is RunContext and type(run_id) is str:
        return context
    return RunContext(run_id=exact_text(run_id))


def exact_envelope(envelope: ToolCallEnvelope) -> ToolCallEnvelope:
    """The envelope rebuilt from its fields, each read once and copied to exact text
    (see the module docstring). An exact ToolCallEnvelope (frozen, no subclass
    properties) whose fields are all exact ``str`` already is that copy."""
    if (
        type(envelope) is ToolCallEnvelope
        and type(envelope.run_id) is str
        and type(envelope.tool_call_id) is str
        and type(envelope.tool_name) is str
        and type(envelope.arguments) is str
    ):
        return envelope
    return ToolCallEnvelope(
        run_id=exact_text(envelope.run_id),
        tool_call_id=exact_text(envelope.tool_call_id),
        tool_name=exact_text(envelope.tool_name),
        arguments=exact_text(envelope.arguments),
    )


def exact_projection(projection: Projection) -> Projection:
    """The projection rebuilt from its fields, each read once and copied to exact text.
    An exact Projection (frozen, no subclass properties) whose fields are exact ``str``
    (or the kernel's own EvidenceStatus) already is that copy."""
    if (
        type(projection) is Projection
        and type(projection.content) is str
        and type(projection.scope) is str
        and type(projection.evidence_status) in (str, EvidenceStatus)
    ):
        return projection
    return Projection(
        evidence_status=exact_text(projection.evidence_status),
        content=exact_text(projection.content),
        scope=exact_text(projection.scope),
    )


def copy_json(value: Any) -> Any:
    """An independent copy of a parsed JSON value (CIS-PERF-2).

    Objects and arrays are copied, recursively; strings, numbers, booleans and
    ``None`` are immutable and shared. Several times cheaper than parsing the text
    again or ``copy.deepcopy`` (``benchmarks/bench_invocation.py`` measures it).
    The value must come from a parse bounded in depth (kernel ``parse_arguments``).
    """
    kind = type(value)
    if kind is dict:
        return {key: copy_json(item) for key, item in value.items()}
    if kind is list:
        return [copy_json(item) for item in value]
    return value


def is_int_in(value: object, minimum: int) -> bool:
    """``value`` is a non-bool int in ``[minimum, MAX_SAFE_INT]`` (exact in every store)."""
    return not isinstance(value, bool) and isinstance(value, int) and minimum <= value <= MAX_SAFE_INT


def check_older_than(older_than_ms: object) -> None:
    """Raise ``ValueError`` unless ``older_than_ms`` is an int in ``[0, 2**53 - 1]`` (CIS-LIFE-7)."""
    if not is_int_in(older_than_ms, 0):
        raise ValueError("older_than_ms must be an int in [0, 2**53 - 1] (milliseconds)")


def check_run_parameters(
    deadline_ms: object, ttl_ms: object, tool_call_budget: object, byte_budget: object
) -> None:
    """``ValueError`` unless each parameter is in range (kernel ``check_run_parameters``, CIS-RUN-1)."""
    kernel_check_run_parameters(
        deadline_ms=deadline_ms, ttl_ms=ttl_ms, tool_call_budget=tool_call_budget, byte_budget=byte_budget
    )
