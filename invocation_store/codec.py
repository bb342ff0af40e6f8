"""JSON (un)structuring at the edges, with cattrs, strictly (CIS-CODEC-1).

The kernel never imports this module. cattrs' default hooks coerce (``None`` becomes
``"None"``, ``"false"`` becomes ``True``, ``"1"`` becomes ``1``); that would turn a
missing tool_call_id into the id ``"None"`` and an unauthorized tool into an
authorized one. :func:`make_converter` builds a ``cattrs.preconf.json`` converter
that instead rejects: ``str`` fields take only ``str``, ``bool`` only ``bool``,
``int`` only non-bool ``int``, enums only their exact values, and unknown keys are
errors (``forbid_extra_keys``).

This is the one converter of the project's JSON forms: records, runs, limits,
projections, envelopes, policies, events (a tagged union: ``{"type": <class name>,
<fields>}``), and the oracle's trace lines and views are all (un)structured by it,
so a field added to a kernel class reaches every JSON form from its attrs
definition alone.

Errors raised here are :class:`CodecError` with a message naming the failing field
path, never the offending value (it may be a payload or a credential).
"""

from __future__ import annotations

import enum
import json
import types
import typing
from typing import Any, TypeVar

import cattrs
from cattrs.fns import identity
from cattrs.preconf.json import JsonConverter
from cattrs.preconf.json import make_converter as _make_json_converter
from cattrs.strategies import configure_tagged_union

from .kernel import (
    Begin,
    CanonicalRecord,
    ErrorCode,
    Event,
    EvidenceStatus,
    Failed,
    Limits,
    Projection,
    ProjectionReceived,
    RawReceived,
    RunState,
    SweptStale,
    ToolCallEnvelope,
    ToolPolicy,
)

#: The event classes of the tagged union :data:`~invocation_store.kernel.Event`.
EVENT_TYPES: tuple[type[Any], ...] = (Begin, RawReceived, ProjectionReceived, Failed, SweptStale)
#: The member naming an event's class in its JSON form.
EVENT_TAG = "type"

__all__ = [
    "CodecError",
    "configure_converter",
    "converter",
    "envelope_from_obj",
    "event_from_obj",
    "limits_from_obj",
    "make_converter",
    "policy_from_obj",
    "structure",
    "unstructure",
]

T = TypeVar("T")


class CodecError(ValueError):
    """A value did not have the strict shape required; ``path`` names the field."""

    def __init__(self, path: str) -> None:
        super().__init__(f"invalid value at {path}")
        self.path = path


def _strict_str(value: object, cls: type[str]) -> str:
    # Registered for ``str``, so single dispatch also hands it every ``StrEnum`` (the
    # kernel's and the trace model's): a member is taken only by its exact value.
    if not isinstance(value, str):
        raise TypeError("expected a string")
    if cls is not str:
        return cls(value)
    return value


def _strict_bool(value: object, _type: object) -> bool:
    if not isinstance(value, bool):
        raise TypeError("expected a boolean")
    return value


def _strict_int(value: object, _type: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("expected an integer")
    return value


def _strict_enum(value: object, cls: type[enum.Enum]) -> enum.Enum:
    # Only the exact wire value (a string) of a member of a non-string enum.
    if not isinstance(value, str):
        raise TypeError("expected an enum value string")
    return cls(value)


_EVIDENCE_VALUES = frozenset(member.value for member in EvidenceStatus)


def _evidence_or_text(value: object, _type: object) -> EvidenceStatus | str:
    # A projection's status is judged by the kernel (PROJECTION_INVALID), not here:
    # a known value becomes the member, any other string stays a string.
    if not isinstance(value, str):
        raise TypeError("expected a string")
    return EvidenceStatus(value) if value in _EVIDENCE_VALUES else value


_PROJECTION_KEYS = frozenset({"evidence_status", "content", "scope"})


def _projection_as_given(value: object, _type: object) -> Projection:
    """A projector's result as given: the kernel judges it, so a non-text content, scope or status
    is PROJECTION_INVALID there, not refused here (CIS-EVID-5). Only the shape is checked: an object
    with evidence_status and content, scope optional."""
    if not isinstance(value, dict) or not value.keys() <= _PROJECTION_KEYS:
        raise TypeError("expected a projection object")
    status = value["evidence_status"]
    if isinstance(status, str) and status in _EVIDENCE_VALUES:
        status = EvidenceStatus(status)
    return Projection(evidence_status=status, content=value["content"], scope=value.get("scope", ""))


def _enum_value(member: enum.Enum) -> Any:
    return member._value_


def _optional_enum_value(member: enum.Enum | None) -> Any:
    return None if member is None else member._value_


def _optional_of(tp: Any) -> Any:
    """``X`` of ``X | None`` (None for any other type)."""
    if typing.get_origin(tp) not in (typing.Union, types.UnionType):
        return None
    args = [arg for arg in typing.get_args(tp) if arg is not type(None)]
    return args[0] if len(args) == 1 and len(typing.get_args(tp)) == 2 else None


def _optional_scalar_hook(tp: Any) -> Any:
    """The structure hook of ``str | None``, ``int | None`` or ``bool | None``: one type test
    per value, no union dispatch (a ``bool`` is not an ``int``)."""
    inner = _optional_of(tp)

    def structure_optional(value: object, _type: object) -> Any:
        if value is None or type(value) is inner:
            return value
        raise TypeError("expected a " + inner.__name__ + " or null")

    return structure_optional


def _is_optional_scalar(tp: Any) -> bool:
    return _optional_of(tp) in (str, int, bool)


def _is_optional_enum(tp: Any) -> bool:
    inner = _optional_of(tp)
    return isinstance(inner, type) and issubclass(inner, enum.Enum)


def _is_list(tp: Any) -> bool:
    origin: Any = typing.get_origin(tp)
    return origin is list


def configure_converter(converter: cattrs.Converter) -> None:
    """Install the strict hooks on ``converter`` (CIS-CODEC-1).

    ``str`` (and every ``StrEnum``, by exact value), ``bool``, ``int`` (not ``bool``),
    other enums, lists (a JSON array only: cattrs' default iterates any iterable, so
    a string became a list of characters), a projection's ``EvidenceStatus | str``,
    and the events as a union tagged by ``"type"``. A :class:`Projection` is a
    projector's result, which the kernel judges: its values are kept as given.
    """
    converter.register_unstructure_hook(enum.Enum, _enum_value)
    converter.register_unstructure_hook(enum.StrEnum, _enum_value)
    # ``X | None`` fields unstructured without a dispatch per value: a text, number or
    # flag is itself (cattrs inlines ``identity``), an enum its value.
    converter.register_unstructure_hook_func(_is_optional_scalar, identity)
    converter.register_structure_hook_factory(_is_optional_scalar, _optional_scalar_hook)
    converter.register_unstructure_hook_func(_is_optional_enum, _optional_enum_value)
    converter.register_structure_hook(str, _strict_str)
    converter.register_structure_hook(enum.Enum, _strict_enum)
    converter.register_structure_hook(bool, _strict_bool)
    converter.register_structure_hook(int, _strict_int)
    converter.register_structure_hook(EvidenceStatus | str, _evidence_or_text)
    converter.register_structure_hook(Projection, _projection_as_given)

    def structure_list(value: object, tp: Any) -> list[Any]:
        if type(value) is not list:
            raise TypeError("expected an array")
        (item_type,) = typing.get_args(tp)
        return [converter.structure(element, item_type) for element in value]

    converter.register_structure_hook_func(_is_list, structure_list)
    configure_tagged_union(Event, converter, tag_generator=lambda cls: cls.__name__, tag_name=EVENT_TAG)


def make_converter() -> JsonConverter:
    """A strict JSON converter: ``forbid_extra_keys=True`` plus :func:`configure_converter`."""
    converter = _make_json_converter(forbid_extra_keys=True)
    configure_converter(converter)
    return converter


#: The shared strict converter.
converter: JsonConverter = make_converter()


def _path(exc: BaseException) -> str:
    notes: list[str] = []
    stack: list[BaseException] = [exc]
    while stack:
        current = stack.pop()
        notes.extend(
            note.rsplit("@ ", 1)[-1].removeprefix("attribute ")
            for note in getattr(current, "__notes__", ())
            if "@ " in note
        )
        stack.extend(getattr(current, "exceptions", ()))
    return ".".join(notes) or "<root>"


def structure(obj: object, cls: type[T]) -> T:
    """Structure ``obj`` as ``cls`` strictly; raises :class:`CodecError` naming the field."""
    try:
        return converter.structure(obj, cls)
    except (cattrs.BaseValidationError, TypeError, ValueError, KeyError) as exc:
        raise CodecError(_path(exc)) from None


def unstructure(obj: object) -> Any:
    """Unstructure an attrs value to JSON-ready builtins (enums as their values)."""
    return converter.unstructure(obj)


_ENVELOPE_FIELDS = ("run_id", "tool_call_id", "tool_name", "arguments")


def envelope_from_obj(obj: object) -> ToolCallEnvelope | ErrorCode:
    """Build an envelope from decoded JSON without coercion (CIS-CODEC-2).

    A missing or ``null`` field stays ``None`` (a missing tool_call_id is
    MISSING_TOOL_CALL_ID at preflight, never the id ``"None"``). A field of the wrong
    type gets its preflight code: tool_call_id -> MISSING_TOOL_CALL_ID, run_id ->
    RUN_MISMATCH, arguments -> INVALID_ARGUMENTS, tool_name -> UNAUTHORIZED; a
    non-object or an unknown key -> INVALID_ARGUMENTS.
    """
    if not isinstance(obj, dict) or not set(obj) <= set(_ENVELOPE_FIELDS):
        return ErrorCode.INVALID_ARGUMENTS
    values: dict[str, str | None] = {}
    codes = {
        "tool_call_id": ErrorCode.MISSING_TOOL_CALL_ID,
        "run_id": ErrorCode.RUN_MISMATCH,
        "arguments": ErrorCode.INVALID_ARGUMENTS,
        "tool_name": ErrorCode.UNAUTHORIZED,
    }
    for name in ("tool_call_id", "run_id", "arguments", "tool_name"):
        value = obj.get(name)
        if value is not None and not isinstance(value, str):
            return codes[name]
        values[name] = value
    return ToolCallEnvelope(
        run_id=values["run_id"],
        tool_call_id=values["tool_call_id"],
        tool_name=values["tool_name"],
        arguments=values["arguments"],
    )


def policy_from_obj(obj: object) -> ToolPolicy:
    """Build a ToolPolicy strictly: flags must be JSON booleans (``"false"`` is an error).

    Raises :class:`CodecError`; callers fail closed (treat the tool as unauthorized).
    """
    return structure(obj, ToolPolicy)


def dumps(obj: object) -> str:
    """Compact, key-sorted JSON of an attrs value or builtins (deterministic)."""
    return json.dumps(unstructure(obj), ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def event_from_obj(obj: object) -> Event:
    """Structure an event from ``{"type": <class name>, <fields>}`` strictly; raises :class:`CodecError`."""
    return structure(obj, Event)  # type: ignore[arg-type]


def limits_from_obj(obj: object) -> Limits:
    """Structure limits strictly (every field a positive int); raises :class:`CodecError`."""
    return structure(obj, Limits)


def record_from_obj(obj: object) -> CanonicalRecord:
    """Structure a canonical record strictly; raises :class:`CodecError`."""
    return structure(obj, CanonicalRecord)


def run_state_from_obj(obj: object) -> RunState:
    """Structure a run state strictly; raises :class:`CodecError`."""
    return structure(obj, RunState)


def projection_from_obj(obj: object) -> Projection:
    """Structure a projector's result: its shape strictly, its values as given for the
    kernel to judge (PROJECTION_INVALID, CIS-EVID-5); raises :class:`CodecError`."""
    return structure(obj, Projection)
