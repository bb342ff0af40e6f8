"""The kernel is pure (CIS-KERN-1) and its error vocabulary is closed and payload-free (CIS-ERR-1).

Purity is checked on the source (an AST walk over every kernel module) and at run time
(importing the kernel in a fresh interpreter loads neither redis, cattrs nor the
adapters).
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import tokenize
import typing
from pathlib import Path

import attrs
import pytest

import invocation_store.kernel as kernel
from invocation_store.kernel import ERROR_MESSAGES, ErrorCode

KERNEL_DIR = Path(kernel.__file__).resolve().parent
MODULES = sorted(KERNEL_DIR.glob("*.py"))

#: Third-party distributions the kernel may import.
ALLOWED_THIRD_PARTY = {"attrs", "attr"}
#: Standard-library modules that would bring I/O, clocks, randomness, logging or
#: process state into the kernel.
FORBIDDEN_STDLIB = {
    "asyncio",
    "datetime",
    "io",
    "logging",
    "os",
    "pathlib",
    "random",
    "secrets",
    "select",
    "selectors",
    "shutil",
    "signal",
    "socket",
    "ssl",
    "subprocess",
    "sys",
    "tempfile",
    "threading",
    "time",
    "urllib",
    "uuid",
    "warnings",
    "importlib",
    "pickle",
}
#: Builtins that do I/O or dynamic imports.
FORBIDDEN_CALLS = {"open", "print", "input", "__import__", "exec", "eval", "compile", "breakpoint"}


def _imports(tree: ast.AST) -> list[str]:
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


@pytest.mark.parametrize("path", MODULES, ids=lambda path: path.name)
def test_kernel_imports_only_stdlib_and_attrs(path: Path) -> None:
    """CIS-KERN-1: kernel modules import stdlib (minus I/O, clock, random, logging) and attrs only."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for name in _imports(tree):
        top = name.split(".")[0]
        assert top in sys.stdlib_module_names or top in ALLOWED_THIRD_PARTY, f"{path.name} imports {name}"
        assert top not in FORBIDDEN_STDLIB, f"{path.name} imports {name}"
        assert top not in {"redis", "cattrs", "invocation_store"}, f"{path.name} imports {name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level > 0:
            assert node.level == 1, f"{path.name} reaches outside the kernel: {'.' * node.level}{node.module}"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            assert node.func.id not in FORBIDDEN_CALLS, f"{path.name} calls {node.func.id}()"


_ISOLATED_IMPORT = """
import json, sys, types
before = set(sys.modules)
parent = types.ModuleType("invocation_store")
parent.__path__ = [sys.argv[1]]
sys.modules["invocation_store"] = parent
import invocation_store.kernel
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def test_importing_the_kernel_loads_no_adapter_redis_or_cattrs() -> None:
    """CIS-KERN-1: the kernel's own import graph holds no redis, cattrs, adapters, logging, socket or random.

    The kernel is imported in a fresh interpreter under a bare parent package, so what
    is measured is what the kernel itself pulls in, not what the top-level
    ``invocation_store/__init__.py`` re-exports for convenience.
    """
    package_dir = str(KERNEL_DIR.parent)
    completed = subprocess.run(
        [sys.executable, "-c", _ISOLATED_IMPORT, package_dir], capture_output=True, check=True, text=True
    )
    loaded = set(json.loads(completed.stdout))
    assert "invocation_store.kernel._state" in loaded
    forbidden_roots = {
        "redis",
        "cattrs",
        "logging",
        "socket",
        "random",
        "secrets",
        "asyncio",
        "subprocess",
        "ssl",
    }
    offending = {
        name
        for name in loaded
        if name.split(".")[0] in forbidden_roots
        or (name.startswith("invocation_store.") and not name.startswith("invocation_store.kernel"))
    }
    assert offending == set()
    third_party = (
        {name.split(".")[0] for name in loaded} - set(sys.stdlib_module_names) - {"invocation_store"}
    )
    assert third_party <= ALLOWED_THIRD_PARTY


def test_kernel_values_are_frozen_attrs_classes() -> None:
    """CIS-KERN-1: every attrs class the kernel exports is frozen; evolve makes new values."""
    classes = [getattr(kernel, name) for name in kernel.__all__]
    attrs_classes = [cls for cls in classes if isinstance(cls, type) and attrs.has(cls)]
    assert len(attrs_classes) >= 15
    for cls in attrs_classes:
        source_frozen = cls.__setattr__ is not object.__setattr__
        assert source_frozen, f"{cls.__name__} is not frozen"
    record = kernel.ToolCallEnvelope(run_id="r", tool_call_id="c", tool_name="t", arguments="{}")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        record.tool_call_id = "other"  # type: ignore[misc]


def test_kernel_events_are_the_event_alias() -> None:
    """CIS-KERN-1, CIS-LIFE-1: the Event alias names exactly the five frozen event classes."""
    events = typing.get_args(kernel.Event)
    assert {cls.__name__ for cls in events} == {
        "Begin",
        "RawReceived",
        "ProjectionReceived",
        "Failed",
        "SweptStale",
    }
    for cls in events:
        assert attrs.has(cls)
        assert all(field.kw_only for field in attrs.fields(cls))


# -- error vocabulary -------------------------------------------------------------------

_PLACEHOLDER = re.compile(r"\{[^}]*\}|%[sdrif(]|\$\{|<[a-z_]+>")


def test_every_error_code_has_a_fixed_safe_message() -> None:
    """CIS-ERR-1: each code has one short, fixed message with no format placeholders or payload slots."""
    assert set(ERROR_MESSAGES) == set(ErrorCode)
    for code, message in ERROR_MESSAGES.items():
        assert code.value == code.name
        assert message.strip() == message
        assert message.endswith(".")
        assert 10 <= len(message) <= 80, code
        assert message.isascii(), code
        assert message.isprintable(), code
        assert _PLACEHOLDER.search(message) is None, code
        assert "Traceback" not in message, code
        assert "redis" not in message.lower(), code
    assert len(set(ERROR_MESSAGES.values())) == len(ERROR_MESSAGES)


def test_every_error_code_member_has_a_doc_comment() -> None:
    """CIS-ERR-1: the closed ErrorCode set documents each member with a preceding '#:' comment."""
    path = KERNEL_DIR / "_codes.py"
    with path.open("rb") as handle:
        tokens = list(tokenize.tokenize(handle.readline))
    lines = path.read_text(encoding="utf-8").splitlines()
    for code in ErrorCode:
        (index,) = [i for i, line in enumerate(lines) if line.strip().startswith(f"{code.name} = ")]
        assert lines[index - 1].strip().startswith("#: "), code
    assert any(token.type == tokenize.COMMENT and token.string.startswith("#:") for token in tokens)
