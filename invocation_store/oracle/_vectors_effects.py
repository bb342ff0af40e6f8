"""Effect and visibility vectors: what a store applies and what a reader may see (CIS-SPEC-3).

Theory of operation
-------------------
:mod:`._vectors` and :mod:`._vectors_rules` pin the lifecycle table and the numbers
of each rule. This module pins the kernel's *effects* and *visibility* rules
(:mod:`invocation_store.kernel._effects`, ``_views``, ``_lifetime``), the answers a
store, a boundary or a reader of another implementation must give alike:

- ``completion`` (``effects.json``): every effect of one completion: the record
  written, the run's new usage (or none), the bytes charged, and whether the id
  joins the completed-call list (CIS-STORE-3, CIS-RUN-6, CIS-PROG-2);
- ``liveness``: ``now < expires_at_ms`` at ``expires_at - 1`` and ``expires_at``,
  and the remaining time ``expires_at_ms - now`` (CIS-TTL-4);
- ``lifetime``: whether a stored key's reported remaining lifetime is intact
  (CIS-DUR-7);
- ``own_create``: whether a same-token replay is the caller's own retried create
  (CIS-RETRY-2);
- ``sweep``: which records a stale sweep offers the SweptStale event (CIS-LIFE-7);
- ``agent_view`` / ``failure_view``: what the agent sees of a record or a refusal
  (CIS-BND-4, CIS-ERR-1);
- ``well_formed_view``: whether a progress read's view is well formed (CIS-PERF-3,
  CIS-STORE-6).

Every expected outcome is computed by the kernel; the recipes only choose inputs,
on both sides of every boundary.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from attrs import evolve, frozen

from ..kernel import (
    AdmissionRequest,
    AgentView,
    CanonicalRecord,
    ErrorCode,
    EvidenceStatus,
    Failed,
    InvocationStatus,
    ProgressView,
    RawReceived,
    RunState,
    agent_view,
    decide_completion,
    failure_view,
    is_live,
    is_own_create,
    is_well_formed_view,
    lifetime_is_intact,
    live,
    remaining_ms,
    sweep_candidates,
    without_raw,
)
from ._vectors import (
    _CALL,
    _NOW,
    _RUN,
    _document,
    _run,
    record_from_json,
    record_json,
    run_from_json,
    run_json,
    run_vector,
)
from ._vectors_rules import _awaiting_raw, _done, _projection, _step, _well_formed_cases

__all__ = ["EFFECT_RUNNERS", "effect_documents"]


# ---------------------------------------------------------------------------
# Outcomes (what a vector expects, computed by the kernel)


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


@frozen
class _Expiring:
    expires_at_ms: int


def liveness_outcome(vector: dict[str, Any]) -> dict[str, Any]:
    """``{"live": now < expires_at_ms, "remaining_ms": expires_at_ms - now or null}`` (CIS-TTL-4).

    The kernel spells the one expiry rule three ways (``is_live``, ``live``,
    ``remaining_ms``); all three are asked, and a disagreement is a kernel fault.
    """
    value = vector["value"]
    subject = None if value is None else _Expiring(value["expires_at_ms"])
    now = vector["now_ms"]
    answer = is_live(subject, now)
    if (live(subject, now) is not None) != answer:
        raise AssertionError("live() and is_live() disagree")
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
    return ProgressView(
        run_id=obj["run_id"],
        tool_call_id=obj["tool_call_id"],
        tool_name=obj["tool_name"],
        sequence=obj["sequence"],
        status=InvocationStatus(obj["status"]),
        evidence_status=None if evidence is None else EvidenceStatus(evidence),
        agent_result=obj["agent_result"],
        scope=obj["scope"],
        expires_at_ms=obj["expires_at_ms"],
    )


def read_view_outcome(vector: dict[str, Any]) -> dict[str, Any]:
    """The record a read returns, with or without the raw response (CIS-PROG-5, kernel ``without_raw``)."""
    record = record_from_json(vector["record"])
    assert record is not None
    return {"record": record_json(record if vector["include_raw"] else without_raw(record))}


def well_formed_view_outcome(vector: dict[str, Any]) -> dict[str, Any]:
    """Whether a progress read's view of a record is well formed (CIS-PERF-3, CIS-STORE-6)."""
    return {"well_formed": is_well_formed_view(_progress_view_from_json(vector["view"]))}


#: Runners of the vector kinds this module adds (``run_vector`` dispatches to them).
EFFECT_RUNNERS: Final[dict[str, Callable[[dict[str, Any]], dict[str, Any]]]] = {
    "completion": completion_outcome,
    "liveness": liveness_outcome,
    "lifetime": lifetime_outcome,
    "own_create": own_create_outcome,
    "sweep": sweep_outcome,
    "agent_view": agent_view_outcome,
    "failure_view": failure_view_outcome,
    "well_formed_view": well_formed_view_outcome,
    "read_view": read_view_outcome,
}


def _read_view_vectors() -> list[dict[str, Any]]:
    holding = _step(_awaiting_raw(), RawReceived(raw_response="RAW 1", now_ms=_NOW + 1))
    cases = [
        ("with-raw", "raw asked for: the record as stored", holding, True),
        ("without-raw", "raw left out: raw_response is null, every other field as stored", holding, False),
        ("none-stored", "no raw response stored: the record as stored either way", _awaiting_raw(), False),
    ]
    return [
        _vector(
            "read_view",
            label,
            ["CIS-PROG-5", "CIS-REC-3"],
            description,
            record=record_json(record),
            include_raw=include_raw,
        )
        for label, description, record, include_raw in cases
    ]


# ---------------------------------------------------------------------------
# Documents


def _vector(
    kind: str, label: str, requirements: list[str], description: str, **inputs: Any
) -> dict[str, Any]:
    vector: dict[str, Any] = {
        "id": f"{kind.replace('_', '-')}/{label}",
        "kind": kind,
        "requirements": requirements,
        "description": description,
        **inputs,
    }
    vector["expect"] = run_vector(vector)
    return vector


def _completion_vectors() -> list[dict[str, Any]]:
    before = _awaiting_raw()
    with_raw = _step(before, RawReceived(raw_response="RAW", now_ms=_NOW + 5))
    ready = _step(with_raw, _projection("EVIDENCE_FOUND", "found", "web", _NOW + 6))
    failed = _step(with_raw, Failed(code=ErrorCode.PROJECTION_FAILED, now_ms=_NOW + 6))
    dropped = _step(before, RawReceived(raw_response="r" * 65, now_ms=_NOW + 6))
    run = _run(tool_calls_used=1, bytes_used=9)
    reqs = ["CIS-STORE-3", "CIS-RUN-6", "CIS-PROG-2"]

    def add(
        label: str,
        description: str,
        stored: CanonicalRecord | None,
        after: CanonicalRecord,
        *,
        run: RunState | None = run,
        now: int = _NOW + 20,
        start: CanonicalRecord = before,
    ) -> dict[str, Any]:
        return _vector(
            "completion",
            label,
            reqs,
            description,
            stored=record_json(stored),
            before=record_json(start),
            after=record_json(after),
            run=run_json(run),
            now_ms=now,
        )

    return [
        add(
            "ready",
            "WRITE READY: charge raw 3 + content 5 + scope 3 = 11; the id joins the list",
            before,
            ready,
        ),
        add(
            "error", "WRITE ERROR keeping the raw: charge 3; a terminal record joins the list", before, failed
        ),
        add(
            "raw-dropped",
            "WRITE ERROR/RESULT_TOO_LARGE with no raw: record_bytes unchanged, charge max(0, 0) = 0; joins",
            before,
            dropped,
        ),
        add(
            "raw-received",
            "WRITE the raw response (still PROJECTING): charge 3, not terminal, does not join the list",
            before,
            with_raw,
        ),
        add(
            "smaller-after",
            "an `after` smaller than `before`: the charge is max(0, negative) = 0, never a refund",
            with_raw,
            evolve(failed, raw_response="RA"),
            start=with_raw,
        ),
        add("replay", "REPLAY: the stored record, no run write, charge 0, no append", ready, ready),
        add(
            "no-run",
            "no run state: WRITE the record only: no run write, charge 0, no append (no list to join)",
            before,
            ready,
            run=None,
        ),
        add(
            "other-run",
            "the run state read belongs to another run: no charge, no append",
            before,
            ready,
            run=evolve(run, run_id="run-2"),
        ),
        add(
            "run-last-ms",
            "now = run.expires_at_ms - 1: the run is live, charged, the id joins",
            evolve(before, expires_at_ms=run.expires_at_ms + 10),
            evolve(ready, expires_at_ms=run.expires_at_ms + 10),
            now=run.expires_at_ms - 1,
            start=evolve(before, expires_at_ms=run.expires_at_ms + 10),
        ),
        add(
            "run-expired",
            "now = run.expires_at_ms: the run lapsed with its lists: WRITE, no charge, no append",
            evolve(before, expires_at_ms=run.expires_at_ms + 10),
            evolve(ready, expires_at_ms=run.expires_at_ms + 10),
            now=run.expires_at_ms,
            start=evolve(before, expires_at_ms=run.expires_at_ms + 10),
        ),
        add("absent", "nothing stored: INVALID_TRANSITION", None, ready),
    ]


def _liveness_vectors() -> list[dict[str, Any]]:
    expiry = _NOW + 100
    cases = [
        ("absent", "nothing stored: not live", None, _NOW),
        ("young", "now = expires_at - 2: live, 2 ms left", expiry, expiry - 2),
        ("last-ms", "now = expires_at - 1: live, 1 ms left", expiry, expiry - 1),
        ("at-expiry", "now = expires_at: expired (absent), nothing left", expiry, expiry),
        ("after-expiry", "now = expires_at + 1: expired", expiry, expiry + 1),
    ]
    return [
        _vector(
            "liveness",
            label,
            ["CIS-TTL-4", "CIS-TTL-5"],
            description,
            value=None if value is None else {"expires_at_ms": value},
            now_ms=now,
        )
        for label, description, value, now in cases
    ]


def _lifetime_vectors() -> list[dict[str, Any]]:
    cases: list[tuple[str, str, Any]] = [
        ("no-expiry", "no expiry (Redis PTTL -1): corrupt", None),
        ("one-ms", "1 ms left: intact", 1),
        ("lapsed", "0 ms left: lapsed, not corrupt", 0),
        ("negative", "a negative remaining time: lapsed, not corrupt", -5),
        ("boolean", "true is not a time: invalid input", True),
        ("text", "a text is not a time: invalid input", "5"),
    ]
    return [
        _vector("lifetime", label, ["CIS-DUR-7"], description, remaining_ms=value)
        for label, description, value in cases
    ]


def _own_create_vectors() -> list[dict[str, Any]]:
    record = _awaiting_raw()
    request = {
        "run_id": record.run_id,
        "tool_call_id": record.tool_call_id,
        "tool_name": record.tool_name,
        "request_json": record.request_json,
        "invocation_token": record.invocation_token,
    }
    cases: list[tuple[str, str, CanonicalRecord, dict[str, Any]]] = [
        ("own", "the PROJECTING record this request creates", record, request),
        (
            "raw-received",
            "the record has its raw response: it moved on",
            evolve(record, raw_response=""),
            request,
        ),
        (
            "terminal",
            "the record is ERROR",
            _step(record, Failed(code=ErrorCode.EXECUTION_FAILED, now_ms=_NOW + 1)),
            request,
        ),
        ("other-token", "another token", record, {**request, "invocation_token": "tok-2"}),
        ("other-run", "another run id", record, {**request, "run_id": "run-2"}),
        ("other-call", "another tool_call_id", record, {**request, "tool_call_id": "call_2"}),
        ("other-tool", "another tool name", record, {**request, "tool_name": "fetch"}),
        ("other-request", "another request text", record, {**request, "request_json": '{"q":"y"}'}),
        (
            "created-later",
            "created after not_before_ms: the store stamped it later than the caller's reading",
            evolve(record, created_at_ms=record.created_at_ms + 1, updated_at_ms=record.created_at_ms + 1),
            request,
        ),
        (
            "created-earlier",
            "created before not_before_ms: an earlier call that reused the token",
            evolve(record, created_at_ms=record.created_at_ms - 1),
            request,
        ),
    ]
    return [
        _vector(
            "own_create",
            label,
            ["CIS-RETRY-2"],
            description,
            record=record_json(rec),
            request=req,
            not_before_ms=record.created_at_ms,
        )
        for label, description, rec, req in cases
    ]


def _sweep_vectors() -> list[dict[str, Any]]:
    projecting = _awaiting_raw()
    expiry = projecting.expires_at_ms
    with_raw = _step(projecting, RawReceived(raw_response="RAW", now_ms=_NOW + 1))
    records = [
        None,
        projecting,
        evolve(projecting, run_id="run-2"),
        _done(_CALL),
        with_raw,
        _step(projecting, Failed(code=ErrorCode.EXECUTION_FAILED, now_ms=_NOW + 1)),
    ]
    reqs = ["CIS-LIFE-7"]
    return [
        _vector(
            "sweep",
            "mixed",
            reqs,
            "absent, own PROJECTING, another run's PROJECTING, READY, PROJECTING with raw, ERROR: "
            "only the live PROJECTING records of the run, in order",
            records=[record_json(record) for record in records],
            run_id=_RUN,
            now_ms=_NOW + 50,
        ),
        _vector(
            "sweep",
            "last-ms",
            reqs,
            "now = expires_at - 1: the record is live, a candidate",
            records=[record_json(projecting)],
            run_id=_RUN,
            now_ms=expiry - 1,
        ),
        _vector(
            "sweep",
            "at-expiry",
            reqs,
            "now = expires_at: the record is absent, not a candidate",
            records=[record_json(projecting)],
            run_id=_RUN,
            now_ms=expiry,
        ),
    ]


def _view_vectors() -> list[dict[str, Any]]:
    projecting = _awaiting_raw()
    found = _done(_CALL)
    negative = _done(_CALL, "", "kb", negative=True)
    error = _step(projecting, Failed(code=ErrorCode.EXECUTION_FAILED, now_ms=_NOW + 1))
    durability = _step(projecting, Failed(code=ErrorCode.DURABILITY_NOT_REACHED, now_ms=_NOW + 1))
    records = [
        ("found", "READY + EVIDENCE_FOUND: the bounded result", found),
        ("negative", "READY + NO_EVIDENCE: a negative observation, with its scope", negative),
        ("error", "ERROR: its code and fixed message, no result", error),
        ("durability", "ERROR/DURABILITY_NOT_REACHED: the create was not acknowledged durably", durability),
        (
            "ready-evidence-error",
            "READY with evidence ERROR (no transition makes it): a failure, INVALID_TRANSITION",
            evolve(found, evidence_status=EvidenceStatus.ERROR),
        ),
        ("projecting", "PROJECTING (not terminal): a failure, INVALID_TRANSITION", projecting),
    ]
    vectors = [
        _vector("agent_view", label, ["CIS-BND-4", "CIS-ERR-1"], description, record=record_json(record))
        for label, description, record in records
    ]
    ids: list[tuple[str, str, Any]] = [
        ("safe-id", "a safe id is echoed", _CALL),
        ("unsafe-id", "an unsafe id is never echoed: null", "call 1"),
        ("empty-id", "an empty id: null", ""),
        ("null-id", "no id: null", None),
        ("number-id", "a number is not an id: null", 5),
    ]
    vectors += [
        _vector(
            "failure_view",
            label,
            ["CIS-ERR-1"],
            description,
            code=ErrorCode.DUPLICATE_TOOL_CALL.value,
            tool_call_id=tool_call_id,
        )
        for label, description, tool_call_id in ids
    ]
    vectors.append(
        _vector(
            "failure_view",
            "durability",
            ["CIS-ERR-1", "CIS-DUR-2"],
            "DURABILITY_NOT_REACHED with its fixed message",
            code=ErrorCode.DURABILITY_NOT_REACHED.value,
            tool_call_id=_CALL,
        )
    )
    return vectors


#: Well-formedness cases about fields a progress view does not hold (error code, creation time).
_NOT_IN_A_VIEW: Final = frozenset(
    {"projecting-code", "ready-code", "error-no-code", "expiry-at-creation", "expiry-after-creation"}
)


def _well_formed_view_vectors() -> list[dict[str, Any]]:
    vectors = []
    for label, description, record in _well_formed_cases():
        if label in _NOT_IN_A_VIEW:
            continue
        view = ProgressView.of(record)
        vectors.append(
            _vector(
                "well_formed_view",
                label,
                ["CIS-PERF-3", "CIS-STORE-6"],
                description,
                view={name: getattr(view, name) for name in ProgressView._fields},
            )
        )
    return vectors


def effect_documents() -> dict[str, dict[str, Any]]:
    """The effect and visibility documents by file name, built from the kernel."""
    return {
        "effects.json": _document(
            "Store effects and visibility, one kernel answer each: `completion` (every write of one "
            "completion: the record, the run's new usage or null, the bytes charged "
            "max(0, record_bytes(after) - record_bytes(before)), whether the id joins the "
            "completed-call list), `liveness` (live iff now < expires_at_ms; remaining "
            "expires_at_ms - now), `lifetime` (a stored key without expiry is corrupt), "
            "`own_create` (a same-token replay is the caller's own create), `sweep` (the "
            "positions of the records a sweep offers SweptStale).",
            [
                "CIS-STORE-3",
                "CIS-RUN-6",
                "CIS-PROG-2",
                "CIS-TTL-4",
                "CIS-DUR-7",
                "CIS-RETRY-2",
                "CIS-LIFE-7",
                "CIS-SPEC-3",
            ],
            {
                "vectors": [
                    *_completion_vectors(),
                    *_liveness_vectors(),
                    *_lifetime_vectors(),
                    *_own_create_vectors(),
                    *_sweep_vectors(),
                ]
            },
        ),
        "views.json": _document(
            "What a reader may see: `agent_view` (the agent's view of a terminal record), "
            "`failure_view` (of a refusal: code, fixed message, the id only if safe) and "
            "`well_formed_view` (whether a progress read's nine-field view is well formed).",
            ["CIS-BND-4", "CIS-ERR-1", "CIS-PERF-3", "CIS-STORE-6", "CIS-SPEC-3"],
            {"vectors": [*_view_vectors(), *_well_formed_view_vectors(), *_read_view_vectors()]},
        ),
    }
