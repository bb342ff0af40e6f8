"""The effect and visibility vectors (``effects.json``, ``views.json``) say what section 0 says.

Each test restates a rule from ``spec/requirements.md`` independently of the kernel
and checks every vector of its kind against it, so a vector generated from a wrong
kernel fails here as well as the kernel that disagrees with it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from invocation_store.oracle._vectors import run_vector

VECTORS = Path(__file__).resolve().parents[2] / "spec" / "vectors"
TERMINAL = {"READY", "ERROR"}


def _size(text: str | None) -> int:
    return 0 if text is None else len(text.encode("utf-8", "surrogatepass"))


def _record_bytes(record: dict[str, Any]) -> int:
    fields = ("run_id", "tool_call_id", "tool_name", "request_json", "raw_response", "agent_result", "scope")
    return sum(_size(record[name]) for name in fields)


def _of_kind(kind: str) -> list[dict[str, Any]]:
    vectors = []
    for name in ("effects.json", "views.json"):
        document = json.loads((VECTORS / name).read_text(encoding="utf-8"))
        vectors += [vector for vector in document["vectors"] if vector["kind"] == kind]
    assert vectors, kind
    return vectors


@pytest.mark.parametrize(
    "kind",
    [
        "completion",
        "liveness",
        "lifetime",
        "own_create",
        "sweep",
        "agent_view",
        "failure_view",
        "well_formed_view",
        "well_formed_run",
    ],
)
def test_every_effect_vector_replays(kind: str) -> None:
    """CIS-SPEC-3: every vector of the effect and view kinds replays through the kernel to its expect."""
    for vector in _of_kind(kind):
        request = {key: value for key, value in vector.items() if key != "expect"}
        assert run_vector(request) == vector["expect"], vector["id"]


def test_completion_effects_follow_the_charge_and_append_rules() -> None:
    """CIS-RUN-6, CIS-PROG-2, CIS-STORE-3: a WRITE charges max(0, record_bytes(after) -
    record_bytes(before)) to a live run of the record's own run and appends a terminal record's id;
    a REPLAY, a lapsed run or another run's state gets neither."""
    seen = set()
    for vector in _of_kind("completion"):
        expect = vector["expect"]
        if "code" in expect:
            seen.add("code")
            continue
        run, after, before = vector["run"], vector["after"], vector["before"]
        usable = (
            expect["action"] == "WRITE"
            and run is not None
            and vector["now_ms"] < run["expires_at_ms"]  # rule-check: restating section 0 "Live"
            and run["run_id"] == after["run_id"]
        )
        charge = max(0, _record_bytes(after) - _record_bytes(before)) if usable else 0
        assert expect["charge_bytes"] == charge, vector["id"]
        assert expect["append_done"] is (usable and after["status"] in TERMINAL), vector["id"]
        if usable:
            assert expect["run"] == {**run, "bytes_used": run["bytes_used"] + charge}, vector["id"]
        else:
            assert expect["run"] is None, vector["id"]
        assert expect["record"] == (vector["stored"] if expect["action"] == "REPLAY" else after)
        seen.add((expect["action"], usable, expect["append_done"], charge > 0))
    # Both sides of each rule occur: charged and not, appended and not, a replay and a code.
    assert {("WRITE", True, True, True), ("WRITE", True, False, True), ("WRITE", False, False, False)} <= seen
    assert ("WRITE", True, True, False) in seen  # a terminal record whose charge is 0
    assert {"code", ("REPLAY", False, False, False)} <= seen


def test_liveness_is_now_before_expiry() -> None:
    """CIS-TTL-4, CIS-KERN-2: live iff now < expires_at_ms (expires_at - 1 live, expires_at not); what
    is left is expires_at_ms - now; a now outside [0, 2^53 - 1] is a caller error."""
    edges = set()
    for vector in _of_kind("liveness"):
        value, now = vector["value"], vector["now_ms"]
        if not 0 <= now <= 2**53 - 1:
            assert vector["expect"] == {"invalid_input": True}, vector["id"]
            continue
        live = value is not None and now < value["expires_at_ms"]
        remaining = value["expires_at_ms"] - now if live else None
        assert vector["expect"] == {"live": live, "remaining_ms": remaining}, vector["id"]
        if value is not None:
            edges.add(now - value["expires_at_ms"])
    assert {-1, 0} <= edges


def test_lifetime_is_intact_unless_the_key_has_no_expiry() -> None:
    """CIS-DUR-7: only a key with no expiry (null) is corrupt; any integer is intact; a non-integer
    report is a caller error."""
    for vector in _of_kind("lifetime"):
        value = vector["remaining_ms"]
        if value is None:
            expected: dict[str, Any] = {"intact": False}
        elif type(value) is int:
            expected = {"intact": True}
        else:
            expected = {"invalid_input": True}
        assert vector["expect"] == expected, vector["id"]


def test_views_never_echo_an_unsafe_id_or_raw_data() -> None:
    """CIS-ERR-1, CIS-BND-4: a view carries the id only if it is a safe id, a failure only a code
    and its fixed message, and no view carries the raw response."""
    messages = json.loads((VECTORS / "error_codes.json").read_text(encoding="utf-8"))["codes"]
    fixed = {entry["code"]: entry["message"] for entry in messages}
    for vector in _of_kind("agent_view") + _of_kind("failure_view"):
        if vector["expect"] == {"invalid_input": True}:  # a code outside the closed set
            assert vector["kind"] == "failure_view"
            assert vector["code"] not in fixed
            continue
        view = vector["expect"]["view"]
        source = vector.get("record") or {}
        if view["ok"]:
            assert view["code"] is None
            assert view["message"] is None
        else:
            assert view["message"] == fixed[view["code"]], vector["id"]
            assert view["content"] is None
            assert view["scope"] is None
        raw = source.get("raw_response")
        assert raw is None or raw not in json.dumps(view), vector["id"]
    unsafe = [v for v in _of_kind("failure_view") if v["tool_call_id"] != "call_1"]
    assert unsafe
    assert all(v["expect"]["view"]["tool_call_id"] is None for v in unsafe)
    hidden = [v for v in _of_kind("agent_view") if v["record"]["tool_call_id"] != "call_1"]
    assert hidden
    assert all(v["expect"]["view"]["tool_call_id"] is None for v in hidden)


def test_the_run_vectors_say_well_formed_exactly_for_the_runs_the_kernel_makes() -> None:
    """CIS-STORE-6: the well_formed_run vectors hold both answers, and each says what its label says."""
    vectors = _of_kind("well_formed_run")
    answers = {vector["id"]: vector["expect"]["well_formed"] for vector in vectors}
    assert set(answers.values()) == {True, False}
    for vector in vectors:
        said = "not well formed" not in vector["description"]
        assert vector["expect"]["well_formed"] is said, vector["id"]
