"""The boundary's place in the house: no import cycle through it, nothing below it imports it (issue 24).

The graph is read from the source (every ``import``, also those under
``TYPE_CHECKING`` and inside functions), so a type-only import counts: it is still a
module naming one above it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "invocation_store"
BOUNDARY = "invocation_store.boundary"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in PACKAGE.rglob("*.py")}


def _imports(name: str, path: Path, known: dict[str, Path]) -> Iterator[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            target = (f"{base}.{node.module}" if node.module else base) if node.level else (node.module or "")
            for alias in node.names:
                submodule = f"{target}.{alias.name}"
                if submodule in known:
                    yield submodule
                elif target in known:
                    yield target


def graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports."""
    known = _modules()
    return {name: {dep for dep in _imports(name, path, known) if dep != name} for name, path in known.items()}


def _closure(edges: dict[str, set[str]], start: set[str]) -> set[str]:
    seen: set[str] = set()
    todo = list(start)
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(edges.get(name, ()))
    return seen


def _in_boundary(name: str) -> bool:
    return name == BOUNDARY or name.startswith(BOUNDARY + ".")


def test_nothing_the_boundary_builds_on_imports_it() -> None:
    """CIS-KERN-1: every module the boundary imports, directly or not, is below it: none imports the
    boundary back (the telemetry decorators live in ``boundary/``, not one floor lower)."""
    edges = graph()
    boundary = {name for name in edges if _in_boundary(name)}
    below = _closure(edges, {dep for name in boundary for dep in edges[name]}) - boundary
    assert "invocation_store.kernel" in below
    upward = sorted(f"{name} -> {dep}" for name in below for dep in edges[name] if _in_boundary(dep))
    assert upward == []


def test_no_import_cycle_runs_through_the_boundary() -> None:
    """CIS-KERN-1: the boundary's modules import each other without a cycle (the package face aside):
    one call reads top to bottom, pipeline over state over edge."""
    edges = graph()
    inside = {
        name: {dep for dep in deps if _in_boundary(dep) and dep != BOUNDARY} for name, deps in edges.items()
    }
    modules = {name for name in inside if _in_boundary(name) and name != BOUNDARY}
    cycles = sorted(name for name in modules if name in _closure(inside, set(inside[name])))
    assert cycles == []
    pipeline = f"{BOUNDARY}._async.pipeline"
    assert f"{BOUNDARY}._core" in edges[pipeline]
    assert pipeline in edges[f"{BOUNDARY}._async.boundary"]
