"""The tool registry: each tool registered once, with its policy (CIS-BND-3, CIS-BND-5).

A harness registers its tools once, as :class:`ToolSpec` values in a
:class:`ToolRegistry`. Preflight reads the kernel's view of a spec
(:attr:`ToolSpec.policy`); :func:`vetted` caches that view and whether the spec's
callables are async, once per spec (specs are frozen).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Final, TypeAlias

from attrs import field, frozen

from .._runners import is_async_callable
from ..kernel import MAX_SAFE_INT, Projection, ToolPolicy
from ._edge import exact_text, is_int_in

__all__ = [
    "AsyncExecutor",
    "AsyncProjector",
    "Executor",
    "Projector",
    "ToolRegistry",
    "ToolSpec",
    "vetted",
]

#: A sync executor: parsed arguments (a JSON object) -> raw response. A ``str`` is
#: stored as-is; any other value is serialized as compact sorted JSON, and a value
#: that cannot be is SERIALIZATION_FAILED (CIS-FAIL-4).
Executor: TypeAlias = Callable[[Mapping[str, Any]], object]
#: An async executor, same contract.
AsyncExecutor: TypeAlias = Callable[[Mapping[str, Any]], Awaitable[object]]
#: A sync projector: (raw response text, parsed arguments) -> Projection (CIS-EVID-2).
Projector: TypeAlias = Callable[[str, Mapping[str, Any]], Projection]
#: An async projector, same contract.
AsyncProjector: TypeAlias = Callable[[str, Mapping[str, Any]], Awaitable[Projection]]


def _positive_int(_inst: object, _attribute: object, value: int | None) -> None:
    if value is not None and not is_int_in(value, 1):
        raise ValueError("timeout_ms must be None or an int in [1, 2**53 - 1] (milliseconds)")


def _callable(_inst: object, attribute: Any, value: Any) -> None:
    if not callable(value):
        raise TypeError(f"{attribute.name} must be callable")


@frozen(kw_only=True)
class ToolSpec:
    """A tool registered once with a harness (CIS-BND-3, CIS-BND-5).

    - ``name``: the name the model calls the tool by (the envelope's ``tool_name``).
    - ``executor``: runs the tool; sync or async callable (a function or an object
      with ``__call__``): parsed arguments -> raw response (see :data:`Executor`).
    - ``projector``: turns the raw response text and the parsed arguments into a
      bounded :class:`~invocation_store.kernel.Projection` (see :data:`Projector`).
    - ``authorized`` / ``read_only``: only the literal ``True`` passes preflight;
      anything else fails closed as UNAUTHORIZED / NOT_READ_ONLY (CIS-PRE-4..6).
    - ``timeout_ms``: the executor's time limit in ms (default 30 s); over it the
      call is EXECUTION_TIMEOUT (CIS-FAIL-3); at most ``2**53 - 1``. ``None``
      declares no limit: the sync boundary then runs the executor inline, in the
      calling thread, with no hand-over at all (CIS-PERF-1); the kernel's
      :class:`~invocation_store.kernel.ToolPolicy` records it as ``2**53 - 1``.

    A ``str`` subclass given as ``name`` is stored as an exact ``str`` copy. The
    async boundary accepts sync and async callables; the sync boundary only sync
    ones. Construction raises ``ValueError`` for a timeout out of range and
    ``TypeError`` for a non-callable executor or projector.
    """

    name: str = field(converter=exact_text)
    executor: Executor | AsyncExecutor = field(validator=_callable)
    projector: Projector | AsyncProjector = field(validator=_callable)
    authorized: bool = True
    read_only: bool = True
    timeout_ms: int | None = field(default=30_000, validator=_positive_int)

    @property
    def policy(self) -> ToolPolicy:
        """The kernel's view of this tool (CIS-PRE-5, CIS-PRE-6)."""
        timeout_ms = MAX_SAFE_INT if self.timeout_ms is None else self.timeout_ms
        return ToolPolicy(
            name=self.name, authorized=self.authorized, read_only=self.read_only, timeout_ms=timeout_ms
        )


class ToolRegistry:
    """Tools by name, registered once (CIS-BND-3).

    ``register`` raises ``ValueError`` for a name registered twice (a second
    registration never silently replaces the first) and ``TypeError`` for a
    non-:class:`ToolSpec`. Lookups of unknown or non-string names return None, which
    preflight answers with UNAUTHORIZED (CIS-PRE-5).
    """

    def __init__(self, tools: Iterable[ToolSpec] | None = None) -> None:
        self._tools: dict[str, ToolSpec] = {}
        for tool in tools or ():
            self.register(tool)

    def register(self, tool: ToolSpec) -> ToolSpec:
        """Add ``tool``; returns it."""
        if not isinstance(tool, ToolSpec):
            raise TypeError("register takes a ToolSpec")
        if tool.name in self._tools:
            raise ValueError("tool already registered")
        self._tools[tool.name] = tool
        return tool

    def get(self, name: object) -> ToolSpec | None:
        """The tool named ``name``, or None (unknown tools are UNAUTHORIZED)."""
        return self._tools.get(name) if isinstance(name, str) else None

    def names(self) -> tuple[str, ...]:
        """Registered names, in registration order."""
        return tuple(self._tools)

    def __contains__(self, name: object) -> bool:
        return self.get(name) is not None

    def __len__(self) -> int:
        return len(self._tools)


#: What each ToolSpec seen declares, computed once per spec (specs are frozen): its
#: kernel policy and whether a callable is async. Keyed by ``id``, the spec itself
#: kept in the value so that the id stays its own; bounded (cleared when full).
_VETTED: Final[dict[int, tuple[ToolSpec, ToolPolicy, bool]]] = {}


def vetted(tool: ToolSpec) -> tuple[ToolPolicy, bool]:
    """``(tool.policy, is any of its callables async)``, cached per spec."""
    entry = _VETTED.get(id(tool))
    if entry is None or entry[0] is not tool:
        if len(_VETTED) >= 4096:
            _VETTED.clear()
        entry = (tool, tool.policy, is_async_callable(tool.executor) or is_async_callable(tool.projector))
        _VETTED[id(tool)] = entry
    return entry[1], entry[2]
