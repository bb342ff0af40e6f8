"""Every field of ToolSpec, Limits, records and run states survives the recorder, the codec and the oracle.

Outside the kernel, values are copied with ``attrs.evolve`` or through the one codec,
never rebuilt field by field: a rebuild silently drops a field added later (the
recorder's ToolSpec copy did: ``RecordingBoundary(...).registry.get(name).<new field>``
came back as its default). The probes here are derived from the classes' attrs fields:
each field gets a value other than its default, by its type, so a new field is covered
without editing this file (a field of a type no probe knows fails with its name).
"""

from __future__ import annotations

import collections.abc
import enum
import io
import json
from collections.abc import Callable, Mapping
from typing import Any, get_args, get_origin, get_type_hints

import attrs
import pytest

from invocation_store import codec
from invocation_store.adapters import MemoryStore, _redis_decode, _sql
from invocation_store.adapters._redis_scripts import RUN_FIELDS
from invocation_store.boundary import ToolRegistry, ToolSpec
from invocation_store.history import decode_history, encode_args, encode_result, header_line
from invocation_store.kernel import (
    IDENTITY_FIELDS,
    Admission,
    AdmissionRequest,
    CanonicalRecord,
    ErrorCode,
    Limits,
    Projection,
    RunState,
    is_well_formed,
    is_well_formed_run,
)
from invocation_store.oracle import Oracle, RecordingBoundary, _compare
from invocation_store.oracle._vectors_fixtures import (
    awaiting_raw,
    error_record,
    limits_from_json,
    projecting,
    ready_record,
    record_from_json,
    record_json,
    run_from_json,
    run_json,
    run_state,
)
from invocation_store.oracle._views import limits_view, record_view, run_view
from invocation_store.testing import FakeClock


def _execute(arguments: Mapping[str, Any]) -> object:
    return {"echo": dict(arguments)}


def _project(raw: str, _arguments: Mapping[str, Any]) -> Projection:
    return Projection(evidence_status="EVIDENCE_FOUND", content=raw[:8], scope="probe")


def _probe(name: str, hint: Any, default: Any) -> Any:
    """A value of type ``hint`` other than ``default`` (``attrs.NOTHING``: none)."""
    options = get_args(hint) or (hint,)
    if default is attrs.NOTHING:  # no default (attrs.NOTHING is an enum member itself)
        default = None
    if isinstance(default, enum.Enum):  # before str: a StrEnum is a str
        members = list(type(default))
        return members[-1] if default is not members[-1] else members[0]
    if isinstance(default, bool):
        return not default
    if isinstance(default, int):
        return default + 1
    if isinstance(default, str):
        return default + "_probe"
    for option in options:
        if option is bool:
            return True
        if option is int:
            return 7
        if option is str:
            return f"{name}_probe"
        if isinstance(option, type) and issubclass(option, enum.Enum):
            members = list(option)
            return members[-1] if default is not members[-1] else members[0]
        if option is type(None) and default is not None:
            return None
    callables = [option for option in options if get_origin(option) is collections.abc.Callable]
    if callables:  # an executor takes the arguments, a projector the raw response and the arguments
        return _execute if len(get_args(callables[0])[0]) == 1 else _project
    raise AssertionError(f"no probe for field {name} of type {hint}: extend _probe")


def _fields(cls: type[Any]) -> list[tuple[str, Any, Any]]:
    hints = get_type_hints(cls)
    return [(field.name, hints[field.name], field.default) for field in attrs.fields(cls)]


def _distinct(cls: type[Any], base: Any) -> list[tuple[str, Any]]:
    """For each field: (name, a copy of ``base`` with that field alone changed).

    A run keeps ``expires_at_ms == deadline_ms + ttl_ms`` (stores refuse any other as
    CorruptRun): changing one of the three moves the one it determines too (the
    deadline, for the expiry), so the changed field still differs from ``base``.
    """
    copies = [
        (name, attrs.evolve(base, **{name: _probe(name, hint, getattr(base, name))}))
        for name, hint, _d in _fields(cls)
    ]
    if cls is RunState:
        copies = [(name, _kept_whole(name, run)) for name, run in copies]
        assert all(is_well_formed_run(run) for _name, run in copies)
    return copies


def _kept_whole(name: str, run: RunState) -> RunState:
    if name in ("deadline_ms", "ttl_ms"):
        return attrs.evolve(run, expires_at_ms=run.deadline_ms + run.ttl_ms)
    if name == "expires_at_ms":
        return attrs.evolve(run, deadline_ms=run.expires_at_ms - run.ttl_ms)
    return run


# -- ToolSpec through the recorder -----------------------------------------------------------


def _probe_spec() -> ToolSpec:
    values = {}
    for name, hint, default in _fields(ToolSpec):
        values[name] = _probe(name, hint, default)
    return ToolSpec(**values)


def _recorded(spec: ToolSpec) -> ToolSpec:
    recorder = RecordingBoundary(io.StringIO(), MemoryStore(FakeClock()), ToolRegistry([spec]))
    got = recorder.registry.get(spec.name)
    assert got is not None
    return got


def _differences(original: ToolSpec, copy: ToolSpec) -> list[str]:
    lost = []
    for name, _hint, _default in _fields(ToolSpec):
        mine, theirs = getattr(original, name), getattr(copy, name)
        if callable(mine):
            # The recorder wraps the callables; a wrapper must still run the tool's own.
            probe: Any = {"q": 1} if name == "executor" else ("raw text", {"q": 1})
            same = mine(probe) == theirs(probe) if name == "executor" else mine(*probe) == theirs(*probe)
            if not same:
                lost.append(name)
        elif mine != theirs:
            lost.append(name)
    return lost


def test_every_tool_spec_field_survives_the_recorder() -> None:
    """CIS-ORC-1, CIS-BND-3: the recorder's copy of each registered tool keeps every field of
    ToolSpec (the callables wrapped, still calling the tool's own)."""
    spec = _probe_spec()
    assert all(
        getattr(spec, name) != default
        for name, _h, default in _fields(ToolSpec)
        if default is not attrs.NOTHING
    )
    assert _differences(spec, _recorded(spec)) == []


def test_the_check_sees_a_field_by_field_copy_that_drops_one() -> None:
    """CIS-ORC-1: the comparison above fails on a copy rebuilt from all but one field (as round 2's was)."""
    spec = _probe_spec()
    names = [name for name, _h, _d in _fields(ToolSpec)]
    for dropped in names:
        if attrs.fields_dict(ToolSpec)[dropped].default is attrs.NOTHING:
            continue  # a required field cannot be left out of a rebuild
        rebuilt = ToolSpec(**{name: getattr(spec, name) for name in names if name != dropped})
        assert _differences(spec, rebuilt) == [dropped]


# -- Limits ----------------------------------------------------------------------------------


def _probe_limits() -> Limits:
    return Limits(**{name: _probe(name, hint, default) for name, hint, default in _fields(Limits)})


def _limits_through_the_oracle(limits: Limits) -> Limits:
    sink = io.StringIO()
    RecordingBoundary(sink, MemoryStore(FakeClock()), ToolRegistry(), limits=limits)
    oracle = Oracle()
    assert oracle.feed(1, json.loads(sink.getvalue().splitlines()[0])) is None
    assert oracle.limits is not None
    return oracle.limits


ROUND_TRIPS_LIMITS: dict[str, Callable[[Limits], Limits]] = {
    "codec": lambda limits: codec.limits_from_obj(json.loads(codec.dumps(limits))),
    "vectors": lambda limits: limits_from_json(json.loads(json.dumps(limits_view(limits)))),
    "history header": lambda limits: decode_history([json.dumps(header_line(limits)) + "\n"]).limits,
    "recorder and oracle": _limits_through_the_oracle,
}


@pytest.mark.parametrize("path", sorted(ROUND_TRIPS_LIMITS))
def test_every_limit_survives(path: str) -> None:
    """CIS-SIZE-1, CIS-ORC-1, CIS-HIST-1: each limit, set apart from its default, comes back the same
    through the codec, the vectors' JSON, a history header, and a trace header read by the oracle."""
    probe = _probe_limits()
    assert ROUND_TRIPS_LIMITS[path](probe) == probe
    for name, changed in _distinct(Limits, Limits()):
        assert ROUND_TRIPS_LIMITS[path](changed) == changed, name


# -- records and run states ------------------------------------------------------------------


_RUN = run_state(tool_calls_used=1, bytes_used=9)
_RECORD = ready_record()


def _history_record(record: CanonicalRecord) -> CanonicalRecord:
    """A record through the history format: the answer of a create, encoded and decoded."""
    request = AdmissionRequest(
        run_id=record.run_id,
        tool_call_id=record.tool_call_id,
        tool_name=record.tool_name,
        request_json=record.request_json,
        invocation_token=record.invocation_token,
    )
    args = {
        **{field.name: getattr(request, field.name) for field in attrs.fields(AdmissionRequest)},
        "now_ms": 0,
    }
    lines = [
        json.dumps(header_line(Limits())),
        json.dumps(
            {"type": "invoke", "id": 1, "process": 1, "op": "create", "args": encode_args("create", args)}
        ),
        json.dumps(
            {
                "type": "ok",
                "id": 1,
                "process": 1,
                "result": encode_result("create", Admission(run=_RUN, record=record)),
            }
        ),
    ]
    (op,) = decode_history(line + "\n" for line in lines).ops
    decoded: CanonicalRecord = op.result.record
    return decoded


def _history_run(run: RunState) -> RunState:
    """A run state through the history format: the answer of a get_run."""
    lines = [
        json.dumps(header_line(Limits())),
        json.dumps(
            {
                "type": "invoke",
                "id": 1,
                "process": 1,
                "op": "get_run",
                "args": {"run_id": run.run_id, "now_ms": 0},
            }
        ),
        json.dumps({"type": "ok", "id": 1, "process": 1, "result": encode_result("get_run", run)}),
    ]
    (op,) = decode_history(line + "\n" for line in lines).ops
    decoded: RunState = op.result
    return decoded


ROUND_TRIPS_RECORD: dict[str, Callable[[CanonicalRecord], CanonicalRecord]] = {
    "codec": lambda record: codec.record_from_obj(json.loads(codec.dumps(record))),
    "vectors": lambda record: record_from_json(json.loads(json.dumps(record_json(record)))),  # type: ignore[return-value]
    "history": _history_record,
}
ROUND_TRIPS_RUN: dict[str, Callable[[RunState], RunState]] = {
    "codec": lambda run: codec.run_state_from_obj(json.loads(codec.dumps(run))),
    "vectors": lambda run: run_from_json(json.loads(json.dumps(run_json(run)))),  # type: ignore[return-value]
    "history": _history_run,
}


@pytest.mark.parametrize("path", sorted(ROUND_TRIPS_RECORD))
def test_every_record_field_survives(path: str) -> None:
    """CIS-REC-1, CIS-HIST-1, CIS-SPEC-3: a record with any one field changed comes back exactly so
    through the codec, the vectors' JSON and the history format."""
    assert ROUND_TRIPS_RECORD[path](_RECORD) == _RECORD
    for name, changed in _distinct(CanonicalRecord, _RECORD):
        assert changed != _RECORD, name
        assert ROUND_TRIPS_RECORD[path](changed) == changed, name


@pytest.mark.parametrize("path", sorted(ROUND_TRIPS_RUN))
def test_every_run_field_survives(path: str) -> None:
    """CIS-RUN-1, CIS-HIST-1, CIS-SPEC-3: a run state with any one field changed comes back exactly so
    through the codec, the vectors' JSON and the history format."""
    assert ROUND_TRIPS_RUN[path](_RUN) == _RUN
    for name, changed in _distinct(RunState, _RUN):
        assert ROUND_TRIPS_RUN[path](changed) == changed, name


#: How the trace's RecordView shows each record field it does not carry as it is (CIS-REC-3).
_RECORD_VIEW_RENAMED = {
    "raw_response": "raw_bytes",
    "request_json": "request_bytes",
    "invocation_token": None,
}


def test_the_oracle_views_show_every_field() -> None:
    """CIS-ORC-1, CIS-REC-3: the oracle's trace views carry every run field as it is, and every record
    field as it is except the raw response and request (their UTF-8 sizes) and the token (left out:
    it is not an id); a field changed alone changes the view."""
    view = record_view(_RECORD)
    for name, changed in _distinct(CanonicalRecord, _RECORD):
        shown = _RECORD_VIEW_RENAMED.get(name, name)
        if shown is None:
            assert name not in view
            continue
        assert shown in view, name
        if name not in _RECORD_VIEW_RENAMED:
            assert record_view(changed)[shown] == codec.unstructure(changed)[name], name
    for name, changed in _distinct(RunState, _RUN):
        assert run_view(changed)[name] == codec.unstructure(changed)[name], name
    assert ErrorCode.EXECUTION_FAILED.value not in json.dumps(view)


# -- the stores' and the oracle's own field lists ---------------------------------------------


def _optional(cls: type[Any]) -> tuple[str, ...]:
    return tuple(name for name, hint, _d in _fields(cls) if type(None) in get_args(hint))


def _record_samples() -> list[CanonicalRecord]:
    """Well-formed records in which every record field takes at least two values.

    The bases (READY, ERROR, PROJECTING with and without its raw response) and every
    well-formed change of one field of one base: a decoder that drops or defaults a
    field gets at least one of them wrong. Derived from the attrs fields: a new field
    is covered without editing this file.
    """
    samples = list(_BASES)
    for name, hint, _d in _fields(CanonicalRecord):
        options = get_args(hint) or (hint,)
        members = [m for o in options if isinstance(o, type) and issubclass(o, enum.Enum) for m in o]
        candidates = [*members, *([None] if type(None) in options else [])]
        for base in _BASES:
            for value in (_probe(name, hint, getattr(base, name)), *candidates):
                changed = attrs.evolve(base, **{name: value})
                if changed != base and is_well_formed(changed):
                    samples.append(changed)
    for name, _h, _d in _fields(CanonicalRecord):
        values = {repr(getattr(sample, name)) for sample in samples}
        assert len(values) > 1, f"every sample has the same {name}: extend _BASES here"
    return samples


_BASES = [_RECORD, error_record(), projecting(), awaiting_raw()]
_SAMPLES = _record_samples()


def test_the_sql_row_codec_keeps_every_field() -> None:
    """CIS-STORE-4, CIS-REC-1: the SQL stores' columns are the attrs fields, and a row keeps each one
    (a new field is a new column: a schema change, tests/stores/test_sql_stores.py)."""
    assert tuple(f.name for f in attrs.fields(CanonicalRecord)) == _sql._RECORD_COLUMNS
    assert tuple(f.name for f in attrs.fields(RunState)) == _sql._RUN_COLUMNS
    assert set(_sql._MUTABLE) | set(IDENTITY_FIELDS) == set(_sql._RECORD_COLUMNS)
    for sample in _SAMPLES:
        row = _sql._record_row(sample)
        assert _sql._record_from(row, sample.run_id, sample.tool_call_id) == sample
    for name, changed in _distinct(RunState, _RUN):
        assert _sql._run_from(_sql._run_row(changed), changed.run_id) == changed, name


def _redis_hash(record: CanonicalRecord) -> dict[bytes, bytes]:
    """The record HASH as the Redis scripts write it: decimal integers, enum values, None left out."""
    encoded = codec.unstructure(record)
    return {
        name.encode(): str(value).encode()
        for name, value in encoded.items()
        if value is not None and name != "raw_response"
    }


def test_the_redis_decoders_keep_every_field() -> None:
    """CIS-STORE-6, CIS-REC-1: the Redis store's field lists are the attrs fields (RUN_FIELDS in
    adapters/_redis_scripts.py, the record fields and optional fields in adapters/_redis_decode.py), and
    decode_record / decode_run keep each field of a record HASH and a run HASH."""
    run_names = tuple(f.name for f in attrs.fields(RunState))
    assert run_names == RUN_FIELDS, "adapters/_redis_scripts.py: RUN_FIELDS must list RunState's fields"
    record_names = {f.name for f in attrs.fields(CanonicalRecord)} - {"raw_response"}
    assert record_names == _redis_decode._RECORD_FIELDS, "adapters/_redis_decode.py: _RECORD_FIELDS"
    assert _optional(CanonicalRecord) == _redis_decode._OPTIONAL_FIELDS, (
        "adapters/_redis_decode.py: _OPTIONAL_FIELDS must list the record fields that may be None, in "
        "order (the COMPLETE_SCRIPT mask of adapters/_redis_scripts.py follows it)"
    )
    for sample in _SAMPLES:
        decoded = _redis_decode.decode_record(
            _redis_hash(sample), sample.raw_response, sample.run_id, sample.tool_call_id
        )
        assert decoded == sample, f"adapters/_redis_decode.py: decode_record loses a field of {sample}"
    for name, changed in _distinct(RunState, _RUN):
        values = [str(codec.unstructure(changed)[field]).encode() for field in RUN_FIELDS]
        decoded_run = _redis_decode.decode_run(values, changed.run_id)
        assert decoded_run == changed, f"adapters/_redis_decode.py: decode_run loses {name}"


def test_the_oracle_compares_every_record_field() -> None:
    """CIS-ORC-1, CIS-ORC-2: the oracle compares every field of a record as its trace view shows it
    (oracle/_compare.py's _RECORD_FIELDS and _RECORD_GETTERS)."""
    shown = {_RECORD_VIEW_RENAMED.get(f.name, f.name) for f in attrs.fields(CanonicalRecord)} - {None}
    assert set(_compare._RECORD_FIELDS) == shown, (
        "oracle/_compare.py: _RECORD_FIELDS must list every view field"
    )
    assert len(_compare._RECORD_FIELDS) == len(shown)
    assert set(_compare._RECORD_GETTERS) == shown, "oracle/_compare.py: _RECORD_GETTERS must read every field"
    getters = _compare._RECORD_GETTERS
    for field in _compare._RECORD_FIELDS:
        assert len({repr(getters[field](sample)) for sample in _SAMPLES}) > 1, field
