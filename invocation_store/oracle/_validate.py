"""Strict shape checks of trace lines, compiled from the model (CIS-ORC-1, CIS-CODEC-1).

Two readers of one model (:mod:`._model`):

- :func:`line_checker` compiles, once per line class, a closure that checks a
  decoded JSON object *in place*: exact JSON types (``true`` is not an integer,
  ``1.0`` is not an integer, ``"false"`` is not a boolean), enum values spelled
  exactly, integer minimums, required and unknown keys, ``ONE_OF`` groups. It builds
  nothing, which is why the checker uses it on every line (a cattrs structure of a
  submit line costs several times more than the whole kernel step).
- :func:`strict_converter` is the project's one strict cattrs converter
  (:data:`invocation_store.codec.converter`); :func:`structure_line` structures a
  line into its model class with it. Tests check that both readers accept and
  reject the same lines.

:func:`schema_defs` renders the same model as JSON Schema definitions.

Errors are :class:`ShapeError` with the JSON path of the failing value and a reason
that never quotes the value (it may be a payload).
"""

from __future__ import annotations

import enum
import types
import typing
from collections.abc import Callable
from typing import Any, Final

import attrs
import cattrs
from cattrs.preconf.json import JsonConverter

from .. import codec
from ._model import LINE_TYPES, TRACE_FORMAT, TRACE_VERSION

__all__ = [
    "ShapeError",
    "line_checker",
    "schema_defs",
    "strict_converter",
    "structure_line",
    "trace_schema",
]

Check = Callable[[object], Any]


class ShapeError(ValueError):
    """A line does not have the shape of the trace format.

    ``path`` is the list of keys/indexes from the line's root to the failing value
    (built while the error unwinds); ``reason`` says what was wrong, without the value.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.path: list[str] = []

    @property
    def where(self) -> str:
        """The failing value's path, e.g. ``observed.record.status`` (``<line>`` for the root)."""
        return ".".join(reversed(self.path)) or "<line>"


def _fields(cls: type[Any]) -> tuple[attrs.Attribute[Any], ...]:
    attrs.resolve_types(cls)
    return tuple(attrs.fields(cls))


def _type(attribute: attrs.Attribute[Any]) -> Any:
    """The resolved annotation of ``attribute`` (typed ``Any``: it is a typing form)."""
    return attribute.type


def _split_optional(tp: Any) -> tuple[Any, bool]:
    """``X | None`` -> ``(X, True)``; anything else -> ``(tp, False)``."""
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        args = [arg for arg in typing.get_args(tp) if arg is not type(None)]
        if len(args) != 1:
            raise TypeError("only X | None unions are supported in the trace model")
        return args[0], True
    return tp, False


def _is_enum(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, enum.Enum)


# ---------------------------------------------------------------------------
# The fast checker: straight-line Python generated from the model (as cattrs does)


def _error(reason: str, *segments: str) -> ShapeError:
    """A ShapeError at ``segments`` (root first) below the object being checked."""
    error = ShapeError(reason)
    error.path.extend(reversed(segments))
    return error


def _unknown(value: dict[str, Any], allowed: frozenset[str]) -> ShapeError:
    name = sorted(set(value) - allowed)[0]
    return ShapeError(f"unknown member {name[:60]!r}")


def _missing(value: dict[str, Any], required: frozenset[str]) -> ShapeError:
    return ShapeError(f"missing required member {sorted(required - value.keys())[0]!r}")


class _Generator:
    """Writes one ``check_<Class>`` function per model class into one namespace."""

    def __init__(self) -> None:
        self.namespace: dict[str, Any] = {
            "ShapeError": ShapeError,
            "_error": _error,
            "_unknown": _unknown,
            "_missing": _missing,
        }
        self.done: set[Any] = set()
        self.constants = 0

    def constant(self, value: object) -> str:
        self.constants += 1
        name = f"_C{self.constants}"
        self.namespace[name] = value
        return name

    def function(self, cls: type[Any], extra: tuple[str, ...]) -> str:
        """Generate ``check_<Class>(v)``: checks ``v`` and returns it as a dict.

        ``v`` may be a dict or, as the fast decoder leaves JSON objects, a tuple of
        (name, value) pairs, which is turned into a dict here (a repeated name is a
        shape error) and stored back into its parent by the caller.
        """
        name = f"check_{cls.__name__}{'_line' if extra else ''}"
        if name in self.namespace:
            return name
        self.namespace[name] = None  # reserve: nested classes may refer back
        fields = _fields(cls)
        allowed = self.constant(frozenset([*(a.name for a in fields), *extra]))
        required = self.constant(frozenset(a.name for a in fields if a.default is attrs.NOTHING))
        body = [
            f"def {name}(v):",
            "    if type(v) is not dict:",
            *self.as_dict("v", 2, ()),
            "    keys = v.keys()",
            f"    if not keys <= {allowed}:",
            f"        raise _unknown(v, {allowed})",
            f"    if not {required} <= keys:",
            f"        raise _missing(v, {required})",
        ]
        for attribute in fields:
            inner, nullable = _split_optional(_type(attribute))
            optional = attribute.default is not attrs.NOTHING
            key = attribute.name
            body.append(f"    x = v.get({key!r})" if optional else f"    x = v[{key!r}]")
            check = self.check(inner, attribute.metadata.get("minimum"), "x", (repr(key),), 2, f"v[{key!r}]")
            if nullable or optional:
                body.append("    if x is not None:")
                body.extend(check)
            else:
                body.append("    if x is None:")
                body.append(f"        raise _error({key + ' may not be null'!r}, {key!r})")
                body.extend(line[4:] for line in check)
        one_of: tuple[str, ...] = getattr(cls, "ONE_OF", ())
        if one_of:
            count = " + ".join(f"(v.get({n!r}) is not None)" for n in one_of)
            body.append(f"    if {count} != 1:")
            body.append(
                f"        raise ShapeError({'exactly one of ' + ', '.join(one_of) + ' is required'!r})"
            )
        body.append("    return v")
        exec("\n".join(body), self.namespace)  # noqa: S102 - code generated from the model only
        return name

    @staticmethod
    def as_dict(var: str, depth: int, path: tuple[str, ...]) -> list[str]:
        """Lines run when ``var`` is not a dict: a pair tuple becomes one, anything else fails."""
        pad = "    " * depth
        where = ", ".join(path)
        return [
            f"{pad}if type({var}) is not tuple:",
            f'{pad}    raise _error("expected an object", {where})',
            f"{pad}pairs = {var}",
            f"{pad}{var} = dict(pairs)",
            f"{pad}if len({var}) != len(pairs):",
            f'{pad}    raise _error("duplicate member name", {where})',
        ]

    def check(  # noqa: PLR0917 - internal code generator, one call site per type form
        self, tp: Any, minimum: int | None, var: str, path: tuple[str, ...], depth: int, target: str
    ) -> list[str]:
        """Lines (indented ``depth`` levels) that check variable ``var`` of type ``tp``.

        A JSON object converted from pairs is stored back with ``<target> = <var>``.
        """
        pad = "    " * depth
        where = ", ".join(path)
        if tp is str or tp is bool:
            label = "a string" if tp is str else "a boolean"
            return [
                f"{pad}if type({var}) is not {tp.__name__}:",
                f'{pad}    raise _error("expected {label}", {where})',
            ]
        if tp is int:
            if minimum is None:
                return [
                    f"{pad}if type({var}) is not int:",
                    f'{pad}    raise _error("expected an integer", {where})',
                ]
            return [
                f"{pad}if type({var}) is not int or {var} < {minimum}:",
                f'{pad}    raise _error("expected an integer >= {minimum}", {where})',
            ]
        if _is_enum(tp):
            values = self.constant(frozenset(member.value for member in tp))
            names = ", ".join(member.value for member in tp)
            return [
                f"{pad}if type({var}) is not str or {var} not in {values}:",
                f'{pad}    raise _error("expected one of {names}", {where})',
            ]
        if attrs.has(tp):
            function = self.function(tp, ())
            return [
                f"{pad}try:",
                f"{pad}    {target} = {function}({var})",
                f"{pad}except ShapeError as e:",
                f"{pad}    e.path.extend(reversed(({where},)))",
                f"{pad}    raise",
            ]
        origin = typing.get_origin(tp)
        if origin is list:
            (item_type,) = typing.get_args(tp)
            item = f"{var}_i"
            index = f"{var}_n"
            return [
                f"{pad}if type({var}) is not list:",
                f'{pad}    raise _error("expected an array", {where})',
                f"{pad}for {index}, {item} in enumerate({var}):",
                *self.check(item_type, minimum, item, (*path, f"str({index})"), depth + 1, f"{var}[{index}]"),
            ]
        if origin is dict:
            key_type, value_type = typing.get_args(tp)
            key, value = f"{var}_k", f"{var}_v"
            return [
                f"{pad}if type({var}) is not dict:",
                *self.as_dict(var, depth + 1, path),
                f"{pad}    {target} = {var}",
                f"{pad}for {key}, {value} in {var}.items():",
                *self.check(key_type, None, key, (*path, key), depth + 1, f"{var}[{key}]"),
                *self.check(value_type, minimum, value, (*path, key), depth + 1, f"{var}[{key}]"),
            ]
        raise TypeError(f"unsupported type in the trace model: {tp!r}")


_GENERATOR: Final = _Generator()


def line_checker(cls: type[Any]) -> Check:
    """The compiled strict checker of one line class (accepts the ``op`` key too).

    The returned function returns the line (nested pair tuples left by the fast
    decoder turned into dicts, in place) or raises :class:`ShapeError`; it never raises
    anything else for any JSON value. Compiled once per class.
    """
    name = _GENERATOR.function(cls, ("op",))
    checker: Check = _GENERATOR.namespace[name]
    return checker


# ---------------------------------------------------------------------------
# The strict cattrs reader (reference)


def strict_converter() -> JsonConverter:
    """The project's one strict cattrs converter, :data:`invocation_store.codec.converter` (CIS-CODEC-1).

    Its hooks take every enum of the trace model by exact value only, arrays only as
    JSON arrays, and refuse coercions and unknown keys.
    """
    return codec.converter


def structure_line(obj: object) -> Any:
    """Structure one decoded line into its model class with the strict cattrs converter.

    Raises :class:`ShapeError` (path ``op`` for an unknown or missing op).
    """
    if type(obj) is not dict:
        raise ShapeError("expected an object")
    op: Any = obj.get("op")
    cls = LINE_TYPES.get(op) if type(op) is str else None
    if cls is None:
        error = ShapeError("unknown op")
        error.path.append("op")
        raise error
    body = {key: value for key, value in obj.items() if key != "op"}
    try:
        return strict_converter().structure(body, cls)
    except (cattrs.BaseValidationError, TypeError, ValueError, KeyError, AttributeError) as exc:
        raise ShapeError(f"invalid line ({type(exc).__name__})") from None


# ---------------------------------------------------------------------------
# JSON Schema


_SCALARS: Final[dict[Any, str]] = {str: "string", bool: "boolean", int: "integer"}


def _schema_of(tp: Any, minimum: int | None, names: dict[Any, str]) -> dict[str, Any]:
    if tp in _SCALARS:
        schema: dict[str, Any] = {"type": _SCALARS[tp]}
        if tp is int and minimum is not None:
            schema["minimum"] = minimum
        return schema
    if _is_enum(tp):
        return {"type": "string", "enum": [member.value for member in tp]}
    if attrs.has(tp):
        return {"$ref": f"#/$defs/{names[tp]}"}
    origin = typing.get_origin(tp)
    if origin is list:
        (item_type,) = typing.get_args(tp)
        return {"type": "array", "items": _schema_of(item_type, minimum, names)}
    if origin is dict:
        key_type, value_type = typing.get_args(tp)
        return {
            "type": "object",
            "propertyNames": _schema_of(key_type, None, names),
            "additionalProperties": _schema_of(value_type, minimum, names),
        }
    raise TypeError(f"unsupported type in the trace model: {tp!r}")


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in schema:
        return {"oneOf": [schema, {"type": "null"}]}
    nullable = dict(schema)
    nullable["type"] = [schema["type"], "null"]
    if "enum" in schema:
        nullable["enum"] = [*schema["enum"], None]
    return nullable


def _object_schema(cls: type[Any], names: dict[Any, str], op: str | None) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    required: list[str] = []
    if op is not None:
        properties["op"] = {"const": op}
        required.append("op")
    for attribute in _fields(cls):
        inner, nullable = _split_optional(_type(attribute))
        optional = attribute.default is not attrs.NOTHING
        schema = _schema_of(inner, attribute.metadata.get("minimum"), names)
        if nullable or optional:
            schema = _nullable(schema)
        schema["description"] = attribute.metadata.get("doc", "")
        properties[attribute.name] = schema
        if not optional:
            required.append(attribute.name)
    result: dict[str, Any] = {
        "type": "object",
        "description": (getattr(cls, "DOC", None) or (cls.__doc__ or "").strip().splitlines()[0]),
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
    requirements = getattr(cls, "REQUIREMENTS", None)
    if requirements:
        result["x-requirements"] = list(requirements)
    one_of: tuple[str, ...] = getattr(cls, "ONE_OF", ())
    if one_of:
        result["oneOf"] = [
            {"required": [name], "properties": {name: {"not": {"type": "null"}}}} for name in one_of
        ]
    return result


def schema_defs(line_types: dict[str, type[Any]]) -> dict[str, Any]:
    """JSON Schema ``$defs`` for every line class (by op) and every nested class (by name)."""
    names: dict[Any, str] = {}
    order: list[type[Any]] = []
    stack = list(line_types.values())
    seen: set[Any] = set()
    while stack:
        cls = stack.pop(0)
        if cls in seen:
            continue
        seen.add(cls)
        for attribute in _fields(cls):
            pending: list[Any] = [_type(attribute)]
            while pending:
                tp = pending.pop()
                if attrs.has(tp) and tp not in seen:
                    stack.append(tp)
                    if tp not in order:
                        order.append(tp)
                else:
                    pending.extend(typing.get_args(tp))
    for cls in order:
        names[cls] = cls.__name__
    defs: dict[str, Any] = {}
    for op, cls in line_types.items():
        defs[op] = _object_schema(cls, names, op)
    for cls in sorted(order, key=lambda c: c.__name__):
        defs[names[cls]] = _object_schema(cls, names, None)
    return defs


def trace_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of one trace line, derived from the model (CIS-ORC-1).

    ``spec/trace.schema.json`` is this value written by ``scripts/generate_vectors.py``
    (sorted keys, 1-space indent); a test keeps the file identical.
    """
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://canonical-invocation-store.invalid/spec/trace.schema.json",
        "title": f"{TRACE_FORMAT} v{TRACE_VERSION}: one line",
        "description": (
            "One line of a canonical-invocation trace (JSON Lines). The first line is a header; "
            "every other line is one operation with its inputs and the implementation's observed "
            "outcome. See spec/trace.md. Optional properties may be omitted or null: both mean "
            "'not reported'."
        ),
        "oneOf": [{"$ref": f"#/$defs/{op}"} for op in LINE_TYPES],
        "$defs": schema_defs(LINE_TYPES),
    }
