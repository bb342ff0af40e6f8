"""The README stays true: its test command is what CI runs, its examples run."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from invocation_store.kernel import PREFLIGHT_ORDER

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _first_screen_commands() -> list[str]:
    block = re.search(r"```bash\n(.*?)```", README, re.DOTALL)
    assert block is not None, "the README's first screen must open with a bash block"
    return [line for line in block.group(1).splitlines() if line and not line.startswith("#")]


def test_first_screen_has_setup_and_test_commands() -> None:
    """CIS-SPEC-1: the first screen gives exactly two commands, and CI runs the second."""
    commands = _first_screen_commands()
    assert len(commands) == 2
    assert README.index("```bash") < 600, "the commands must be on the first screen"
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert commands[1] in ci.splitlines(), ".ci/run must run the README's test command verbatim"
    assert "pip install" in commands[0]
    assert "invocation-store replay" in commands[0]


def test_replay_example_named_by_readme_exists() -> None:
    """CIS-SPEC-1: the transcript the quick start replays is shipped."""
    match = re.search(r"invocation-store replay (\S+)", _first_screen_commands()[0])
    assert match is not None
    assert (ROOT / match.group(1)).is_file()


def test_python_examples_run() -> None:
    """CIS-BND-1, CIS-ID-5: every ```python block of the README runs as written.

    Snippets that need a server you run (the Redis one) are fenced ```py instead.
    """
    blocks = re.findall(r"```python\n(.*?)```", README, re.DOTALL)
    assert blocks, "the README has usage examples"
    for block in blocks:
        result = subprocess.run(
            [sys.executable, "-c", block], capture_output=True, text=True, timeout=120, cwd=ROOT, check=False
        )
        assert result.returncode == 0, result.stderr[-2000:]


def test_errors_table_lists_the_preflight_order() -> None:
    """CIS-PRE-2: the README's preflight row names the kernel's PREFLIGHT_ORDER, in order."""
    row = next(line for line in README.splitlines() if line.startswith("| preflight"))
    listed = re.findall(r"`([A-Z_]+)`", row)
    assert listed == [code.value for code in PREFLIGHT_ORDER]
