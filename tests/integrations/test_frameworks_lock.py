"""The frameworks environment stays whole: its lock covers the package and every framework extra (CIS-ECO-4).

``.ci/run`` installs ``.ci/frameworks.lock`` with ``--no-deps`` (no resolver run), so a
runtime dependency added to ``pyproject.toml`` and missing from the lock, or an extra
raised past the version pinned there, would only show as an import error in CI; this
checks both here, and that ``.ci/run`` runs the framework tests with the switch their
conftest reads.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
LOCK = {
    canonicalize_name(name): version
    for name, version in re.findall(
        r"^([A-Za-z0-9._-]+)==(\S+)$",
        (ROOT / ".ci" / "frameworks.lock").read_text(encoding="utf-8"),
        re.MULTILINE,
    )
}
FRAMEWORK_EXTRAS = ("google-adk", "autogen", "ag2", "llama-index")


@pytest.mark.parametrize(
    "requirement",
    [
        *PYPROJECT["dependencies"],
        *(r for e in FRAMEWORK_EXTRAS for r in PYPROJECT["optional-dependencies"][e]),
    ],
)
def test_the_lock_pins_a_version_each_requirement_accepts(requirement: str) -> None:
    """CIS-ECO-4: the package's own dependencies and the framework extras, at versions they accept."""
    parsed = Requirement(requirement)
    pinned = LOCK.get(canonicalize_name(parsed.name))
    assert pinned is not None, f"{parsed.name} is not in .ci/frameworks.lock"
    assert parsed.specifier.contains(pinned, prereleases=True), (
        f"{parsed.name}=={pinned} vs {parsed.specifier}"
    )


def test_ci_runs_the_framework_tests_in_their_environment() -> None:
    """CIS-ECO-4: .ci/run builds the venv from the lock and runs the directory with the switch set."""
    run = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "pip install --quiet --no-deps -r .ci/frameworks.lock" in run
    assert (
        "INVOCATION_STORE_FRAMEWORK_TESTS=1 .venv-frameworks/bin/python -m pytest "
        "tests/integrations/frameworks" in run
    )
    conftest = (ROOT / "tests" / "integrations" / "frameworks" / "conftest.py").read_text(encoding="utf-8")
    assert 'os.environ.get("INVOCATION_STORE_FRAMEWORK_TESTS") == "1"' in conftest
