"""How a vector is run: one kernel call per vector kind, shaped like its ``expect`` (CIS-SPEC-3).

Theory of operation
-------------------
:func:`run_vector` decodes one vector's inputs from JSON, hands them to the kernel
function its ``kind`` names and returns the kernel's answer in the vector's
``expect`` form (``spec/vectors/README.md`` lists every kind). The generators
compute every ``expect`` through it (:func:`vector`), so what the files say is
exactly what this kernel answers, and the stdio adapter
(:mod:`.vector_adapter`) answers the runner with it. A kernel ``ValueError`` or
``TypeError`` (a caller error, CIS-KERN-2) is the outcome ``{"invalid_input":
true}``. Inputs a vector calls hostile (an envelope, a policy) are passed to the
kernel as given, never structured strictly, so that the kernel judges them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from attrs import frozen

from ..adapters._redis_keys import call_key, done_key, run_key
from ..kernel import (
    AdmissionRequest,
    AgentView,
    Begin,
    ErrorCode,
    EvidenceStatus,
    Failed,
    InvocationStatus,
    ProgressView,
    Projection,
    ProjectionReceived,
    RawReceived,
    RunContext,
    RunState,
    SweptStale,
    ToolCallEnvelope,
    ToolPolicy,
    admit,
    agent_view,
    cancel_run,
    check_arguments,
    cite,
    close_run,
    decide_completion,
    failure_view,
    is_live,
    is_own_create,
    is_well_formed,
    is_well_formed_run,
    is_well_formed_view,
    lapsed,
    lifetime_is_intact,
    live,
    open_run,
    preflight,
    project_progress,
    remaining_ms,
    sweep_candidates,
    transition,
    without_raw,
)
from ._vectors_fixtures import (
    limits_from_json,
    record_from_json,
    record_json,
    run_from_json,
    run_json,
)
from ._views import progress_view

__all__ = ["INVALID_INPUT", "RUNNERS", "UnknownKindError", "preflight_outcome", "run_vector", "vector"]


class UnknownKindError(LookupError):
    """A vector of a kind this runner does not know."""


#: The outcome of a vector whose input the kernel refuses as a caller's error (an
#: exception, not a domain code): a negative TTL, a budget over 2**53 - 1, a
#: completion that changes the record's identity. CIS-KERN-2.
INVALID_INPUT: Final = {"invalid_input": True}


_EVENT_CLASSES: Final[dict[str, type[Any]]] = {
    cls.__name__: cls for cls in (Begin, RawReceived, ProjectionReceived, Failed, SweptStale)
}
#: The members of a projection's JSON form: exactly these, each any JSON value.
PROJECTION_MEMBERS: Final = frozenset({"evidence_status", "content", "scope"})


def projection_from_json(value: Any) -> Any:
    """A :class:`Projection` of an object with exactly :data:`PROJECTION_MEMBERS`, else ``value`` itself.

    A projector's answer is judged by the kernel whatever it holds (CIS-EVID-2): the
    members' values are passed as they are, and anything that is not such an object (a
    text, null, an object missing a member or with another one) is passed on as what
    it is, which the kernel answers PROJECTION_INVALID (CIS-EVID-5).
    """
    if isinstance(value, dict) and value.keys() == PROJECTION_MEMBERS:
        return Projection(**value)
    return value


def event_from_vector(obj: dict[str, Any]) -> Any:
    """The kernel event of an ``event`` object, its fields passed as given (the kernel judges them).

    ``type`` names the class; a Failed ``code`` must name an error code. An unknown
    type, a missing or extra member or an unknown code raises ``ValueError`` or
    ``TypeError`` (the outcome ``invalid_input``).
    """
    fields = {name: value for name, value in obj.items() if name != "type"}
    cls = _EVENT_CLASSES.get(obj.get("type"))  # type: ignore[arg-type]
    if cls is None:
        raise ValueError("not an event type")
    if cls is Failed:
        fields["code"] = (
            ErrorCode(fields["code"]) if isinstance(fields.get("code"), str) else fields.get("code")
        )
    if cls is ProjectionReceived and "projection" in fields:
        fields["projection"] = projection_from_json(fields["projection"])
    return cls(**fields)


def transition_outcome(vector: dict[str, Any]) -> dict[str, Any]:
    """``transition`` kind: the new record, or the code (the record then unchanged)."""
    result = transition(
        record_from_json(vector["before"]),
        event_from_vector(vector["event"]),
        limits_from_json(vector["limits"]),
    )
    if isinstance(result, ErrorCode):
        return {"code": result.value}
    return {"record": record_json(result)}


def run_outcome(vector: dict[str, Any]) -> dict[str, Any]:
    """``run`` kind: open, cancel or close ``before`` at ``now_ms``."""
    before = run_from_json(vector["before"])
    operation: Callable[..., RunState | ErrorCode]
    if vector["operation"] == "open":
        run = open_run(before, now_ms=vector["now_ms"], **vector["parameters"])
    else:
        operation = cancel_run if vector["operation"] == "cancel" else close_run
        run = operation(before, vector["now_ms"])
    return {"code": run.value} if isinstance(run, ErrorCode) else {"run": run_json(run)}


def preflight_outcome(inputs: dict[str, Any]) -> dict[str, Any]:
    """The whole preflight of a ``preflight`` vector, shaped like its ``expect`` (CIS-PRE-2, CIS-PRE-5).

    ``{"code": <code>}`` for a refusal; for an admission ``{"code": null, "replayed":
    bool, "run": <run after>, "record": <the PROJECTING record>}`` (a replay returns
    the stored record and the run unchanged, CIS-RETRY-2).
    """
    # An envelope is hostile input that preflight judges whatever its fields hold:
    # it is passed to the kernel as given, not structured strictly.
    envelope = ToolCallEnvelope(**inputs["envelope"])
    policy = inputs["policy"]
    context = RunContext(run_id=inputs["context_run_id"])
    # So is the policy: its flags are judged by the kernel (only the boolean true
    # passes), never coerced by a decoder.
    tool_policy = None if policy is None else ToolPolicy(**policy)
    limits = limits_from_json(inputs["limits"])
    run = run_from_json(inputs["run"])
    existing = record_from_json(inputs["existing"])
    now = inputs["now_ms"]
    token = inputs["token"]
    code = preflight(
        context, envelope, tool_policy, limits, run=run, existing=existing, now_ms=now, invocation_token=token
    )
    if code is not None:
        return {"code": code.value}
    assert isinstance(envelope.tool_call_id, str)
    assert isinstance(envelope.tool_name, str)
    assert isinstance(envelope.arguments, str)
    admission = admit(
        run,
        existing,
        AdmissionRequest(
            run_id=context.run_id,
            tool_call_id=envelope.tool_call_id,
            tool_name=envelope.tool_name,
            request_json=envelope.arguments,
            invocation_token=token,
        ),
        limits,
        now,
    )
    if isinstance(admission, ErrorCode):  # preflight() and admit() disagree: a kernel bug
        raise AssertionError(f"preflight admitted what admit refuses: {admission.value}")
    return {
        "code": None,
        "replayed": admission.replayed,
        "append_call": admission.append_call,
        "run": run_json(admission.run),
        "record": record_json(admission.record),
    }


def arguments_outcome(vector: dict[str, Any]) -> dict[str, Any]:
    """The I-JSON check alone (CIS-JSON-1..6): ``{"code": null | "INVALID_ARGUMENTS"}``."""
    code = check_arguments(vector["text"], vector["max_json_depth"])
    return {"code": None if code is None else code.value}


def complete_outcome(vector: dict[str, Any]) -> dict[str, Any]:
    """The compare-and-set of a ``complete`` vector and the run after its byte charge."""
    before = record_from_json(vector["before"])
    after = record_from_json(vector["after"])
    assert before is not None
    assert after is not None
    run = run_from_json(vector["run"])
    effect = decide_completion(record_from_json(vector["stored"]), before, after, run, vector["now_ms"])
    if isinstance(effect, ErrorCode):
        return {"code": effect.value}
    return {"decision": effect.action.value, "run": run_json(run if effect.run is None else effect.run)}


def completion_outcome(vector: dict[str, Any]) -> dict[str, Any]:
    """Every effect of a ``completion`` vector, or its code (CIS-STORE-3, CIS-RUN-6, CIS-PROG-2)."""
    before = record_from_json(vector["before"])
    after = record_from_json(vector["after"])
    assert before is not None
    assert after is not None
    effect = decide_completion(
        record_from_json(vector["stored"]), before, after, run_from_json(vector["run"]), vector["now_ms"]
    )
    if isinstance(effect, ErrorCode):
        return {"code": effect.value}
    return {
        "action": effect.action.value,
        "record": record_json(effect.record),
        "run": run_json(effect.run),
        "charge_bytes": effect.charge_bytes,
        "append_done": effect.append_done,
    }


def cite_outcome(vector: dict[str, Any]) -> dict[str, Any]:
    """The citation of a ``cite`` vector."""
    citation = cite(
        vector["run_id"], vector["tool_call_id"], record_from_json(vector["record"]), vector["now_ms"]
    )
    # The kernel's answer as it is, not the trace view (which maps any unsafe echo to null).
    return {
        "citation": {
            "kind": citation.kind.value,
            "tool_call_id": citation.tool_call_id,
            "content": citation.content,
            "scope": citation.scope,
            "reason": None if citation.reason is None else citation.reason.value,
        }
    }


def progress_outcome(vector: dict[str, Any]) -> dict[str, Any]:
    """The progress report of a ``progress`` vector."""
    records = {key: record_from_json(value) for key, value in vector["records"].items()}
    report = project_progress(
        vector["run_id"], vector["identities"], records, vector["now_ms"], limits_from_json(vector["limits"])
    )
    return progress_view(report)


def well_formed_outcome(vector: dict[str, Any]) -> dict[str, Any]:
    """Whether a stored record is well formed (CIS-LIFE-5, CIS-STORE-6)."""
    record = record_from_json(vector["record"])
    assert record is not None
    return {"well_formed": is_well_formed(record)}


def keys_outcome(vector: dict[str, Any]) -> dict[str, Any]:
    """The store keys of a run and a call (CIS-KEY-1); an unsafe part is invalid input."""
    prefix, run_id, tool_call_id = vector["prefix"], vector["run_id"], vector["tool_call_id"]
    return {
        "run_key": run_key(prefix, run_id),
        "done_key": done_key(prefix, run_id),
        "call_key": call_key(prefix, run_id, tool_call_id),
    }


@frozen
class _Expiring:
    expires_at_ms: int


def liveness_outcome(vector: dict[str, Any]) -> dict[str, Any]:
    """``{"live": now < expires_at_ms, "remaining_ms": expires_at_ms - now or null}`` (CIS-TTL-4).

    The kernel spells the one expiry rule four ways (``is_live``, ``live``,
    ``remaining_ms``, and ``lapsed`` for a stored value, CIS-TTL-4's deletion rule); all
    are asked, and a disagreement is a kernel fault.
    """
    value = vector["value"]
    subject = None if value is None else _Expiring(value["expires_at_ms"])
    now = vector["now_ms"]
    answer = is_live(subject, now)
    if (live(subject, now) is not None) != answer:
        raise AssertionError("live() and is_live() disagree")
    if subject is not None and lapsed(subject, now) == answer:
        raise AssertionError("lapsed() is not the negation of is_live()")
    return {"live": answer, "remaining_ms": remaining_ms(subject, now)}


def lifetime_outcome(vector: dict[str, Any]) -> dict[str, Any]:
    """Whether a stored key's remaining lifetime (``null``: no expiry) is intact (CIS-DUR-7)."""
    return {"intact": lifetime_is_intact(vector["remaining_ms"])}


def own_create_outcome(vector: dict[str, Any]) -> dict[str, Any]:
    """Whether ``record`` is exactly the PROJECTING record ``request`` creates (CIS-RETRY-2)."""
    record = record_from_json(vector["record"])
    assert record is not None
    return {
        "own_create": is_own_create(record, AdmissionRequest(**vector["request"]), vector["not_before_ms"])
    }


def sweep_outcome(vector: dict[str, Any]) -> dict[str, Any]:
    """The positions in ``records`` of the records a sweep offers SweptStale (CIS-LIFE-7)."""
    records = [record_from_json(record) for record in vector["records"]]
    chosen = {id(record) for record in sweep_candidates(records, vector["run_id"], vector["now_ms"])}
    return {"candidates": [index for index, record in enumerate(records) if id(record) in chosen]}


def _view_json(view: AgentView) -> dict[str, Any]:
    return {
        "ok": view.ok,
        "tool_call_id": view.tool_call_id,
        "code": None if view.code is None else view.code.value,
        "message": view.message,
        "evidence_status": None if view.evidence_status is None else view.evidence_status.value,
        "content": view.content,
        "scope": view.scope,
        "negative": view.negative,
    }


def agent_view_outcome(vector: dict[str, Any]) -> dict[str, Any]:
    """The agent's view of a terminal record (CIS-BND-4)."""
    record = record_from_json(vector["record"])
    assert record is not None
    return {"view": _view_json(agent_view(record))}


def failure_view_outcome(vector: dict[str, Any]) -> dict[str, Any]:
    """The agent's view of a refusal: the code, its message, the id only if safe (CIS-ERR-1)."""
    return {"view": _view_json(failure_view(ErrorCode(vector["code"]), vector["tool_call_id"]))}


def _progress_view_from_json(obj: dict[str, Any]) -> ProgressView:
    evidence = obj["evidence_status"]
    values = {name: obj[name] for name in ProgressView._fields}
    values["status"] = InvocationStatus(obj["status"])
    values["evidence_status"] = None if evidence is None else EvidenceStatus(evidence)
    return ProgressView(**values)


def read_view_outcome(vector: dict[str, Any]) -> dict[str, Any]:
    """The record a read returns, with or without the raw response (CIS-PROG-5, kernel ``without_raw``)."""
    record = record_from_json(vector["record"])
    assert record is not None
    return {"record": record_json(record if vector["include_raw"] else without_raw(record))}


def well_formed_view_outcome(vector: dict[str, Any]) -> dict[str, Any]:
    """Whether a progress read's view of a record is well formed (CIS-PERF-3, CIS-STORE-6)."""
    return {"well_formed": is_well_formed_view(_progress_view_from_json(vector["view"]))}


def well_formed_run_outcome(vector: dict[str, Any]) -> dict[str, Any]:
    """Whether a run state read back is one the kernel's transitions make (CIS-STORE-6)."""
    run = run_from_json(vector["run"])
    assert run is not None
    return {"well_formed": is_well_formed_run(run)}


#: The runner of each vector kind (``spec/vectors/README.md``, section "Kinds").
RUNNERS: Final[dict[str, Callable[[dict[str, Any]], dict[str, Any]]]] = {
    "transition": transition_outcome,
    "run": run_outcome,
    "preflight": preflight_outcome,
    "arguments": arguments_outcome,
    "complete": complete_outcome,
    "completion": completion_outcome,
    "cite": cite_outcome,
    "progress": progress_outcome,
    "well_formed": well_formed_outcome,
    "keys": keys_outcome,
    "liveness": liveness_outcome,
    "lifetime": lifetime_outcome,
    "own_create": own_create_outcome,
    "sweep": sweep_outcome,
    "agent_view": agent_view_outcome,
    "failure_view": failure_view_outcome,
    "well_formed_view": well_formed_view_outcome,
    "well_formed_run": well_formed_run_outcome,
    "read_view": read_view_outcome,
}


def run_vector(vector: dict[str, Any]) -> dict[str, Any]:
    """Replay one vector through the kernel; returns what the kernel gives, shaped like ``expect``.

    A kernel ``ValueError`` or ``TypeError`` (a programming error, CIS-KERN-2) is the
    outcome ``{"invalid_input": true}``; raises :class:`UnknownKindError` for a kind
    it does not know.
    """
    runner = RUNNERS.get(vector["kind"])
    if runner is None:
        raise UnknownKindError(vector["kind"])
    try:
        return runner(vector)
    except (ValueError, TypeError):
        return dict(INVALID_INPUT)


def vector(
    kind: str, vector_id: str, requirements: list[str], description: str, **inputs: Any
) -> dict[str, Any]:
    """A vector of ``kind`` with its ``inputs`` and the ``expect`` this kernel gives for them."""
    made: dict[str, Any] = {
        "id": vector_id,
        "kind": kind,
        "requirements": requirements,
        "description": description,
        **inputs,
    }
    made["expect"] = run_vector(made)
    return made
