"""The README's "Harness integrations" section: one runnable example per SDK and framework.

``tests/test_readme.py`` runs every ```python block; this checks the section's shape.
"""

from __future__ import annotations

import re
from pathlib import Path

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")

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
    """CIS-ECO-1, CIS-ECO-3, CIS-ECO-4: a subsection with a ```python block for each, right after Usage."""
    headings = re.findall(r"^## (.+)$", README, re.MULTILINE)
    assert headings[headings.index("Usage") + 1] == "Harness integrations"
    section = README.split("## Harness integrations\n", 1)[1].split("\n## ", 1)[0]
    parts = dict(re.findall(r"^### (.+?)\n(.*?)(?=^### |\Z)", section, re.MULTILINE | re.DOTALL))
    for name in SUBSECTIONS:
        assert "```python\n" in parts[name], name
