"""JSON (un)structuring at the edges, with cattrs, strictly (CIS-CODEC-1).

The kernel never imports this module. cattrs' default hooks coerce (``None`` becomes
``"None"``, ``"false"`` becomes ``True``, ``"1"`` becomes ``1``); that would turn a
missing tool_call_id into the id ``"None"`` and an unauthorized tool into an
authorized one. :func:`make_converter` builds a ``cattrs.preconf.json`` converter
that instead rejects: ``str`` fields take only ``str``, ``bool`` only ``bool``,
``int`` only non-bool ``int``, enums only their exact values, and unknown keys are
errors (``forbid_extra_keys``).

Errors raised here are :class:`CodecError` with a message naming the failing field
path, never the offending value (it may be a payload or a credential).
"""

from __future__ import annotations

import enum
import json
from typing import Any, TypeVar

import cattrs
from cattrs.preconf.json import JsonConverter
from cattrs.preconf.json import make_converter as _make_json_converter

from .kernel import (
    CanonicalRecord,
    CitationKind,
    ErrorCode,
    EvidenceStatus,
    ExclusionReason,
    InvocationStatus,
    Projection,
    RunState,
    RunStatus,
    ToolCallEnvelope,
    ToolPolicy,
)

_KERNEL_ENUMS: tuple[type[enum.Enum], ...] = (
    CitationKind,
    ErrorCode,
    EvidenceStatus,
    ExclusionReason,
    InvocationStatus,
    RunStatus,
)

__all__ = [
    "CodecError",
    "configure_converter",
    "converter",
    "envelope_from_obj",
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


def _strict_str(value: object, _type: object) -> str:
    if not isinstance(value, str):
        raise TypeError("expected a string")
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
    # Only the exact wire value of a member; without this hook the ``str`` hook would
    # claim the kernel's StrEnums and pass any string through unconverted.
    if not isinstance(value, str):
        raise TypeError("expected an enum value string")
    return cls(value)


def configure_converter(converter: cattrs.Converter) -> None:
    """Install the strict hooks on ``converter`` (CIS-CODEC-1)."""
    converter.register_structure_hook(str, _strict_str)
    # The ``str`` hook would also claim the kernel's StrEnums by single dispatch and
    # pass any string through unconverted; a hook per enum class is more specific.
    for enum_cls in _KERNEL_ENUMS:
        converter.register_structure_hook(enum_cls, _strict_enum)
    converter.register_structure_hook(bool, _strict_bool)
    converter.register_structure_hook(int, _strict_int)


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


def record_from_obj(obj: object) -> CanonicalRecord:
    """Structure a canonical record strictly; raises :class:`CodecError`."""
    return structure(obj, CanonicalRecord)


def run_state_from_obj(obj: object) -> RunState:
    """Structure a run state strictly; raises :class:`CodecError`."""
    return structure(obj, RunState)


def projection_from_obj(obj: object) -> Projection:
    """Structure a projection strictly; raises :class:`CodecError`."""
    return structure(obj, Projection)
