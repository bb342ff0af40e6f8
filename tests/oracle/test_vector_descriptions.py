"""Each vector's description agrees with its inputs wherever it states a fact they can show.

A description is read by an implementer deciding which reading a vector rules out; a
description that contradicts the inputs (``no run state`` over a live run) sends them the
wrong way. Each check below finds one kind of factual statement in the descriptions of
``spec/vectors/*.json`` by a pattern and tests it against the vector's own inputs; each
must find a minimum number of statements, so that a check that matches nothing fails too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

VECTORS = Path(__file__).resolve().parents[2] / "spec" / "vectors"
TOP = 2**53 - 1


def _file_vectors(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The vectors of one file: ``vectors``, ``rows[].vectors`` and ``codes[].vector`` (error_codes.json)."""
    found: list[dict[str, Any]] = list(document.get("vectors", []))
    found += [vector for row in document.get("rows", []) for vector in row["vectors"]]
    found += [code["vector"] for code in document.get("codes", []) if code.get("vector") is not None]
    return found


def _vectors() -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for path in sorted(VECTORS.glob("*.json")):
        found += _file_vectors(json.loads(path.read_text(encoding="utf-8")))
    return found


def _every_vector_object(value: Any) -> Iterator[dict[str, Any]]:
    """Every object in a document that is a vector (it has an ``id``, a ``kind`` and a ``description``)."""
    if isinstance(value, dict):
        if {"id", "kind", "description"} <= value.keys():
            yield value
        for inner in value.values():
            yield from _every_vector_object(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _every_vector_object(inner)


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _now(vector: dict[str, Any]) -> int | None:
    if vector["kind"] == "transition":
        now = vector["event"].get("now_ms")
        return now if isinstance(now, int) else None
    now = vector.get("now_ms")
    return now if isinstance(now, int) else None


def _record(vector: dict[str, Any]) -> dict[str, Any] | None:
    """The record a description's ``expires_at`` is about."""
    kind = vector["kind"]
    if kind == "transition":
        return vector["before"]
    if kind in ("complete", "completion"):
        return vector["stored"]
    if kind in ("cite", "well_formed", "agent_view", "own_create"):
        return vector["record"]
    if kind == "liveness":
        return vector["value"]
    if kind == "sweep":
        return next((record for record in vector["records"] if record is not None), None)
    return vector.get("existing")


def _run(vector: dict[str, Any]) -> dict[str, Any] | None:
    return vector["before"] if vector["kind"] == "run" else vector.get("run")


_TERM = re.compile(
    r"2\^53|\d+|run\.expires_at_ms|the run state's expiry|expires_at|deadline \+ ttl|deadline|ttl"
)


def _value(term: str, vector: dict[str, Any]) -> int | None:
    if term == "2^53":
        return 2**53
    if term.isdigit():
        return int(term)
    record, run = _record(vector), _run(vector)
    if term == "expires_at":
        return None if record is None else record["expires_at_ms"]
    if term in ("run.expires_at_ms", "the run state's expiry", "deadline + ttl"):
        return None if run is None else run["expires_at_ms"]
    if term == "deadline":
        return None if run is None else run["deadline_ms"]
    event = vector.get("event") or {}
    ttl = event.get("ttl_ms") if vector["kind"] == "transition" else None
    return ttl if ttl is not None else (None if run is None else run["ttl_ms"])


def _evaluate(expression: str, vector: dict[str, Any]) -> int | None:
    """An expression of terms joined by + and - (``deadline + ttl - 1``), or None if it has none."""
    total, sign, position, seen = 0, 1, 0, False
    expression = expression.strip()
    while position < len(expression):
        rest = expression[position:]
        if rest[0] == " ":
            position += 1
        elif rest[0] in "+-":
            sign = 1 if rest[0] == "+" else -1
            position += 1
        else:
            match = _TERM.match(rest)
            if match is None:
                break
            value = _value(match.group(), vector)
            if value is None:
                return None
            total += sign * value
            sign, seen = 1, True
            position += match.end()
    return total if seen else None


def _now_statements(vector: dict[str, Any]) -> Iterator[bool]:
    for match in re.finditer(r"now = (-?)([^:,;()]+)", vector["description"]):
        expected = _evaluate(match.group(2), vector)
        if expected is None:
            continue
        if match.group(1):
            expected = -expected
        yield _now(vector) == expected


def _no_run_state(vector: dict[str, Any]) -> Iterator[bool]:
    if re.search(r"\bno run state\b", vector["description"]):
        yield _run(vector) is None


def _nothing_stored(vector: dict[str, Any]) -> Iterator[bool]:
    if re.search(r"^(nothing stored|no record)\b", vector["description"]):
        yield _record(vector) is None


def _request_bytes(vector: dict[str, Any]) -> Iterator[bool]:
    match = re.search(r"^(\d+) bytes against a (\d+)-byte limit", vector["description"])
    if match and vector["kind"] == "preflight":
        size, limit = int(match.group(1)), int(match.group(2))
        yield _size(vector["envelope"]["arguments"]) == size and vector["limits"]["request_bytes"] == limit


def _raw_bytes(vector: dict[str, Any]) -> Iterator[bool]:
    match = re.search(r"a raw response of (\d+) bytes, limit (\d+)", vector["description"])
    if match:
        raw = vector["event"]["raw_response"]
        yield _size(raw) == int(match.group(1)) and vector["limits"]["raw_bytes"] == int(match.group(2))


def _length(vector: dict[str, Any]) -> Iterator[bool]:
    """``N characters``: of the tool_call_id, the run id opened, or the arguments text."""
    match = re.search(r"^(\d+) characters", vector["description"])
    if match and vector["kind"] in ("preflight", "run"):
        if vector["kind"] == "run":
            value = vector["parameters"]["run_id"]
        elif vector["id"].startswith("arguments/"):
            value = vector["envelope"]["arguments"]
        else:
            value = vector["envelope"]["tool_call_id"]
        yield isinstance(value, str) and len(value) == int(match.group(1))


_STATUS = re.compile(r"^(READY|PROJECTING|ERROR)\b(?: \+ (EVIDENCE_FOUND|NO_EVIDENCE))?(?:/([A-Z_]+))?")


def _record_status(vector: dict[str, Any]) -> Iterator[bool]:
    match = _STATUS.match(vector["description"])
    record = _record(vector)
    if match and record is not None and vector["kind"] in ("agent_view", "cite", "well_formed", "own_create"):
        status, evidence, code = match.groups()
        yield (
            record["status"] == status
            and (evidence is None or record["evidence_status"] == evidence)
            and (code is None or record["error_code"] == code)
        )


def _run_status(vector: dict[str, Any]) -> Iterator[bool]:
    match = re.search(r"\ba (?:live )?(cancelled|closed|CANCELLED|CLOSED) run\b", vector["description"])
    run = _run(vector)
    if match and vector["kind"] in ("preflight", "complete", "completion", "run"):
        yield run is not None and run["status"] == match.group(1).upper()


def _budget(vector: dict[str, Any]) -> Iterator[bool]:
    match = re.search(r"^used = budget( - 1)?\b", vector["description"])
    run = _run(vector)
    if match and run is not None:
        yield run["tool_calls_used"] == run["tool_call_budget"] - (1 if match.group(1) else 0)


def _sweep_threshold(vector: dict[str, Any]) -> Iterator[bool]:
    match = re.search(r"older_than (\d+)", vector["description"])
    if match and vector["kind"] == "transition" and vector["event"].get("type") == "SweptStale":
        yield vector["event"]["older_than_ms"] == int(match.group(1))


def _ttl(vector: dict[str, Any]) -> Iterator[bool]:
    match = re.search(r"\ba TTL of (\d+)\b", vector["description"])
    if match:
        if vector["kind"] == "well_formed":
            record = vector["record"]
            ttl = record["expires_at_ms"] - record["created_at_ms"]
        elif vector["kind"] == "well_formed_run":
            ttl = vector["run"]["ttl_ms"]
        else:
            ttl = (vector.get("event") or vector.get("parameters") or {}).get("ttl_ms")
        yield ttl == int(match.group(1))


def _sequence(vector: dict[str, Any]) -> Iterator[bool]:
    match = re.search(r"\bsequence (2\^53(?: - 1)?|\d+)\b", vector["description"])
    if match and vector["kind"] in ("well_formed", "transition"):
        text = match.group(1)
        expected = {"2^53": 2**53, "2^53 - 1": TOP}.get(text)
        expected = int(text) if expected is None else expected
        source = vector.get("record") if vector["kind"] == "well_formed" else vector["event"]
        yield source is not None and source.get("sequence") == expected


#: (name, the statements a description makes and whether the inputs hold them, minimum found).
CHECKS: list[tuple[str, Callable[[dict[str, Any]], Iterator[bool]], int]] = [
    ("now = ...", _now_statements, 40),
    ("no run state", _no_run_state, 4),
    ("nothing stored / no record", _nothing_stored, 4),
    ("N bytes against an M-byte limit", _request_bytes, 3),
    ("a raw response of N bytes", _raw_bytes, 3),
    ("N characters", _length, 4),
    ("READY / PROJECTING / ERROR records", _record_status, 10),
    ("a cancelled / closed run", _run_status, 4),
    ("used = budget", _budget, 2),
    ("older_than N", _sweep_threshold, 3),
    ("a TTL of N", _ttl, 3),
    ("sequence N", _sequence, 5),
]


@pytest.mark.parametrize(("name", "check", "minimum"), CHECKS, ids=[name for name, _check, _n in CHECKS])
def test_descriptions_agree_with_their_inputs(
    name: str, check: Callable[[dict[str, Any]], Iterator[bool]], minimum: int
) -> None:
    """CIS-SPEC-3: every statement of this kind in a vector description holds of the vector's inputs."""
    results = [(vector["id"], holds) for vector in _vectors() for holds in check(vector)]
    wrong = [vector_id for vector_id, holds in results if not holds]
    assert wrong == [], f"{name}: description contradicts the inputs in {wrong}"
    assert len(results) >= minimum, f"{name}: only {len(results)} statements found"


def test_a_contradicting_description_is_found() -> None:
    """CIS-SPEC-3: the checks fail on the contradictions round 2 shipped: `no run state` over a live run,
    `now = expires_at` one millisecond early."""
    vectors = {vector["id"]: vector for vector in _vectors()}
    no_run = dict(vectors["complete/no-run"])
    assert list(_no_run_state(no_run)) == [True]
    no_run["run"] = vectors["complete/ready"]["run"]
    assert list(_no_run_state(no_run)) == [False]
    expired = json.loads(json.dumps(vectors["cite/expired"]))
    assert list(_now_statements(expired)) == [True]
    expired["now_ms"] -= 1
    assert list(_now_statements(expired)) == [False]


def test_every_vector_of_every_file_is_checked() -> None:
    """CIS-SPEC-3: the checks read every vector wherever its file keeps it, those of
    ``error_codes.json`` (one per code, under ``codes[].vector``) included."""
    for path in sorted(VECTORS.glob("*.json")):
        document = json.loads(path.read_text(encoding="utf-8"))
        held = [vector["id"] for vector in _every_vector_object(document)]
        assert held, f"{path.name} holds no vector"
        assert [vector["id"] for vector in _file_vectors(document)] == held, path.name
    codes = json.loads((VECTORS / "error_codes.json").read_text(encoding="utf-8"))["codes"]
    assert len([code for code in codes if code.get("vector")]) >= 20
