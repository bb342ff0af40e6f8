"""The vectors alone pin the kernel: a self-contained runner and kernel mutants (issue 13).

``scripts/run_vectors.py`` loads only ``spec/vectors/*.json`` and drives an
implementation over JSON on stdio; here it drives this project's kernel through
``invocation_store.oracle.vector_adapter``. ``scripts/kernel_mutants.py`` generates
kernel mutants and the rival readings of the specification as kernel patches; every
mutant not listed as equivalent, and every rival, must make some vector fail. The
default run takes every fifth generated mutant and every rival (about a minute);
set ``CIS_MUTANTS=all`` to run all of them.
"""

from __future__ import annotations

import ast
import importlib.util
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from invocation_store.oracle.vector_adapter import serve

ROOT = Path(__file__).resolve().parents[2]
RUNNER = ROOT / "scripts" / "run_vectors.py"
ADAPTER = [sys.executable, "-m", "invocation_store.oracle.vector_adapter"]


def _load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def mutants_module() -> Any:
    return _load("kernel_mutants")


def _runner(*command: str, vectors: Path | None = None) -> subprocess.CompletedProcess[str]:
    extra = ["--vectors", str(vectors)] if vectors is not None else []
    # -I -S: no site-packages at all, so an import of invocation_store would fail.
    return subprocess.run(
        [sys.executable, "-I", "-S", str(RUNNER), *extra, "--", *command],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_runner_imports_only_the_standard_library() -> None:
    """CIS-SPEC-3: the minimal runner imports nothing outside the standard library."""
    tree = ast.parse(RUNNER.read_text(encoding="utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported


def test_every_vector_passes_through_the_minimal_runner() -> None:
    """CIS-SPEC-3: the kernel, behind the stdio adapter, passes every vector of spec/vectors as the
    self-contained runner (run without site-packages) reads them."""
    result = _runner(*ADAPTER)
    assert result.returncode == 0, result.stdout + result.stderr
    count = int(result.stdout.split("all ")[1].split(" vectors")[0])
    assert count > 600


def test_runner_reports_a_wrong_answer_and_a_broken_protocol(tmp_path: Path) -> None:
    """CIS-SPEC-3: an implementation answering the wrong outcome fails (exit 1, the vector's id
    printed); one that stops answering breaks the protocol (exit 2); booleans are not numbers."""
    vectors = tmp_path / "vectors"
    vectors.mkdir()
    document = json.loads((ROOT / "spec" / "vectors" / "well_formed.json").read_text(encoding="utf-8"))
    document["vectors"] = document["vectors"][:2]
    (vectors / "one.json").write_text(json.dumps(document), encoding="utf-8")
    wrong = tmp_path / "wrong.py"
    wrong.write_text(
        "import sys\nfor line in sys.stdin:\n    print('{\"well_formed\": 1}', flush=True)\n",
        encoding="utf-8",
    )
    result = _runner(sys.executable, str(wrong), vectors=vectors)
    assert result.returncode == 1
    assert "FAIL well-formed/projecting" in result.stdout
    silent = tmp_path / "silent.py"
    silent.write_text("import sys\nsys.stdin.readline()\n", encoding="utf-8")
    assert _runner(sys.executable, str(silent), vectors=vectors).returncode == 2
    right = tmp_path / "right.py"
    right.write_text(
        "import sys\nfor line in sys.stdin:\n    print('{\"well_formed\": true}', flush=True)\n",
        encoding="utf-8",
    )
    assert _runner(sys.executable, str(right), vectors=vectors).returncode == 0


def test_mutant_names_are_unique_and_equivalents_exist(mutants_module: Any) -> None:
    """CIS-SPEC-3: mutant names are stable and unique, and every mutant listed as equivalent (with
    its reason) is still generated from the kernel."""
    names = [mutant.name for mutant in mutants_module.generate()]
    assert len(names) == len(set(names))
    assert len(names) > 200
    stale = sorted(set(mutants_module.EQUIVALENT) - set(names))
    assert stale == []
    assert all(reason.strip() for reason in mutants_module.EQUIVALENT.values())


#: The mutants run in this many shards, so that parallel workers share them.
SHARDS = 4


@pytest.mark.parametrize("shard", range(SHARDS))
def test_the_vectors_alone_kill_every_kernel_mutant(mutants_module: Any, shard: int) -> None:
    """CIS-SPEC-3: every kernel mutant that is not listed as equivalent makes at least one vector fail
    through the self-contained runner, and every listed one survives (a listed mutant that the
    vectors kill is not equivalent). Every rival reading of the specification (a sweep age from
    the last update, sizes in characters, a content-only result limit, ...) fails some vector.
    Default: every fifth generated mutant and all rivals; CIS_MUTANTS=all runs all. One of four
    shards of them."""
    every = 1 if os.environ.get("CIS_MUTANTS") == "all" else 5
    mutants = (mutants_module.generate()[::every] + mutants_module.rivals())[shard::SHARDS]
    sandbox = mutants_module.Sandbox()
    try:
        assert not mutants_module.killed_by_vectors(sandbox, None), "the unmutated copy fails the vectors"
        outcomes = {mutant.name: mutants_module.killed_by_vectors(sandbox, mutant) for mutant in mutants}
    finally:
        sandbox.close()
    survivors = sorted(name for name, killed in outcomes.items() if not killed)
    unexplained = [name for name in survivors if name not in mutants_module.EQUIVALENT]
    assert unexplained == [], f"{len(unexplained)} mutants survive the vectors: {unexplained}"
    wrongly_listed = [name for name in outcomes if name in mutants_module.EQUIVALENT and outcomes[name]]
    assert wrongly_listed == []
    assert len(outcomes) - len(survivors) > 0.8 * len(outcomes)


def test_adapter_answers_unknown_kinds_and_caller_errors() -> None:
    """CIS-SPEC-3, CIS-KERN-2: the stdio adapter answers a kind it does not know with
    `unsupported`, a caller error with `invalid_input`, one line per request, in order."""
    requests = [
        {"kind": "teleport"},
        {
            "id": "x",
            "kind": "run",
            "operation": "open",
            "before": None,
            "now_ms": 0,
            "parameters": {
                "run_id": "run-1",
                "deadline_ms": 0,
                "ttl_ms": 0,
                "tool_call_budget": 1,
                "byte_budget": 1,
            },
        },
    ]
    sink = io.StringIO()
    assert serve(io.StringIO("".join(json.dumps(r) + "\n" for r in requests)), sink) == 2
    answers = [json.loads(line) for line in sink.getvalue().splitlines()]
    assert answers == [{"unsupported": "teleport"}, {"invalid_input": True}]


def test_out_of_contract_functions_exist_and_say_why(mutants_module: Any) -> None:
    """CIS-SPEC-3: every function excluded from the vectors' reach exists and carries its reason."""
    for qualified, reason in mutants_module.OUT_OF_CONTRACT.items():
        module, name = qualified.split(".", 1)
        tree = ast.parse((mutants_module.KERNEL / f"{module}.py").read_text(encoding="utf-8"))
        assert any(isinstance(node, ast.FunctionDef) and node.name == name for node in tree.body), qualified
        assert reason.strip()


def test_every_kernel_module_with_decisions_is_mutated(mutants_module: Any) -> None:
    """CIS-SPEC-3: every kernel module is mutated unless it is listed as holding no decision, with
    the reason, so a new kernel module cannot stay outside the vectors' reach unnoticed."""
    modules = {path.name for path in mutants_module.KERNEL.glob("*.py")}
    listed = set(mutants_module.MODULES) | set(mutants_module.NO_DECISIONS)
    assert modules == listed
    assert not set(mutants_module.MODULES) & set(mutants_module.NO_DECISIONS)
    assert all(reason.strip() for reason in mutants_module.NO_DECISIONS.values())


#: Readings an audit found held by vectors with no rival to show the vectors decide them
#: (issue 22), each with a vector that must fail under it.
AUDITED_READINGS: dict[str, str] = {
    "a minus sign alone is a number (read as -0)": "ijson/numbers/bare-minus",
    "Begin judges the tool_call_id before the phase": "limits/begin-order/phase-before-id",
    "tool names are compared after trimming whitespace": "authorization/name-padded",
    "the request is stored re-serialized (JSON.stringify(JSON.parse(text)) in a binary64 reader)": (
        "arguments/binary64/two-to-53-plus-1"
    ),
    "the request is stored with its integers as a binary64 reader holds them (2^53 + 1 as 2^53)": (
        "arguments/binary64/two-to-53-plus-1"
    ),
}


def test_audited_readings_are_decided_by_their_vectors(mutants_module: Any) -> None:
    """CIS-SPEC-3: each reading the audit listed is kept as a rival, and the vector written for it
    fails under it through the self-contained runner (a bare minus as a number, Begin judging the
    id before the phase, trimmed tool names, a request stored re-serialized by a binary64 reader)."""
    rivals = {mutant.name.removeprefix("rival: "): mutant for mutant in mutants_module.rivals()}
    sandbox = mutants_module.Sandbox()
    try:
        for reading, vector in AUDITED_READINGS.items():
            mutant = rivals[reading]
            sandbox.apply(mutant)
            try:
                result = subprocess.run(
                    [sys.executable, "-I", str(RUNNER), "--max-shown", "1000", "--", *sandbox.command()],
                    env=sandbox.environment(),
                    capture_output=True,
                    text=True,
                    check=False,
                    timeout=120,
                )
            finally:
                sandbox.apply(None, mutant.module)
            assert result.returncode == 1, (reading, result.stderr[-500:])
            failed = {line.split()[1] for line in result.stdout.splitlines() if line.startswith("FAIL ")}
            assert vector in failed, (reading, sorted(failed)[:10])
    finally:
        sandbox.close()
