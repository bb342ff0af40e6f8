"""`invocation-store check-history` exit codes and output; the format and its schema (issue 14)."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from invocation_store.cli import main
from invocation_store.history import MalformedHistoryError, decode_history
from invocation_store.history._schema import history_schema
from invocation_store.kernel import ErrorCode

from ._build import Builder, admitted, create_args, open_args, opened, request

SPEC = Path(__file__).resolve().parents[2] / "spec"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["check-history", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _duplicate_history(both_admitted: bool) -> Builder:
    b = Builder()
    b.call(0, "open_run", opened(), **open_args())
    r1, r2 = request("call_1", "t1"), request("call_1", "t2")
    a = b.invoke(1, "create", **create_args(r1))
    c = b.invoke(2, "create", **create_args(r2))
    b.ok(a, admitted(opened(), r1))
    b.ok(c, admitted(opened(), r2) if both_admitted else ErrorCode.CALL_IN_PROGRESS)
    return b


def _write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "h.jsonl"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_linearizable_history_exits_0(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """CIS-HIST-2: exit 0 and a summary; nothing with --quiet; one object with --json."""
    path = _write(tmp_path, _duplicate_history(both_admitted=False).text())
    code, out, err = _run(capsys, path)
    assert (code, err) == (0, "")
    assert out == "check-history: linearizable (3 operations, 0 with unknown outcome, 1 runs)\n"
    assert _run(capsys, "--quiet", path) == (0, "", "")
    code, out, _ = _run(capsys, "--json", path)
    assert (code, json.loads(out)) == (
        0,
        {"status": "linearizable", "lines": 7, "operations": 3, "unknown": 0, "runs": 1},
    )


def test_not_linearizable_exits_1_with_window(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """CIS-HIST-2: exit 1 with the window, the orders tried and the requirements; --json alike."""
    path = _write(tmp_path, _duplicate_history(both_admitted=True).text())
    code, out, err = _run(capsys, path)
    assert (code, err) == (1, "")
    # One key's operations alone contradict the kernel: the report names the key too.
    assert out.startswith("check-history: not linearizable [CIS-HIST-2, CIS-ID-5] in run run-1, key call_1\n")
    assert "window (2 operations" in out
    assert "orders tried (2" in out
    assert '{"q":1}' not in out  # no request text in reports
    code, out, _ = _run(capsys, "--json", path)
    verdict = json.loads(out)
    assert code == 1
    assert verdict["status"] == "not_linearizable"
    assert (verdict["requirement"], verdict["rule"], verdict["run_id"]) == ("CIS-HIST-2", "CIS-ID-5", "run-1")
    assert (verdict["key"], verdict["minimal"], verdict["undecided"]) == ("call_1", True, [])
    assert [op["id"] for op in verdict["window"]] == [1, 2]
    assert {order["expected"] for order in verdict["orders"]} == {"CALL_IN_PROGRESS"}


def _lines(b: Builder) -> list[dict[str, Any]]:
    return [json.loads(line) for line in b.text().splitlines()]


def _text(lines: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(line) + "\n" for line in lines)


@pytest.mark.parametrize(
    ("mutate", "line", "where"),
    [
        (lambda ls: ls[0].update(version=2), 1, "version"),
        (lambda ls: ls[0].update(format="x"), 1, "format"),
        (lambda ls: ls.pop(0), 1, "type"),
        (lambda ls: ls[1].update(op="delete"), 2, "op"),
        (lambda ls: ls[1]["args"].pop("now_ms"), 2, "args"),
        (lambda ls: ls[1]["args"].update(ttl_ms=0), 2, "args.ttl_ms"),
        (lambda ls: ls[1].update(extra=1), 2, "<line>"),
        (lambda ls: ls[2].update(id=99), 3, "id"),
        (lambda ls: ls[2].update(process=7), 3, "process"),
        (lambda ls: ls[2]["result"]["run"].update(status="OPEN"), 3, "result.run.status"),
        (lambda ls: ls[3].update(id=0), 4, "id"),
        (lambda ls: ls[4].update(process=1), 5, "process"),
        (lambda ls: ls[5].update(type="done"), 6, "type"),
        (lambda ls: ls[5]["result"].update(code="NOPE"), 6, "result.code"),
    ],
)
def test_malformed_history_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, mutate: Any, line: int, where: str
) -> None:
    """CIS-HIST-1: a malformed history exits 2 with its line and JSON path, on stderr; never a traceback."""
    lines = _lines(_duplicate_history(both_admitted=False))
    mutate(lines)
    path = _write(tmp_path, _text(lines))
    code, out, err = _run(capsys, path)
    assert (code, out) == (2, "")
    assert err.startswith(f"check-history: malformed history: line {line}: {where}")
    assert "Traceback" not in err
    code, out, _ = _run(capsys, "--json", path)
    verdict = json.loads(out)
    assert (code, verdict["status"], verdict["line"], verdict["where"]) == (2, "malformed", line, where)


def test_not_json_and_blank_and_empty(tmp_path: Path) -> None:
    """CIS-HIST-1: non-JSON, duplicate members, blank lines and an empty file are malformed."""
    good = _duplicate_history(both_admitted=False).text().splitlines(keepends=True)
    for bad, line in (
        ([good[0], "{not json\n"], 2),
        ([good[0], "\n"], 2),
        ([good[0], '{"type":"ok","type":"ok"}\n'], 2),
        ([good[0], '{"type":"info","id":1,"process":NaN}\n'], 2),
        ([], 1),
    ):
        with pytest.raises(MalformedHistoryError) as caught:
            decode_history(bad)
        assert caught.value.line == line


def test_unreadable_file_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """CIS-HIST-2: an unreadable file exits 2 (one object with --json)."""
    missing = str(tmp_path / "missing.jsonl")
    code, out, err = _run(capsys, missing)
    assert (code, out) == (2, "")
    assert "cannot read" in err
    code, out, _ = _run(capsys, "--json", missing)
    assert json.loads(out)["status"] == "error"


def test_reads_standard_input(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """CIS-HIST-2: '-' reads the history from standard input."""
    text = _duplicate_history(both_admitted=True).text()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    code, out, _ = _run(capsys, "-")
    assert code == 1
    assert "not linearizable" in out


def test_schema_file_is_generated_and_lines_validate() -> None:
    """CIS-HIST-1: spec/history.schema.json is the generated schema; built lines validate against it,
    and lines the decoder rejects for shape are rejected by the schema too."""
    on_disk = json.loads((SPEC / "history.schema.json").read_text(encoding="utf-8"))
    assert on_disk == json.loads(json.dumps(history_schema()))
    jsonschema.Draft202012Validator.check_schema(on_disk)
    validator = jsonschema.Draft202012Validator(on_disk)
    b = _duplicate_history(both_admitted=False)
    info = b.invoke(3, "get", run_id="run-1", tool_call_id="call_1")
    b.info(info)
    for line in _lines(b):
        assert list(validator.iter_errors(line)) == [], line["type"]
    lines = _lines(b)
    lines[1]["args"]["ttl_ms"] = 0
    lines[2]["result"]["run"]["status"] = "OPEN"
    lines[3]["op"] = "delete"
    for bad in lines[1:4]:
        assert list(validator.iter_errors(bad)) != []
