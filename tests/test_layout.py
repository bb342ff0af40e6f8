"""The layout shows the architecture: no module grows past ~600 lines without a reason.

A module over :data:`LIMIT` lines must say why in its docstring (a paragraph starting
``Size:``); anything else is a sign that a module holds more than one concern.
"""

from __future__ import annotations

import ast
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
