"""Every cause label a store can name is in docs/stores.md, and every label there is one a store names.

The labels reach operators (``StoreUnavailableError.cause``, the stores' log lines), so
each is fixed text: a label changed in one raise site (its case, its spelling) no longer
matches the table and fails here. Found in the adapters' sources: the first argument of
each ``CorruptReplyError(...)`` and ``StoreUnavailableError(...)``, the scripts'
``CORRUPT <label>`` answers, and the label ``corrupt_cause`` gives a ``WRONGTYPE`` reply.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ADAPTERS = ROOT / "invocation_store" / "adapters"
RAISED = {"CorruptReplyError", "StoreUnavailableError"}


def _called(node: ast.Call) -> str | None:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def labels_in_code() -> set[str]:
    """The labels the adapters' sources can produce."""
    found: set[str] = set()
    for path in sorted(ADAPTERS.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _called(node) in RAISED and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    found.add(first.value)
            if isinstance(node, ast.FunctionDef) and node.name == "corrupt_cause":
                found.update(
                    ret.value.value
                    for ret in ast.walk(node)
                    if isinstance(ret, ast.Return)
                    and isinstance(ret.value, ast.Constant)
                    and isinstance(ret.value.value, str)
                )
    scripts = (ADAPTERS / "_redis_scripts.py").read_text(encoding="utf-8")
    found.update(re.findall(r"CORRUPT ([A-Za-z]+)", scripts))
    return found


def labels_documented() -> set[str]:
    text = (ROOT / "docs" / "stores.md").read_text(encoding="utf-8")
    section = text.split("## Cause labels in a store's errors and logs", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([A-Za-z]+)` \|", section, re.MULTILINE))


def test_every_cause_label_is_documented_and_every_documented_one_is_named() -> None:
    """CIS-FAIL-5, CIS-DUR-7: the code's labels and the operators' table are the same set."""
    documented = labels_documented()
    assert len(documented) >= 15  # the table was found and read
    assert labels_in_code() == documented
