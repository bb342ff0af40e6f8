"""Shared helpers of the example tools: strict argument reading, raw JSON, bounded summaries.

Raw responses are compact JSON text written by the tools themselves
(``allow_nan=False``, sorted keys), so the boundary stores them as-is. Summaries
(agent results) are built by :func:`bounded_summary`, which stops adding detail lines
before ``content + scope`` would exceed the byte budget: a summary is a selection,
and the raw response in the record stays complete (CIS-SIZE-1, CIS-REC-3).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "DEFAULT_SUMMARY_BYTES",
    "ToolArgumentError",
    "bounded_summary",
    "clip",
    "dump_raw",
    "load_raw",
    "optional_bool",
    "optional_int",
    "optional_str",
    "quote",
    "reject_unknown",
    "required_str",
    "utf8_size",
]

#: Default budget, in UTF-8 bytes, of one tool's agent result (content + scope). Well
#: under the kernel's default agent-result limit (16 KiB); replay lowers it to the
#: run's ``--result-limit`` when that is smaller.
DEFAULT_SUMMARY_BYTES = 2048

#: Longest excerpt of one line quoted in a summary, in characters.
EXCERPT_CHARS = 200

_MORE_RESERVE = 40


class ToolArgumentError(ValueError):
    """The arguments do not fit the tool's schema (the boundary maps it to EXECUTION_FAILED)."""


def utf8_size(text: str) -> int:
    """UTF-8 byte length of ``text``."""
    return len(text.encode("utf-8", "surrogatepass"))


def reject_unknown(arguments: Mapping[str, Any], allowed: set[str]) -> None:
    """Raise :class:`ToolArgumentError` if ``arguments`` has a key outside ``allowed``.

    A misspelt filter must not silently widen a search.
    """
    unknown = set(arguments) - allowed
    if unknown:
        raise ToolArgumentError("unknown argument")


def required_str(arguments: Mapping[str, Any], name: str) -> str:
    """The string argument ``name``; :class:`ToolArgumentError` if absent or not a string."""
    value = arguments.get(name)
    if not isinstance(value, str):
        raise ToolArgumentError(f"{name} must be a string")
    return value


def optional_str(arguments: Mapping[str, Any], name: str) -> str | None:
    """The string argument ``name`` or None if absent/null; other types raise."""
    value = arguments.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ToolArgumentError(f"{name} must be a string")
    return value


def optional_bool(arguments: Mapping[str, Any], name: str, default: bool) -> bool:
    """The boolean argument ``name`` (only a JSON boolean; ``"true"`` raises)."""
    value = arguments.get(name, default)
    if not isinstance(value, bool):
        raise ToolArgumentError(f"{name} must be a boolean")
    return value


def optional_int(arguments: Mapping[str, Any], name: str, default: int, low: int, high: int) -> int:
    """The integer argument ``name`` within ``[low, high]`` (booleans are not integers)."""
    value = arguments.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ToolArgumentError(f"{name} must be an integer in [{low}, {high}]")
    return value


def dump_raw(value: object) -> str:
    """Compact, sorted, strict JSON text of ``value`` (the tools' raw response format)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True, allow_nan=False)


def load_raw(raw: str) -> dict[str, Any]:
    """Parse a raw response written by :func:`dump_raw`; ``ValueError`` if it is not an object."""
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise ValueError("raw response is not a JSON object")
    return value


def clip(text: str, limit: int = EXCERPT_CHARS) -> str:
    """``text`` if at most ``limit`` characters, else its first ones and an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def quote(text: str, limit: int = EXCERPT_CHARS) -> str:
    """``text`` as a JSON string literal, clipped (with its length noted) past ``limit`` characters."""
    if len(text) <= limit:
        return json.dumps(text, ensure_ascii=False)
    return json.dumps(clip(text, limit), ensure_ascii=False) + f" ({len(text)} chars)"


def bounded_summary(head: str, items: Sequence[str], scope: str, budget: int) -> str:
    """``head`` then as many ``items`` lines as fit, then ``(+N more not shown)``.

    The result plus ``scope`` stays within ``budget`` UTF-8 bytes whenever ``head``,
    ``scope`` and 40 bytes of slack do; items are added in order and never cut in the middle (each
    is already a short excerpt). If even ``head`` does not fit, ``head`` is returned
    alone and the kernel's agent-result limit decides (RESULT_TOO_LARGE).
    """
    lines = [head]
    used = utf8_size(head) + utf8_size(scope)
    shown = 0
    for index, item in enumerate(items):
        size = utf8_size(item) + 1
        reserve = 0 if index == len(items) - 1 else _MORE_RESERVE
        if used + size + reserve > budget:
            break
        lines.append(item)
        used += size
        shown += 1
    if shown < len(items):
        lines.append(f"(+{len(items) - shown} more not shown)")
    return "\n".join(lines)
