"""The README and the guides in docs/ stay true: the test command is what CI runs, the examples run.

Every ```python block of README.md, CONTRIBUTING.md and docs/*.md runs as written. A
block that cannot run here is fenced ```py and says so on its first line: either
``# run by <test file> ...`` (that test runs it: a private server, the frameworks venv)
or ``# fragment, not run: <reason>``.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from invocation_store.kernel import PREFLIGHT_ORDER, ErrorCode

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
#: The documents whose code blocks are checked, README first.
DOCUMENTS = (ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md")))
#: The first screen: what the library is, the example, the two commands.
FIRST_SCREEN_LINES = 50


def _blocks(fence: str) -> list[tuple[str, int, str]]:
    """(document, index, code) of every block fenced ```<fence> in :data:`DOCUMENTS`."""
    found = []
    for path in DOCUMENTS:
        text = path.read_text(encoding="utf-8")
        for index, block in enumerate(re.findall(rf"```{fence}\n(.*?)```", text, re.DOTALL)):
            found.append((path.relative_to(ROOT).as_posix(), index, block))
    return found


def _first_screen_commands() -> list[str]:
    block = re.search(r"```bash\n(.*?)```", README, re.DOTALL)
    assert block is not None, "the README's first screen must have a bash block"
    return [line for line in block.group(1).splitlines() if line and not line.startswith("#")]


def test_first_screen_has_setup_and_test_commands() -> None:
    """CIS-SPEC-1: the first screen says what the library does for a harness, shows a complete
    example, then exactly two commands, and CI runs the second."""
    screen = "\n".join(README.splitlines()[:FIRST_SCREEN_LINES])
    intro = screen.split("```", 1)[0]
    for word in ("harness", "tool call", "bounded result", "error code"):
        assert word in intro, f"README.md: the paragraph before the first code block must say {word!r}"
    example = re.search(r"```python\n(.*?)```", screen, re.DOTALL)
    assert example is not None, f"README.md: a ```python example must end within {FIRST_SCREEN_LINES} lines"
    for name in ("MemoryStore(", "ToolBoundary(", "ToolSpec(", ".invoke(", "print("):
        assert name in example.group(1), name
    assert len(example.group(1).splitlines()) <= 15, "README.md: keep the first example about ten lines"
    assert "```bash" in screen
    assert screen.index("```python") < screen.index("```bash")
    assert screen.count("```") >= 4, f"README.md: the bash block must end within {FIRST_SCREEN_LINES} lines"
    commands = _first_screen_commands()
    assert len(commands) == 2
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert commands[1] in ci.splitlines(), ".ci/run must run the README's test command verbatim"
    assert "pip install" in commands[0]
    assert "invocation-store replay" in commands[0]


def test_first_example_prints_the_bounded_result() -> None:
    """CIS-BND-1, CIS-ID-5: the first example prints the bounded result, then the duplicate's code."""
    example = re.search(r"```python\n(.*?)```", README, re.DOTALL)
    assert example is not None
    code = example.group(1)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines() == ['{"hits":["disk full on db-1"]}', "DUPLICATE_TOOL_CALL"]


def test_readme_stays_short_and_links_every_guide() -> None:
    """CIS-SPEC-1: the README stays under about 250 lines and links every guide in docs/."""
    assert len(README.splitlines()) <= 250, "README.md: move the detail into a guide in docs/"
    for path in sorted((ROOT / "docs").glob("*.md")):
        assert f"](docs/{path.name})" in README, f"README.md does not link docs/{path.name}"


def test_relative_links_resolve() -> None:
    """CIS-SPEC-1: every relative link of README, CONTRIBUTING.md and the guides names a file."""
    for path in DOCUMENTS:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text(encoding="utf-8")):
            if "://" in target:
                continue
            assert (path.parent / target).exists(), f"{path.relative_to(ROOT)}: broken link {target}"


def test_replay_example_named_by_readme_exists() -> None:
    """CIS-SPEC-1: the transcript the quick start replays is shipped."""
    match = re.search(r"invocation-store replay (\S+)", _first_screen_commands()[0])
    assert match is not None
    assert (ROOT / match.group(1)).is_file()


@pytest.mark.parametrize(("document", "index", "block"), _blocks("python"), ids=lambda v: str(v)[:40])
def test_python_examples_run(document: str, index: int, block: str) -> None:
    """CIS-BND-1, CIS-ID-5: every ```python block of the README, CONTRIBUTING.md and docs/ runs as written."""
    result = subprocess.run(
        [sys.executable, "-c", block], capture_output=True, text=True, timeout=120, cwd=ROOT, check=False
    )
    assert result.returncode == 0, f"{document}, python block {index}: {result.stderr[-2000:]}"


@pytest.mark.parametrize(("document", "index", "block"), _blocks("py"), ids=lambda v: str(v)[:40])
def test_every_other_block_says_who_runs_it(document: str, index: int, block: str) -> None:
    """CIS-SPEC-1: a ```py block names the test that runs it, or says why it is a fragment nobody runs."""
    first = block.splitlines()[0]
    match = re.fullmatch(r"# run by (tests/\S+\.py)\b.*|# fragment, not run: .{10,}", first)
    wanted = "'# run by tests/...' or '# fragment, not run: <why>'"
    assert match is not None, f"{document}, py block {index}: start it with {wanted}"
    if match.group(1):
        runner = ROOT / match.group(1)
        assert runner.is_file(), f"{document}: {match.group(1)} does not exist"
        runs = Path(document).name in runner.read_text(encoding="utf-8")
        assert runs, f"{match.group(1)} never reads {document}"


def _errors_table() -> list[str]:
    section = README.split("## Errors: what the agent can see\n", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("| ")]


def test_errors_table_names_only_codes_in_the_preflight_order() -> None:
    """CIS-PRE-2: the README's preflight row is an overview of the kernel's PREFLIGHT_ORDER, in order."""
    row = next(line for line in _errors_table() if line.startswith("| preflight"))
    listed = re.findall(r"`([A-Z_]+)`", row)
    order = [code.value for code in PREFLIGHT_ORDER]
    assert listed == [code for code in order if code in listed], "README.md's preflight row is out of order"


def test_errors_table_names_no_unknown_code() -> None:
    """CIS-ERR-1: the README's "Errors" overview names only ErrorCode members (the complete list is
    the generated docs/errors.md)."""
    listed = {code for row in _errors_table() for code in re.findall(r"`([A-Z_]+)`", row)}
    extra = sorted(listed - {code.value for code in ErrorCode})
    assert not extra, f"README.md's 'Errors' table names codes that ErrorCode lacks: {extra}"


def test_the_error_codes_document_is_generated_from_the_kernel() -> None:
    """CIS-ERR-1, CIS-PRE-2: docs/errors.md lists every ErrorCode (meaning, message, requirement) and
    the preflight order as the kernel states them; run scripts/generate_error_docs.py when stale."""
    script = ROOT / "scripts" / "generate_error_docs.py"
    spec = importlib.util.spec_from_file_location("generate_error_docs", script)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = (ROOT / "docs" / "errors.md").read_text(encoding="utf-8")
    assert text == module.document(), "docs/errors.md is stale: run scripts/generate_error_docs.py"
    for code in ErrorCode:
        assert f"| `{code.value}` |" in text
