"""Conformance vectors: generated from the kernel, identical to the files, complete (issue 6, step 4)."""

from __future__ import annotations

import importlib.util
import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from invocation_store.kernel import (
    PREFLIGHT_ORDER,
    RUN_TRANSITIONS,
    TRANSITIONS,
    Begin,
    ErrorCode,
    Failed,
    Phase,
    ProjectionReceived,
    RawReceived,
    RunStatus,
    SweptStale,
)
from invocation_store.oracle._vectors import EXCLUSIVE, dump_document, generate_vectors, run_vector

ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "spec" / "vectors"


def _load_script() -> Any:
    spec = importlib.util.spec_from_file_location(
        "generate_vectors", ROOT / "scripts" / "generate_vectors.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def documents() -> dict[str, dict[str, Any]]:
    return generate_vectors()


def _all_vectors(documents: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    vectors: list[dict[str, Any]] = []
    for document in documents.values():
        vectors += document.get("vectors", [])
        vectors += [vector for row in document.get("rows", []) for vector in row["vectors"]]
        vectors += [entry["vector"] for entry in document.get("codes", [])]
    return vectors


def test_generated_files_match_the_kernel() -> None:
    """CIS-SPEC-3, CIS-ORC-1: regenerating spec/vectors/ and spec/trace.schema.json in memory gives
    exactly the committed files (run scripts/generate_vectors.py after a kernel change)."""
    files = _load_script().expected_files(ROOT)
    assert {path.name for path in files if path.parent == VECTORS} == {p.name for p in VECTORS.glob("*.json")}
    stale = [
        str(path.relative_to(ROOT))
        for path, text in files.items()
        if path.read_text(encoding="utf-8") != text
    ]
    assert stale == [], f"out of date, run scripts/generate_vectors.py: {stale}"


def test_drift_is_detected(tmp_path: Path) -> None:
    """CIS-SPEC-3: the generator's --check mode fails on a file that differs by one byte."""
    script = _load_script()
    for path, text in script.expected_files(tmp_path).items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    target = tmp_path / "spec" / "vectors" / "illegal.json"
    target.write_text(
        target.read_text(encoding="utf-8").replace("INVALID_TRANSITION", "INVALID_TRANSITIOM", 1)
    )
    assert script.main(["--check"], root=tmp_path) == 1
    assert script.main([], root=tmp_path) == 0
    assert script.main(["--check"], root=tmp_path) == 0


def test_every_vector_replays_through_the_kernel(documents: dict[str, dict[str, Any]]) -> None:
    """CIS-SPEC-3, CIS-LIFE-1, CIS-LIFE-2, CIS-PRE-2: every vector, read back from its JSON form,
    gives its expected outcome."""
    vectors = _all_vectors(documents)
    assert len(vectors) > 150
    failures = [
        vector["id"] for vector in vectors if run_vector(json.loads(json.dumps(vector))) != vector["expect"]
    ]
    assert failures == []


def test_vectors_cover_every_row_and_every_illegal_pair(documents: dict[str, dict[str, Any]]) -> None:
    """CIS-LIFE-1, CIS-LIFE-2, CIS-SPEC-2: one block per table row, reaching every target phase, and
    an INVALID_TRANSITION vector for every (phase, event) pair outside the table."""
    rows = {(row["phase"], row["event"]): row for row in documents["transitions.json"]["rows"]}
    assert set(rows) == {(phase.value, event.__name__) for phase, event in TRANSITIONS}
    for (phase, event), targets in TRANSITIONS.items():
        assert rows[(phase.value, event.__name__)]["next"] == sorted(t.value for t in targets)
    events = (Begin, RawReceived, ProjectionReceived, Failed, SweptStale)
    illegal = {
        (vector["id"].split("/")[1], vector["id"].split("/")[2])
        for vector in documents["illegal.json"]["vectors"]
    }
    expected = {
        (phase.value, event.__name__)
        for phase, event in itertools.product(Phase, events)
        if (phase, event) not in TRANSITIONS
    }
    assert illegal == expected
    assert all(v["expect"] == {"code": "INVALID_TRANSITION"} for v in documents["illegal.json"]["vectors"])
    runs = {vector["id"] for vector in documents["runs.json"]["vectors"]}
    assert {f"run/{status.value}/{operation}" for status, operation in RUN_TRANSITIONS} <= runs
    assert {
        f"run/{status.value}/{operation}/illegal"
        for status in RunStatus
        for operation in ("cancel", "close")
        if (status, operation) not in RUN_TRANSITIONS
    } <= runs


def test_vectors_cover_every_error_code(documents: dict[str, dict[str, Any]]) -> None:
    """CIS-ERR-1, CIS-FAIL-1: every code of the closed set has its fixed message and a vector that
    produces it."""
    codes = documents["error_codes.json"]["codes"]
    assert [entry["code"] for entry in codes] == [code.value for code in ErrorCode]
    for entry in codes:
        outcome = entry["vector"]["expect"]
        produced = {outcome.get("code"), (outcome.get("record") or {}).get("error_code")}
        assert entry["code"] in produced, entry["code"]
        assert entry["message"]
        assert entry["code"] not in entry["message"]


def test_preflight_pairs_give_the_earlier_code(documents: dict[str, dict[str, Any]]) -> None:
    """CIS-PRE-2, CIS-PRE-8: for every pair of preflight checks an input failing both gets the code of
    the earlier check; each check alone gets its own code."""
    document = documents["preflight_order.json"]
    assert document["order"] == [code.value for code in PREFLIGHT_ORDER]
    by_fails = {tuple(vector["fails"]): vector["expect"]["code"] for vector in document["vectors"]}
    for code in PREFLIGHT_ORDER:
        assert by_fails[(code.value,)] == code.value
    for first, second in itertools.combinations(PREFLIGHT_ORDER, 2):
        if frozenset({first, second}) in EXCLUSIVE:
            continue
        assert by_fails[(first.value, second.value)] == first.value
    assert by_fails[()] is None


def test_vector_files_are_stable_json(documents: dict[str, dict[str, Any]]) -> None:
    """CIS-SPEC-3: the files are deterministic ASCII JSON (a lone surrogate survives as an escape)."""
    text = dump_document(documents["transitions.json"])
    assert text.isascii()
    assert text == dump_document(generate_vectors()["transitions.json"])
    assert "\\ud800" in text


@pytest.mark.parametrize(
    "requirement", ["CIS-JSON-1", "CIS-JSON-2", "CIS-JSON-3", "CIS-JSON-4", "CIS-JSON-5", "CIS-JSON-6"]
)
def test_every_ijson_rule_has_vectors_on_both_sides(
    documents: dict[str, dict[str, Any]], requirement: str
) -> None:
    """CIS-JSON-1, CIS-JSON-2, CIS-JSON-3, CIS-JSON-4, CIS-JSON-5, CIS-JSON-6: each I-JSON rule has an
    arguments vector the kernel admits and one it refuses with INVALID_ARGUMENTS."""
    codes = {
        vector["expect"]["code"]
        for vector in documents["arguments.json"]["vectors"]
        if requirement in vector["requirements"]
    }
    assert codes == {None, "INVALID_ARGUMENTS"}


def test_size_limits_have_vectors_at_and_over_the_limit(documents: dict[str, dict[str, Any]]) -> None:
    """CIS-SIZE-2, CIS-SIZE-3, CIS-SIZE-4, CIS-SIZE-5, CIS-RUN-5, CIS-RUN-6, CIS-LIFE-7: every limit,
    budget and age has a vector at the boundary that passes and one just past it that is refused."""
    by_id = {
        vector["id"]: vector for document in documents.values() for vector in document.get("vectors", [])
    }

    def outcome(vector_id: str) -> str | None:
        expect = by_id[vector_id]["expect"]
        record = expect.get("record")
        if by_id[vector_id]["kind"] == "transition" and record is not None:
            return record["error_code"]
        return expect.get("code")

    pairs = {
        "arguments/size/ascii-64": "arguments/size/ascii-65",
        "arguments/size/two-byte-64": "arguments/size/two-byte-66",
        "limits/raw/ascii-64": "limits/raw/ascii-65",
        "limits/raw/utf8-64": "limits/raw/utf8-66",
        "limits/result/at": "limits/result/one-over",
        "limits/record/begin-at": "limits/record/begin-over",
        "limits/record/raw-at": "limits/record/raw-over",
        "limits/record/projection-at": "limits/record/projection-over",
        "admission/tool-budget/one-left": "admission/tool-budget/reached",
        "admission/byte-budget/exact": "admission/byte-budget/one-over",
        "admission/byte-budget/utf8-exact": "admission/byte-budget/utf8-over",
        "admission/deadline/one-before": "admission/deadline/at",
        "limits/sweep/age-one-less": "limits/sweep/age-equals",
    }
    for inside, outside in pairs.items():
        assert outcome(inside) in (None, "NOT_STALE"), inside
        assert outcome(outside) not in (None, "NOT_STALE"), outside


def test_new_vector_kinds_replay(documents: dict[str, dict[str, Any]]) -> None:
    """CIS-SPEC-3, CIS-STORE-3, CIS-REF-1, CIS-PROG-2: the complete, cite and progress kinds replay
    through the kernel from their JSON form; a changed expectation is noticed."""
    kinds = {"complete", "cite", "progress"}
    vectors = [v for v in _all_vectors(documents) if v["kind"] in kinds]
    assert {v["kind"] for v in vectors} == kinds
    for vector in vectors:
        assert run_vector(json.loads(json.dumps(vector))) == vector["expect"], vector["id"]
    tampered = json.loads(json.dumps(vectors[0]))
    tampered["now_ms"] = tampered["before"]["expires_at_ms"]
    assert run_vector(tampered) != vectors[0]["expect"]
