"""The README's examples run as written (CIS-STATE-1, CIS-STATE-2).

Every ```python block of stateful_tests/README.md runs on its own, in a fresh
namespace (so a block that leans on an earlier one's imports fails here), and every
``test_*`` function it defines is called. The fuzz sample output is what the command
prints today.
"""

from __future__ import annotations

import re
import shutil
import textwrap
from pathlib import Path
from typing import Any

import pytest

from invocation_store.cli import main

README = Path(__file__).with_name("README.md")

#: A fenced python block, also when indented under a list item.
_PYTHON_BLOCK = re.compile(r"^( *)```python\n(.*?)^\1```", re.DOTALL | re.MULTILINE)


def python_blocks() -> list[str]:
    """The README's python blocks, dedented, in order."""
    text = README.read_text(encoding="utf-8")
    return [textwrap.dedent(match.group(2)) for match in _PYTHON_BLOCK.finditer(text)]


def test_readme_has_the_python_blocks() -> None:
    """CIS-STATE-1: the README shows the memory example and the Redis example (the parser finds both)."""
    blocks = python_blocks()
    assert len(blocks) == 2
    assert "MyStoreVsReference" in blocks[0]
    assert "redis_server()" in blocks[1]


@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_readme_block_runs_on_its_own(index: int) -> None:
    """CIS-STATE-1, CIS-STORE-8: each documented example runs alone and its test functions pass."""
    block = python_blocks()[index]
    if "redis_server()" in block and shutil.which("redis-server") is None:
        pytest.skip("no redis-server binary on PATH for the README's Redis example")
    namespace: dict[str, Any] = {"__name__": f"readme_example_{index}"}
    exec(compile(block, f"{README}:block{index}", "exec"), namespace)
    tests = [value for name, value in namespace.items() if name.startswith("test_") and callable(value)]
    assert tests, f"python block {index} of the README defines no test_* function"
    for test in tests:
        test()


def _normal(text: str) -> str:
    """The fuzz summary without the counts that vary whenever the machine changes.

    Examples, steps and checks depend on every rule's weights and on time; what the
    sample promises is the caught invariant, the minimal sequence and the re-run line.
    """
    first, _, rest = text.partition("\n")
    return re.sub(r"\d[\d,.]*", "<n>", first) + "\n" + rest


def test_readme_fuzz_sample_is_a_real_run(capsys: pytest.CaptureFixture[str]) -> None:
    """CIS-STATE-2, CIS-TTL-5: the README's `fuzz --mutant` sample is what the command prints today."""
    text = README.read_text(encoding="utf-8")
    command = "$ invocation-store fuzz --mutant ttl-refresh-on-read --seed 3 -q\n"
    start = text.index(command) + len(command)
    shown = text[start : text.index("```", start)]
    assert main(["fuzz", "--mutant", "ttl-refresh-on-read", "--seed", "3", "-q"]) == 0
    printed = capsys.readouterr().out
    assert _normal(printed) == _normal(shown)
