"""`invocation-store check-trace FILE|-`: exit codes, output, no traceback (issue 6, step 2)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from invocation_store.cli import main

from ._traces import EXAMPLE, example, find, op, text


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["check-trace", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_conforming_trace_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    """CIS-ORC-2: a conforming trace exits 0 and says so (nothing with --quiet)."""
    code, out, err = _run(capsys, str(EXAMPLE))
    assert (code, err) == (0, "")
    assert "conforms" in out
    assert "19 lines" in out
    assert _run(capsys, "--quiet", str(EXAMPLE)) == (0, "", "")


def test_divergence_exits_1_with_line_op_values_and_requirement(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """CIS-ORC-2: a divergence prints the line number, the operation, expected vs observed and the
    requirement ID, and exits 1; --json gives the same as one object."""
    lines = example()
    index = find(lines, lambda line: line["op"] == "submit" and line["envelope"]["tool_call_id"] is None)
    lines[index]["observed"]["code"] = "UNSAFE_TOOL_CALL_ID"
    trace = tmp_path / "t.jsonl"
    trace.write_text(text(lines), encoding="utf-8")
    code, out, _err = _run(capsys, str(trace))
    assert code == 1
    assert f"line {index + 1}: submit" in out
    assert "[CIS-PRE-2]" in out
    assert 'expected: "MISSING_TOOL_CALL_ID"' in out
    assert 'observed: "UNSAFE_TOOL_CALL_ID"' in out
    code, out, _err = _run(capsys, "--json", str(trace))
    verdict = json.loads(out)
    assert code == 1
    assert verdict == {
        "status": "divergence",
        "line": index + 1,
        "op": "submit",
        "where": "observed.code",
        "expected": "MISSING_TOOL_CALL_ID",
        "observed": "UNSAFE_TOOL_CALL_ID",
        "requirement": "CIS-PRE-2",
        "message": verdict["message"],
    }


@pytest.mark.parametrize(
    ("content", "line", "reason"),
    [
        (b"", 1, "no header"),
        (b"{\n", 1, "not valid JSON"),
        (b"\xff\xfe\n", 1, "not UTF-8"),
        (b"[1]\n", 1, "JSON object"),
        (b"\n", 1, "empty line"),
        (b'{"op":"clock","op":"header"}\n', 1, "duplicate member"),
        (b'{"op":"clock","now_ms":NaN}\n', 1, "not valid JSON"),
        (
            b'{"op":"clock","now_ms":' + b"9" * 5000 + b"}\n",
            1,
            "an integer literal of 5000 digits: I-JSON allows at most 4300",
        ),
        (b"[" * 100_000 + b"]" * 100_000 + b"\n", 1, "not valid JSON"),
        (b'{"op":"clock","now_ms":1}\n', 1, "header"),
        (
            b'{"op":"header","format":"canonical-invocation-trace","version":1,"now_ms":0,"limits":'
            b'{"request_bytes":1,"request_bytes":2}}\n',
            1,
            "limits: duplicate member name",
        ),
    ],
)
def test_malformed_trace_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: bytes, line: int, reason: str
) -> None:
    """CIS-ORC-2: a malformed trace exits 2 naming its line, never with a traceback."""
    trace = tmp_path / "bad.jsonl"
    trace.write_bytes(content)
    code, out, err = _run(capsys, str(trace))
    assert code == 2
    assert out == ""
    assert f"line {line}: malformed trace" in err
    assert reason in err
    assert "Traceback" not in err


def test_malformed_after_valid_lines_names_its_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """CIS-ORC-2: the line number of a malformed line deep in the trace, and its JSON path."""
    lines = text(example()).splitlines(keepends=True)
    lines.insert(5, '{"op":"read","run_id":"run-42","tool_call_id":"x","observed":{"record":{"status":1}}}\n')
    trace = tmp_path / "bad.jsonl"
    trace.write_text("".join(lines), encoding="utf-8")
    code, out, _err = _run(capsys, "--json", str(trace))
    assert code == 2
    verdict = json.loads(out)
    assert (verdict["status"], verdict["line"], verdict["where"]) == ("malformed", 6, "observed.record")
    assert set(verdict) == {"status", "line", "where", "message"}
    assert "missing required member" in verdict["message"]
    code, _out, err = _run(capsys, str(trace))
    assert code == 2
    assert "line 6: malformed trace: observed.record:" in err


def test_long_line_and_missing_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """CIS-ORC-2: a line over --max-line-bytes and an unreadable file exit 2 with one line of stderr."""
    code, _out, err = _run(capsys, "--max-line-bytes", "100", str(EXAMPLE))
    assert code == 2
    assert "line 1" in err
    assert "longer than 100 bytes" in err
    code, _out, err = _run(capsys, str(tmp_path / "missing.jsonl"))
    assert code == 2
    assert err.count("\n") == 1
    assert "cannot read" in err


def test_json_verdict_for_conforming_trace_documents_its_keys(capsys: pytest.CaptureFixture[str]) -> None:
    """CIS-ORC-2: --json on a conforming trace prints the keys spec/trace.md documents."""
    code, out, err = _run(capsys, "--json", str(EXAMPLE))
    assert (code, err) == (0, "")
    assert json.loads(out) == {"status": "conforms", "lines": 19, "unfinished_calls": 0}
    doc = (Path(__file__).resolve().parents[2] / "spec" / "trace.md").read_text(encoding="utf-8")
    for key in ("`lines`", "`unfinished_calls`", '`"error"`', '`"malformed"`', "`message`"):
        assert key in doc, key


def test_json_verdict_for_unreadable_file_and_bad_option(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """CIS-ORC-2: with --json an unreadable file still prints one JSON verdict on stdout (exit 2)."""
    missing = tmp_path / "missing.jsonl"
    code, out, err = _run(capsys, "--json", str(missing))
    assert code == 2
    assert out.count("\n") == 1
    verdict = json.loads(out)
    assert verdict["status"] == "error"
    assert (verdict["line"], verdict["where"]) == (None, None)
    assert "cannot read" in verdict["message"]
    assert err.count("\n") == 1
    code, out, _err = _run(capsys, "--json", "--max-line-bytes", "0", str(EXAMPLE))
    assert code == 2
    assert json.loads(out)["status"] == "error"
    code, out, _err = _run(capsys, "--json", str(tmp_path))
    assert code == 2
    assert json.loads(out)["status"] == "error"


def test_help_is_complete(capsys: pytest.CaptureFixture[str]) -> None:
    """CIS-ORC-2: --help documents FILE, '-', the options and the three exit codes."""
    with pytest.raises(SystemExit) as exit_info:
        main(["check-trace", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for needle in ("FILE", "'-'", "--json", "--quiet", "--max-line-bytes", "exit status", "0 ", "1 ", "2 "):
        assert needle in out, needle
    assert "spec/trace.md" in out


def test_stdin_and_no_traceback_in_a_real_process() -> None:
    """CIS-ORC-2: `check-trace -` reads standard input; a process fed garbage exits 2 without a
    traceback, one fed a divergence exits 1."""
    command = [sys.executable, "-m", "invocation_store.cli", "check-trace", "-"]
    good = subprocess.run(command, input=EXAMPLE.read_bytes(), capture_output=True, timeout=120, check=False)
    assert good.returncode == 0, good.stderr
    garbage = subprocess.run(command, input=b"\x00\xff{{{\n", capture_output=True, timeout=120, check=False)
    assert garbage.returncode == 2
    assert b"Traceback" not in garbage.stderr
    assert b"malformed" in garbage.stderr
    lines = example()
    lines[find(lines, op("result", call=1))]["observed"]["result"]["ok"] = False
    diverging = subprocess.run(
        command, input=text(lines).encode(), capture_output=True, timeout=120, check=False
    )
    assert diverging.returncode == 1
    assert b"line 6: result" in diverging.stdout
