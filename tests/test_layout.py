"""The layout shows the architecture: layers without cycles, modules of a readable size.

A module over :data:`LIMIT` lines must say why in its docstring (a paragraph starting
``Size:``); anything else is a sign that a module holds more than one concern. The
import graph (every import: module level, ``TYPE_CHECKING``, inside functions) has no
cycle between modules, the package's top-level parts stack in layers with the kernel at
the bottom, and only the kernel imports the kernel's private modules.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "invocation_store"
LIMIT = 600


def _large_modules() -> list[Path]:
    return sorted(
        path for path in PACKAGE.rglob("*.py") if len(path.read_text(encoding="utf-8").splitlines()) > LIMIT
    )


@pytest.mark.parametrize("path", _large_modules(), ids=lambda path: path.relative_to(PACKAGE).as_posix())
def test_a_large_module_says_why(path: Path) -> None:
    """CIS-KERN-1: every module over 600 lines gives the reason for its size in its docstring."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    assert "\nSize:" in doc or doc.startswith("Size:"), f"{path.name}: split it or say why ('Size:')"


# -- the import graph ------------------------------------------------------------------------


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, set[str]]:
    """Every module of the package -> the package's modules it imports: at module level, under
    ``TYPE_CHECKING`` or inside a function alike (an import names the longest module it reaches)."""
    modules = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    parts = parts[: len(parts) - node.level + 1]
                    base = ".".join([*parts, *([node.module] if node.module else [])])
                targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            for wanted in targets:
                target = wanted
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    found.add(target)
        graph[name] = found
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycle_between_modules() -> None:
    """CIS-KERN-1: no two modules import each other, directly or through others (type-only imports,
    imports inside functions and a package importing its own modules count; a module importing its own
    package, which is already being imported, does not)."""
    graph = {
        name: {t for t in targets if not name.startswith(f"{t}.")} for name, targets in _imports().items()
    }
    assert _cycles(graph) == []


def test_the_packages_form_layers() -> None:
    """CIS-KERN-1: the package's top-level parts (kernel, adapters, boundary, ...) import each other
    without a cycle, so they stack in layers and nothing imports a layer above its own."""

    def unit(name: str) -> str:
        return ".".join(name.split(".")[:2])

    layers: dict[str, set[str]] = {}
    for name, targets in _imports().items():
        if name == "invocation_store":
            continue  # the package's face re-exports every layer
        layers.setdefault(unit(name), set()).update(
            unit(t) for t in targets if t != "invocation_store" and unit(t) != unit(name)
        )
    assert _cycles(layers) == []
    assert layers["invocation_store.kernel"] == set(), "the kernel is the ground floor: it imports nothing"


def test_only_the_kernel_imports_its_private_modules() -> None:
    """CIS-KERN-1: outside the kernel, code imports the kernel's package (its public names), never one of
    its private modules (``kernel._preflight``, ...)."""
    offenders = {
        name: sorted(t for t in targets if t.startswith("invocation_store.kernel._"))
        for name, targets in _imports().items()
        if not name.startswith("invocation_store.kernel")
    }
    assert {name: found for name, found in offenders.items() if found} == {}


_TAG = re.compile(r"\bCIS-[A-Z]+-\d+")


def _body_comment_tags(text: str) -> list[int]:
    """Lines of ``#`` comments (not ``#:`` attribute docs) inside function bodies that cite a requirement."""
    tree = ast.parse(text)
    bodies = [
        (node.body[0].lineno, node.end_lineno or node.lineno)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]
    return [
        token.start[0]
        for token in tokenize.generate_tokens(io.StringIO(text).readline)
        if token.type == tokenize.COMMENT
        and not token.string.startswith("#:")
        and _TAG.search(token.string)
        and any(first <= token.start[0] <= last for first, last in bodies)
    ]


def test_requirement_tags_sit_at_definitions() -> None:
    """CIS-SPEC-1: a requirement is cited in the docstring of the function, class or rule that
    implements it, not in comments inside function bodies (one tag per definition, not per line)."""
    found = {
        path.relative_to(PACKAGE).as_posix(): lines
        for path in sorted(PACKAGE.rglob("*.py"))
        if (lines := _body_comment_tags(path.read_text(encoding="utf-8")))
    }
    assert found == {}, "move these tags into the enclosing docstring"


def test_the_tag_guard_sees_a_tag_in_a_body_comment() -> None:
    """CIS-SPEC-1: the guard above finds a tag in a body comment, and leaves docstrings and ``#:`` alone."""
    source = (
        'def f():\n    """Doc (CIS-ID-1)."""\n    x = 1  # CIS-ID-2\n    return x\n'
        "\n#: A (CIS-ID-3).\nA = 1\n"
    )
    assert _body_comment_tags(source) == [3]
