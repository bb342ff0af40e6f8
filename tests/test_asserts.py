"""No test asserts what a type already guarantees: ``assert f(...) is not None`` on a non-optional return.

Such an assert cannot fail, so it checks nothing (issue 23): a test must assert the value
the call returns. The non-optional callables are derived from the annotations of the
store Protocols, the stores, the boundaries and the kernel's public functions, so a new
method is covered without editing this test.
"""

from __future__ import annotations

import ast
import inspect
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from invocation_store import AsyncMemoryStore, AsyncToolBoundary, MemoryStore, ToolBoundary, kernel
from invocation_store.adapters import AsyncInvocationStore, InvocationStore

ROOT = Path(__file__).resolve().parents[1]
TEST_TREES = ("tests", "stateful_tests")


def _may_be_none(hint: Any) -> bool:
    if hint is None or hint is type(None) or hint is Any or hint is object:
        return True
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        return any(_may_be_none(arg) for arg in typing.get_args(hint))
    return False


def _callables() -> Iterator[tuple[str, Any]]:
    for owner in (
        InvocationStore,
        AsyncInvocationStore,
        MemoryStore,
        AsyncMemoryStore,
        ToolBoundary,
        AsyncToolBoundary,
    ):
        for name, member in vars(owner).items():
            if not name.startswith("_") and inspect.isfunction(member):
                yield name, member
    for name in kernel.__all__:
        member = getattr(kernel, name)
        if inspect.isfunction(member):
            yield name, member


def non_optional() -> frozenset[str]:
    """Names whose every definition above is annotated with a return that excludes None."""
    never_none: set[str] = set()
    maybe_none: set[str] = set()
    for name, function in _callables():
        # kernel names complete annotations some modules import only for type checking
        hints = typing.get_type_hints(function, globalns={**vars(kernel), **function.__globals__})
        if "return" not in hints or _may_be_none(hints["return"]):
            maybe_none.add(name)
        else:
            never_none.add(name)
    return frozenset(never_none - maybe_none)


def _called_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Await):
        node = node.value
    if not isinstance(node, ast.Call):
        return None
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    return node.func.id if isinstance(node.func, ast.Name) else None


def vacuous_asserts(source: str, names: frozenset[str]) -> list[tuple[int, str]]:
    """(line, name) of every ``assert <call of a non-optional name> is not None`` in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Assert) or not isinstance(node.test, ast.Compare):
            continue
        compare = node.test
        operands = [compare.left, *compare.comparators]
        for index, operator in enumerate(compare.ops):
            right = operands[index + 1]
            if isinstance(operator, ast.IsNot) and isinstance(right, ast.Constant) and right.value is None:
                name = _called_name(operands[index])
                if name in names:
                    found.append((node.lineno, name))
    return found


def test_the_derived_list_holds_the_store_and_boundary_operations() -> None:
    """CIS-STATE-2: the check knows the operations whose returns cannot be None, not the reads that can."""
    names = non_optional()
    assert {
        "create",
        "complete",
        "cancel_run",
        "close_run",
        "open_run",
        "invoke",
        "admit",
        "transition",
    } <= names
    assert not {"get", "get_run", "ttl_remaining_ms"} & names


def test_the_check_finds_an_assert_that_cannot_fail() -> None:
    """CIS-STATE-2: the check itself: the asserts issue 23 named are found, real checks are not."""
    names = non_optional()
    source = (
        "async def f(store, run):\n"
        "    assert await store.cancel_run(run) is not None\n"
        "    assert store.complete(a, b) is not None, 'x'\n"
        "    assert store.get(run, 'c') is not None\n"
        "    assert await store.cancel_run(run) == expected\n"
    )
    assert vacuous_asserts(source, names) == [(2, "cancel_run"), (3, "complete")]


def test_no_test_asserts_a_non_optional_return_is_not_none() -> None:
    """CIS-STATE-2: no test here asserts ``is not None`` on a call whose type excludes None."""
    names = non_optional()
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {name}(...) is never None; assert its value"
        for tree in TEST_TREES
        for path in sorted((ROOT / tree).rglob("*.py"))
        for line, name in vacuous_asserts(path.read_text(encoding="utf-8"), names)
    ]
    assert offenders == []
