"""docs/integrations.md's framework examples (```py blocks) run as written with the real frameworks.

CIS-ECO-4.

``tests/test_readme.py`` runs the ```python blocks in the ``dev`` environment; the
Google ADK, AutoGen, AG2 and LlamaIndex examples need this environment's packages,
so they are fenced ```py and run here.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

GUIDE = (Path(__file__).resolve().parents[3] / "docs" / "integrations.md").read_text(encoding="utf-8")
BLOCKS = {
    heading: block
    for heading, section in re.findall(r"^## (.+?)\n(.*?)(?=^## |\Z)", GUIDE, re.MULTILINE | re.DOTALL)
    for block in re.findall(r"```py\n(.*?)```", section, re.DOTALL)
}


def test_each_framework_with_an_adapter_has_an_example() -> None:
    """CIS-ECO-4: one ```py example per adapter tested here."""
    assert sorted(BLOCKS) == ["AG2", "AutoGen", "Google ADK", "LlamaIndex"]


@pytest.mark.parametrize("heading", sorted(BLOCKS))
def test_the_example_runs(heading: str) -> None:
    """CIS-ECO-4: the example runs, its asserts hold, and what it prints holds no raw payload."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = compile(BLOCKS[heading], f"docs/integrations.md ({heading})", "exec")
        exec(code, {"__name__": "readme_example"})
    assert printed.getvalue()
