"""Every requirement in spec/requirements.md is covered by a test or pending (CIS-SPEC-1)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "spec" / "requirements.md"
ID = re.compile(r"\bCIS-[A-Z]+-\d+\b")
HEADING = re.compile(r"^### (CIS-[A-Z]+-\d+) ")
TEST_DIRS = [ROOT / "tests", ROOT / "stateful_tests", ROOT / "invocation_store" / "testing"]
STATEFUL_DECORATORS = {"rule", "invariant", "precondition", "initialize"}


def _requirements() -> dict[str, bool]:
    """ID -> pending?"""
    requirements: dict[str, bool] = {}
    current: str | None = None
    for line in SPEC.read_text(encoding="utf-8").splitlines():
        match = HEADING.match(line)
        if match:
            current = match.group(1)
            assert current not in requirements, f"{current} defined twice"
            requirements[current] = False
        elif current and line.startswith("Pending:"):
            requirements[current] = True
    return requirements


def _requirement_texts() -> dict[str, str]:
    """ID -> its requirement text (the lines after the heading, without Source:/Pending: lines)."""
    texts: dict[str, list[str]] = {}
    current: str | None = None
    for line in SPEC.read_text(encoding="utf-8").splitlines():
        match = HEADING.match(line)
        if match:
            current = match.group(1)
            texts[current] = []
        elif line.startswith("## "):
            current = None
        elif current and not line.startswith(("Source:", "Pending:")):
            texts[current].append(line)
    return {req: "\n".join(lines).strip() for req, lines in texts.items()}


#: RFC 2119 keywords that make a requirement normative (capitals only, RFC 8174).
NORMATIVE = re.compile(r"\b(?:MUST|SHOULD)\b")


def _decorator_names(node: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    names: set[str] = set()
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(target, ast.Attribute):
            names.add(target.attr)
        elif isinstance(target, ast.Name):
            names.add(target.id)
    return names


def _covered_ids() -> dict[str, list[str]]:
    covered: dict[str, list[str]] = {}
    for folder in TEST_DIRS:
        for path in sorted(folder.rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                is_test = node.name.startswith("test_") or bool(_decorator_names(node) & STATEFUL_DECORATORS)
                docstring = ast.get_docstring(node) or ""
                if is_test:
                    for req in ID.findall(docstring):
                        covered.setdefault(req, []).append(f"{path.name}::{node.name}")
    return covered


def test_every_requirement_is_covered_or_pending() -> None:
    """CIS-SPEC-1: no requirement is neither tested nor marked pending."""
    requirements = _requirements()
    covered = _covered_ids()
    untraced = sorted(req for req, pending in requirements.items() if not pending and req not in covered)
    assert untraced == [], f"requirements with no test and no Pending line: {untraced}"


def test_pending_requirements_are_not_already_covered() -> None:
    """CIS-SPEC-1: a requirement that tests cover must drop its Pending line."""
    requirements = _requirements()
    covered = _covered_ids()
    stale = sorted(req for req, pending in requirements.items() if pending and req in covered)
    assert stale == [], f"covered requirements still marked pending: {stale}"


def test_every_cited_id_is_defined() -> None:
    """CIS-SPEC-1: code and tests cite only IDs that the spec defines."""
    defined = set(_requirements())
    cited: set[str] = set()
    for folder in [*TEST_DIRS, ROOT / "invocation_store"]:
        for path in folder.rglob("*.py"):
            cited.update(ID.findall(path.read_text(encoding="utf-8")))
    assert sorted(cited - defined) == []


def test_every_requirement_is_normative() -> None:
    """CIS-SPEC-1: every requirement states its rule with an RFC 2119 keyword (MUST, MUST NOT,
    SHOULD, SHOULD NOT), in capitals; a requirement with only a title, or only prose, fails."""
    texts = _requirement_texts()
    assert len(texts) == len(_requirements())
    empty = sorted(req for req, text in texts.items() if not text)
    assert empty == [], f"requirements with no text: {empty}"
    prose = sorted(req for req, text in texts.items() if not NORMATIVE.search(text))
    assert prose == [], f"requirements with no MUST/SHOULD: {prose}"


def test_requirements_do_not_defer_to_python() -> None:
    """CIS-SPEC-1: no requirement leaves a decision to Python's behaviour (another implementation
    must decide the same from the text): the word Python appears in no requirement."""
    deferring = sorted(req for req, text in _requirement_texts().items() if "python" in text.lower())
    assert deferring == []
