"""The vector generators are case tables over one fixtures module, with no import cycle.

The modules ``invocation_store/oracle/_vectors*.py`` import each other as a tree
(fixtures, then outcomes, then one module of cases per family of rules, then the
assembly), share only public names, and keep each function short: the cases are
data rows, not code.
"""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

ORACLE = Path(__file__).resolve().parents[2] / "invocation_store" / "oracle"
#: A function longer than this is data written as code: make it a table.
MAX_FUNCTION_LINES = 80


def _modules() -> dict[str, ast.Module]:
    return {
        path.stem: ast.parse(path.read_text(encoding="utf-8")) for path in sorted(ORACLE.glob("_vectors*.py"))
    }


def _imports(tree: ast.Module) -> list[tuple[str, list[str]]]:
    """(module, names) of every ``from ._vectors... import`` in ``tree``, wherever it is."""
    return [
        (node.module, [alias.name for alias in node.names])
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and node.level == 1
        and node.module
        and node.module.startswith("_vectors")
    ]


def test_vector_modules_import_as_a_tree() -> None:
    """CIS-SPEC-3: no import cycle among the vector modules, and the fixtures module imports none."""
    modules = _modules()
    graph = {name: {module for module, _names in _imports(tree)} for name, tree in modules.items()}
    assert graph["_vectors_fixtures"] == set()
    assert {"_vectors", "_vectors_fixtures", "_vectors_outcomes"} <= set(graph)
    try:
        order = list(TopologicalSorter(graph).static_order())
    except CycleError as cycle:  # pragma: no cover - the failure message
        raise AssertionError(f"import cycle among the vector modules: {cycle.args[1]}") from None
    assert order[0] == "_vectors_fixtures"
    assert order[-1] == "_vectors"


def test_vector_modules_share_only_public_names() -> None:
    """CIS-SPEC-3: one vector module never reaches into another's private names."""
    private = [
        f"{name} imports {module}.{imported}"
        for name, tree in _modules().items()
        for module, names in _imports(tree)
        for imported in names
        if imported.startswith("_")
    ]
    assert private == []


def test_vector_builders_are_short() -> None:
    """CIS-SPEC-3: every function of the vector modules is under MAX_FUNCTION_LINES lines."""
    long = [
        f"{name}.{node.name}: {node.end_lineno - node.lineno + 1} lines"
        for name, tree in _modules().items()
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.end_lineno is not None
        if node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert long == []


def test_the_guard_sees_a_cycle_and_a_private_import() -> None:
    """CIS-SPEC-3: the checks above fail on a cycle and on a private name (they can fail)."""
    tree = ast.parse("from ._vectors_b import _secret\n")
    assert _imports(tree) == [("_vectors_b", ["_secret"])]
    graph = {"_vectors_a": {"_vectors_b"}, "_vectors_b": {"_vectors_a"}}
    try:
        list(TopologicalSorter(graph).static_order())
    except CycleError:
        return
    raise AssertionError("a cycle was not seen")
