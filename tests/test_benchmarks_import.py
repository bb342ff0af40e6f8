"""Every benchmark script imports: a refactor cannot leave a benchmark broken unseen.

Benchmarks run on demand, never in CI, so nothing else would notice a name they import
moving. Importing a script runs no measurement (each one measures under ``__main__``).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.mark.parametrize("path", sorted(BENCHMARKS.glob("*.py")), ids=lambda path: path.name)
def test_benchmark_script_imports(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """CIS-SPEC-1: the script's module-level code and imports run without error."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(f"_bench_{path.stem}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    assert path.name == "seed_store.py" or callable(getattr(module, "main", None)), path
