"""The README's example of verifying a third-party store runs as written (CIS-STATE-1)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

README = Path(__file__).with_name("README.md")


def _first_python_block() -> str:
    match = re.search(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)
    assert match is not None, "stateful_tests/README.md has no python example"
    return match.group(1)


def test_readme_example_verifies_a_store() -> None:
    """CIS-STATE-1, CIS-STORE-8: the documented third-party example runs its machines and passes."""
    namespace: dict[str, Any] = {"__name__": "readme_example"}
    exec(compile(_first_python_block(), str(README), "exec"), namespace)
    tests = [value for name, value in namespace.items() if name.startswith("test_") and callable(value)]
    assert len(tests) == 2
    for test in tests:
        test()
