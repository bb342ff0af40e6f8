"""docs/integrations.md: one runnable example per SDK and framework.

``tests/test_readme.py`` runs every ```python block; this checks the guide's shape.
"""

from __future__ import annotations

import re
from pathlib import Path

GUIDE = (Path(__file__).resolve().parent.parent / "docs" / "integrations.md").read_text(encoding="utf-8")

SUBSECTIONS = (
    "OpenAI Chat Completions",
    "OpenAI Responses",
    "Anthropic Messages",
    "Google Gemini",
    "OpenAI Agents SDK",
    "LangChain",
    "pydantic-ai",
    "MCP",
    "LiteLLM",
)


def test_each_sdk_and_framework_has_a_runnable_example() -> None:
    """CIS-ECO-1, CIS-ECO-3, CIS-ECO-4: a section with a ```python block for each SDK and framework."""
    parts = dict(re.findall(r"^## (.+?)\n(.*?)(?=^## |\Z)", GUIDE, re.MULTILINE | re.DOTALL))
    for name in SUBSECTIONS:
        assert "```python\n" in parts[name], f"docs/integrations.md: {name!r} needs a ```python example"
