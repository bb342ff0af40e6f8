"""`invocation-store replay`: example transcripts through the boundary, output and errors."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import redis

from invocation_store._cli import replay as replay_module
from invocation_store.adapters import MemoryStore
from invocation_store.adapters.sqlite import SqliteStore
from invocation_store.cli import main
from invocation_store.testing.redis_server import RedisServerUnavailableError, redis_server

ROOT = Path(__file__).resolve().parents[2]
TRANSCRIPTS = ROOT / "examples" / "transcripts"

FOUND, NONE = "EVIDENCE_FOUND", "NO_EVIDENCE"

#: Per transcript: every call in order as (tool_call_id or None, tool, outcome), where the
#: outcome is the evidence status of a READY call or the code of a failed one.
EXPECTED: dict[str, list[tuple[str | None, str, str]]] = {
    "openai_chat.json": [
        ("call_q1Xb7RkT2mZ9", "search_logs", FOUND),
        ("call_f8Lw3NcY6pA4", "query_db", FOUND),
        ("call_Z2vK9dQe1sHu", "search_runbooks", FOUND),
        ("call_f8Lw3NcY6pA4", "query_db", "DUPLICATE_TOOL_CALL"),
        ("call_k4Dn7YpR1wQs", "search_logs", FOUND),
        ("call_m3Rt8UwV0bJx", "restart_service", "NOT_READ_ONLY"),
        ("call_a7Gh2KsP5nQy", "search_logs", "INVALID_ARGUMENTS"),
    ],
    "openai_responses.json": [
        ("call_Wn4xT9bL2cVe", "search_logs", FOUND),
        ("call_Ry6uE1oI3pAs", "query_db", FOUND),
        ("call_Hj5kL8zX0cMn", "read_vault_secret", "UNAUTHORIZED"),
        ("call_Tq2wE4rT6yUi", "query_db", "EXECUTION_FAILED"),
        ("call_Pz9xC7vB5nMa", "search_logs", "RUN_MISMATCH"),
        ("call_Bn3mQ1wE8rTy", "query_db", "INVALID_ARGUMENTS"),
        ("call_Vc8bN2mK4lJh", "search_runbooks", FOUND),
    ],
    "anthropic.json": [
        ("toolu_01HqV3kX8mZ2wN5rT7yB9cDe", "search_logs", FOUND),
        ("toolu_01Jr6sP4nL1vQ8xM2zK5aFgh", "runbook_outline", FOUND),
        ("toolu_01Kw2eR7tY4uI9oP1aS3dLmn", "search_logs", "RESULT_TOO_LARGE"),
        ("toolu_01Lx5cV8bN3mQ6wE0rT2yUop", "runbook_outline", "PROJECTION_FAILED"),
        ("toolu_01Mz8aS1dF4gH7jK0lZ3xCqr", "search_logs", NONE),
    ],
    "gemini.json": [
        ("gc-5d3f1a90-0001", "query_db", FOUND),
        ("gc-5d3f1a90-0002", "search_runbooks", NONE),
        (None, "search_logs", "MISSING_TOOL_CALL_ID"),
        ("gc-5d3f1a90-0003", "search_logs", FOUND),
    ],
}

FORMATS = {
    "openai_chat.json": "openai-chat",
    "openai_responses.json": "openai-responses",
    "anthropic.json": "anthropic",
    "gemini.json": "gemini",
}

#: Codes that leave no record (decided before anything is written).
NO_RECORD = {
    "DUPLICATE_TOOL_CALL",
    "NOT_READ_ONLY",
    "INVALID_ARGUMENTS",
    "UNAUTHORIZED",
    "RUN_MISMATCH",
    "MISSING_TOOL_CALL_ID",
    "TOOL_BUDGET_EXHAUSTED",
}


def replay_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    """Run ``invocation-store replay --json ...`` in-process and parse its stdout."""
    code = main(["replay", "--json", *args])
    out, err = capsys.readouterr()
    assert code == 0, err
    result: dict[str, Any] = json.loads(out)
    return result


def outcomes(result: dict[str, Any]) -> list[tuple[str | None, str, str]]:
    return [
        (call["tool_call_id"], call["tool"], call["evidence_status"] if call["ok"] else call["code"])
        for call in result["calls"]
    ]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_transcript_outcomes(capsys: pytest.CaptureFixture[str], name: str) -> None:
    """CIS-PRE-7, CIS-PRE-2, CIS-ID-5, CIS-BND-2: every example call gets its documented status or code."""
    result = replay_json(capsys, str(TRANSCRIPTS / name))
    assert result["run"]["format"] == FORMATS[name]
    assert outcomes(result) == EXPECTED[name]
    # Records: exactly the calls that passed preflight, in admission order.
    admitted = [(tcid, tool, out) for tcid, tool, out in EXPECTED[name] if out not in NO_RECORD]
    assert [(r["tool_call_id"], r["tool"]) for r in result["records"]] == [(t, n) for t, n, _ in admitted]
    assert [r["sequence"] for r in result["records"]] == list(range(1, len(admitted) + 1))
    for record, (_, _, out) in zip(result["records"], admitted, strict=True):
        if out in (FOUND, NONE):
            assert (record["status"], record["evidence_status"], record["error_code"]) == ("READY", out, None)
            assert record["raw_bytes"] > 0
            assert 0 < record["agent_result_bytes"] <= result["run"]["limits"]["agent_result_bytes"]
        else:
            assert (record["status"], record["evidence_status"], record["error_code"]) == (
                "ERROR",
                "ERROR",
                out,
            )
            assert record["agent_result_bytes"] is None
        assert 0 < record["ttl_remaining_ms"] <= result["run"]["ttl_ms"]
    rejected = [(r["tool_call_id"], r["tool"], r["code"]) for r in result["rejected"]]
    assert rejected == [(t, n, out) for t, n, out in EXPECTED[name] if out in NO_RECORD]
    # Progress facts: exactly the READY records, in execution order (design invariant 8).
    ready = [r for r in result["records"] if r["status"] == "READY"]
    facts = result["progress"]["facts"]
    assert [(f["tool_call_id"], f["evidence_status"]) for f in facts] == [
        (r["tool_call_id"], r["evidence_status"]) for r in ready
    ]
    errors = len(result["records"]) - len(ready)
    assert result["progress"]["excluded"] == ({"ERROR": errors} if errors else {})
    assert result["run"]["status"] == "CLOSED"
    assert result["run"]["tool_calls_used"] == len(admitted)


def test_special_cases_of_the_examples(capsys: pytest.CaptureFixture[str]) -> None:
    """CIS-SIZE-3, CIS-EVID-3, CIS-EVID-5: raw over the limit is not stored; NO_EVIDENCE keeps its scope."""
    result = replay_json(capsys, str(TRANSCRIPTS / "anthropic.json"))
    assert result["run"]["limits"]["raw_bytes"] == 16384  # the transcript's own option
    by_id = {r["tool_call_id"]: r for r in result["records"]}
    too_large = by_id["toolu_01Kw2eR7tY4uI9oP1aS3dLmn"]
    assert too_large["raw_bytes"] is None  # not stored, not truncated
    failed_projection = by_id["toolu_01Lx5cV8bN3mQ6wE0rT2yUop"]
    assert failed_projection["raw_bytes"] == len(
        (ROOT / "examples" / "data" / "runbooks" / "legacy-cache.md").read_bytes()
    )
    negative = [f for f in result["progress"]["facts"] if f["negative"]]
    assert len(negative) == 1
    assert negative[0]["scope"].startswith(
        "logs/*.log (3 files, 238 lines); any level; time 2026-11-01T02:00:00Z"
    )


def test_command_line_options_override_the_transcript(capsys: pytest.CaptureFixture[str]) -> None:
    """CIS-SIZE-3, CIS-RUN-5: --raw-limit beats the transcript's option; --tool-budget caps admissions."""
    result = replay_json(capsys, str(TRANSCRIPTS / "anthropic.json"), "--raw-limit", "4194304")
    assert outcomes(result)[2] == ("toolu_01Kw2eR7tY4uI9oP1aS3dLmn", "search_logs", FOUND)
    result = replay_json(capsys, str(TRANSCRIPTS / "openai_chat.json"), "--tool-budget", "2")
    assert [out for _, _, out in outcomes(result)] == [
        FOUND,
        FOUND,
        "TOOL_BUDGET_EXHAUSTED",
        "DUPLICATE_TOOL_CALL",  # checked before the budget: a duplicate never consumes it
        "TOOL_BUDGET_EXHAUSTED",
        "NOT_READ_ONLY",
        "INVALID_ARGUMENTS",
    ]


def test_result_limit_and_run_id_options(capsys: pytest.CaptureFixture[str]) -> None:
    """CIS-SIZE-4, CIS-PRE-3: a tiny --result-limit gives RESULT_TOO_LARGE; --run-id renames the run."""
    result = replay_json(capsys, str(TRANSCRIPTS / "gemini.json"), "--result-limit", "64")
    assert [out for _, _, out in outcomes(result)] == [
        "RESULT_TOO_LARGE",
        "RESULT_TOO_LARGE",
        "MISSING_TOOL_CALL_ID",
        "RESULT_TOO_LARGE",
    ]
    result = replay_json(capsys, str(TRANSCRIPTS / "openai_responses.json"), "--run-id", "my-run.7")
    assert result["run"]["run_id"] == "my-run.7"
    assert outcomes(result) == EXPECTED["openai_responses.json"]


def test_json_output_structure(capsys: pytest.CaptureFixture[str]) -> None:
    """CIS-BND-4, CIS-REC-3: --json has run, calls, records, rejected and progress, and no raw response."""
    result = replay_json(capsys, str(TRANSCRIPTS / "openai_chat.json"))
    assert set(result) == {"run", "calls", "records", "rejected", "progress"}
    assert set(result["run"]) == {
        "run_id",
        "transcript",
        "format",
        "store",
        "status",
        "ttl_ms",
        "deadline_ms",
        "tool_call_budget",
        "byte_budget",
        "tool_calls_used",
        "bytes_used",
        "limits",
    }
    assert result["run"]["store"] == "memory"
    assert set(result["records"][0]) == {
        "sequence",
        "tool_call_id",
        "tool",
        "status",
        "evidence_status",
        "error_code",
        "request_bytes",
        "raw_bytes",
        "agent_result_bytes",
        "ttl_remaining_ms",
    }
    assert set(result["calls"][0]) == {
        "index",
        "tool_call_id",
        "tool",
        "ok",
        "evidence_status",
        "code",
        "record",
    }
    assert set(result["rejected"][0]) == {"index", "tool_call_id", "id_note", "tool", "code"}
    assert set(result["progress"]) == {"facts", "excluded", "omitted"}
    assert set(result["progress"]["facts"][0]) == {
        "tool_call_id",
        "tool",
        "sequence",
        "evidence_status",
        "negative",
        "content",
        "scope",
    }


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_output_never_contains_raw_responses_or_requests(
    capsys: pytest.CaptureFixture[str], name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CIS-BND-4, CIS-REC-3: neither the table nor --json prints a raw response or a request text."""
    stores: list[MemoryStore] = []

    class Keeping(MemoryStore):
        def close(self) -> None:
            stores.append(self)

    monkeypatch.setattr(replay_module, "MemoryStore", Keeping)
    outputs = []
    for extra in ([], ["--json"]):
        assert main(["replay", str(TRANSCRIPTS / name), *extra]) == 0
        outputs.append(capsys.readouterr().out)
    store = stores[-1]
    run_id = json.loads(outputs[1])["run"]["run_id"]
    records = store.get_many(run_id, store.calls(run_id))
    raws = [r.raw_response for r in records.values() if r is not None and r.raw_response]
    requests = [r.request_json for r in records.values() if r is not None]
    assert raws
    assert requests
    for text in outputs:
        for raw in raws:
            assert raw not in text
        for request in requests:
            assert request not in text


def test_text_table(capsys: pytest.CaptureFixture[str]) -> None:
    """CIS-BND-1: the readable report lists records, rejected calls and progress facts."""
    assert main(["replay", str(TRANSCRIPTS / "openai_chat.json")]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("run run-inc2031-chat  (openai-chat transcript")
    assert "7 tool calls: 4 records (4 READY, 0 ERROR), 3 rejected before any record was written" in out
    header = next(line for line in lines if line.startswith("seq"))
    assert header.split() == [
        "seq",
        "tool_call_id",
        "tool",
        "status",
        "evidence",
        "request",
        "raw",
        "result",
        "ttl",
        "left",
        "error",
    ]
    assert any(
        line.split()[1:4] == ["call_m3Rt8UwV0bJx", "restart_service", "NOT_READ_ONLY"] for line in lines
    )
    assert "Progress facts (4 facts; excluded: none; omitted: 0)" in out


# -- malformed input ----------------------------------------------------------------------------


MALFORMED: list[tuple[str, str | None, str]] = [
    ("bad.json", '{"messages": [', "not valid JSON"),
    ("list.json", "[1, 2]", "a transcript is a JSON object, not a list"),
    ("unknown.json", '{"hello": "world"}', "cannot detect the transcript format"),
    ("nocalls.json", '{"messages": [{"role": "user", "content": "hi"}]}', "cannot detect"),
    ("meta.json", '{"x_invocation_store": [], "contents": []}', "'x_invocation_store' must be an object"),
    ("metakey.json", '{"x_invocation_store": {"runid": "x"}, "contents": []}', "unknown keys: runid"),
    (
        "option.json",
        '{"x_invocation_store": {"options": {"raw_limit": "big"}}, "contents": []}',
        "'x_invocation_store.options.raw_limit' must be a positive integer",
    ),
    (
        "runid.json",
        '{"x_invocation_store": {"run_id": "bad run"}, "contents": []}',
        "the run id is not a safe id",
    ),
    (
        "calls.json",
        '{"messages": [{"role": "assistant", "tool_calls": 5}]}',
        "'tool_calls' value is not a list",
    ),
    ("latin1.json", None, "not UTF-8 text"),
    ("deep.json", "[" * 100_000 + "]" * 100_000, "not valid JSON"),
]


@pytest.mark.parametrize(("name", "text", "message"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_transcripts_are_one_line_errors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str, text: str | None, message: str
) -> None:
    """CIS-FAIL-1: a malformed transcript exits 2 with one line on stderr, no traceback, nothing on stdout."""
    path = tmp_path / name
    if text is None:
        path.write_bytes(b'{"contents": ["caf\xe9"]}')
    else:
        path.write_text(text, encoding="utf-8")
    assert main(["replay", str(path), "--data-dir", str(ROOT / "examples" / "data")]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith("invocation-store replay: ")
    assert message in err
    assert "Traceback" not in err


def test_missing_file_directory_and_wrong_format(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """CIS-FAIL-1: a missing file, a directory, a forced wrong format and a missing data folder exit 2."""
    cases = [
        ([str(tmp_path / "nope.json")], "no such file"),
        ([str(tmp_path)], "is a directory"),
        ([str(TRANSCRIPTS / "gemini.json"), "--format", "openai-chat"], "needs a 'messages'"),
        ([str(TRANSCRIPTS / "gemini.json"), "--data-dir", str(tmp_path / "none")], "does not exist"),
    ]
    for args, message in cases:
        assert main(["replay", *args]) == 2
        out, err = capsys.readouterr()
        assert out == ""
        assert err.count("\n") == 1, err
        assert message in err


def test_console_script_errors_without_traceback(tmp_path: Path) -> None:
    """CIS-FAIL-1, CIS-ERR-1: the installed command exits 2 with one line for bad JSON or a bad option."""
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    script = Path(sys.executable).with_name("invocation-store")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "invocation_store.cli"]
    for args in ([str(bad)], [str(TRANSCRIPTS / "gemini.json"), "--raw-limit", "0"]):
        proc = subprocess.run(
            [*command, "replay", *args], capture_output=True, text=True, timeout=60, check=False
        )
        assert proc.returncode == 2
        assert "Traceback" not in proc.stderr
        assert proc.stdout == ""
    proc = subprocess.run(
        [*command, "replay", str(bad)], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.stderr.strip().count("\n") == 0


def test_help_documents_every_option_and_default(capsys: pytest.CaptureFixture[str]) -> None:
    """CIS-BND-1: `replay --help` lists every option with its default."""
    with pytest.raises(SystemExit) as exit_info:
        main(["replay", "--help"])
    assert exit_info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for flag, default in [
        ("--format", "auto"),
        ("--redis-url", None),
        ("--prefix", "cis"),
        ("--run-id", None),
        ("--data-dir", "examples/data"),
        ("--ttl-ms", "3600000"),
        ("--deadline-ms", "300000"),
        ("--tool-budget", "100"),
        ("--byte-budget", "67108864"),
        ("--request-limit", "262144"),
        ("--raw-limit", "4194304"),
        ("--result-limit", "16384"),
        ("--record-limit", "5242880"),
        ("--json", None),
    ]:
        assert flag in text
        if default is not None:
            assert default in text


# -- Redis ---------------------------------------------------------------------------------------


@pytest.mark.redis
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_replay_on_redis_gives_the_same_records(
    capsys: pytest.CaptureFixture[str], redis_url: str, name: str
) -> None:
    """CIS-STORE-8: replaying into Redis gives the same calls, records and facts as in memory."""
    memory = replay_json(capsys, str(TRANSCRIPTS / name))
    prefix = f"cli-{name.split('.', maxsplit=1)[0]}"
    on_redis = replay_json(capsys, str(TRANSCRIPTS / name), "--redis-url", redis_url, "--prefix", prefix)
    assert on_redis["run"]["store"] == "redis"
    assert on_redis["calls"] == memory["calls"]
    assert on_redis["rejected"] == memory["rejected"]
    assert on_redis["progress"] == memory["progress"]

    def without_ttl(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in row.items() if k != "ttl_remaining_ms"} for row in rows]

    assert without_ttl(on_redis["records"]) == without_ttl(memory["records"])
    for row in on_redis["records"]:
        assert 0 < row["ttl_remaining_ms"] <= on_redis["run"]["ttl_ms"]
    assert redis_url not in json.dumps(on_redis)


@pytest.mark.redis
def test_replaying_the_same_run_twice_on_redis_is_refused_cleanly(
    capsys: pytest.CaptureFixture[str], redis_url: str
) -> None:
    """CIS-RETRY-3, CIS-ID-5: a second replay of a closed run is a one-line error (exit 1), not duplicates."""
    args = ["replay", str(TRANSCRIPTS / "gemini.json"), "--redis-url", redis_url, "--prefix", "cli-twice"]
    assert main(args) == 0
    capsys.readouterr()
    assert main(args) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1
    assert "cannot open run run-inc2031-gemini" in err


def test_unreachable_redis_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """CIS-FAIL-5: an unreachable Redis is one safe line (exit 1) that never echoes the URL or password."""
    url = "redis://:s3cret-pass@127.0.0.1:1/0"
    code = main(["replay", str(TRANSCRIPTS / "gemini.json"), "--redis-url", url])
    out, err = capsys.readouterr()
    assert code == 1
    assert err.count("\n") == 1
    assert "unavailable" in err
    assert "s3cret" not in err + out
    assert "127.0.0.1:1" not in err


@pytest.mark.redis
@pytest.mark.parametrize(
    ("extra_args", "named"),
    [
        (["--maxmemory-policy", "allkeys-lru"], "maxmemory-policy allkeys-lru can evict"),
        (["--maxmemory-policy", "volatile-ttl"], "set maxmemory-policy noeviction"),
    ],
    ids=["allkeys-lru", "volatile-ttl"],
)
def test_a_refused_server_is_named_by_its_setting(
    capsys: pytest.CaptureFixture[str], extra_args: list[str], named: str
) -> None:
    """CIS-FAIL-5, CIS-DUR-3: a server the store refuses (an evicting policy) is one line that names
    the setting to change, never "(unknown)": reads do not meet the server check, so a read alone
    could not say why the run did not open."""
    try:
        server = redis_server(extra_args=extra_args)
        url = server.__enter__()
    except RedisServerUnavailableError as exc:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(str(exc))
    try:
        code = main(["replay", str(TRANSCRIPTS / "gemini.json"), "--redis-url", url])
    finally:
        server.__exit__(None, None, None)
    out, err = capsys.readouterr()
    assert code == 1
    assert out == ""
    assert err.count("\n") == 1
    assert named in err
    assert "(unknown)" not in err


@pytest.mark.redis
def test_a_user_who_may_not_write_is_named_not_unknown(capsys: pytest.CaptureFixture[str]) -> None:
    """CIS-FAIL-5, CIS-DUR-9: replaying as a user granted only reads fails on its first write; the
    one line names the refusal (the server check's permission error), never "(unknown)": the
    read that used to name the failure succeeds for such a user. No password in it."""
    try:
        server = redis_server()
        url = server.__enter__()
    except RedisServerUnavailableError as exc:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(str(exc))
    try:
        with redis.Redis.from_url(url) as admin:
            admin.acl_setuser(
                "reader",
                enabled=True,
                reset=True,
                passwords=["+reader-pw"],
                keys=["*"],
                commands=["-@all", "+@read", "+@connection"],
            )
        reader = url.replace("redis://", "redis://reader:reader-pw@")
        code = main(["replay", str(TRANSCRIPTS / "gemini.json"), "--redis-url", reader])
    finally:
        server.__exit__(None, None, None)
    out, err = capsys.readouterr()
    assert code == 1
    assert err.count("\n") == 1
    assert "NoPermissionError" in err
    assert "(unknown)" not in err
    assert "reader-pw" not in out + err


def test_examples_readme_shows_the_real_output(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """CIS-BND-1: the quick-start output in examples/README.md is what the command prints today."""
    monkeypatch.chdir(ROOT)
    readme = (ROOT / "examples" / "README.md").read_text(encoding="utf-8")
    start = readme.index("```text\nrun run-inc2031-chat") + len("```text\n")
    shown = readme[start : readme.index("```", start)]
    assert main(["replay", "examples/transcripts/openai_chat.json"]) == 0
    printed = capsys.readouterr().out

    def normal(text: str) -> str:
        return re.sub(r"\b\d+\.\ds\b", "<ttl>", text)

    assert normal(printed) == normal(shown)


def test_replay_into_a_sqlite_file_keeps_the_records(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """CIS-STORE-4, CIS-DUR-1: ``--store sqlite:PATH`` replays into a durable file: the report of the
    in-memory store (TTLs aside), and the records are in the file afterwards, read by another store."""
    transcript = str(TRANSCRIPTS / "openai_chat.json")
    assert main(["replay", "--json", transcript]) == 0
    in_memory = json.loads(capsys.readouterr().out)
    path = tmp_path / "calls.db"
    assert main(["replay", "--json", "--store", f"sqlite:{path}", transcript]) == 0
    on_file = json.loads(capsys.readouterr().out)
    assert on_file["run"]["store"] == "sqlite"
    in_memory["run"].pop("store")
    on_file["run"].pop("store")
    assert _without_ttls(on_file) == _without_ttls(in_memory)
    store = SqliteStore(path)
    try:
        run_id = in_memory["run"]["run_id"]
        assert len(store.calls(run_id)) == len(in_memory["records"]) == 4
    finally:
        store.close()


def _without_ttls(value: Any) -> Any:
    """``value`` (a JSON report) without its ``ttl_remaining_ms`` entries, which depend on timing."""
    if isinstance(value, dict):
        return {key: _without_ttls(item) for key, item in value.items() if key != "ttl_remaining_ms"}
    if isinstance(value, list):
        return [_without_ttls(item) for item in value]
    return value


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--store", "nope"], "--store is memory, sqlite:PATH or postgres"),
        (["--store", "sqlite:"], "--store is memory, sqlite:PATH or postgres"),
        (["--store", "postgres"], "--store postgres needs INVOCATION_STORE_POSTGRES_DSN"),
        (["--store", "memory", "--redis-url", "redis://127.0.0.1:1/0"], "exclude each other"),
    ],
)
def test_bad_store_choices_are_one_line_errors(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, argv: list[str], message: str
) -> None:
    """CIS-FAIL-5: a store the command cannot open is exit 2 with one line, no traceback, no URL."""
    monkeypatch.delenv("INVOCATION_STORE_POSTGRES_DSN", raising=False)
    assert main(["replay", *argv, str(TRANSCRIPTS / "openai_chat.json")]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err
    assert "127.0.0.1:1" not in err


def test_a_transcript_over_the_size_limit_is_refused_before_it_is_read(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CIS-SIZE-2, CIS-FAIL-1: over ``--max-transcript-bytes`` (default 32 MiB): exit 2, one line, unread."""
    huge = tmp_path / "huge.json"
    with huge.open("wb") as handle:  # a sparse file: its size is known without writing it
        handle.truncate(replay_module.DEFAULT_MAX_TRANSCRIPT_BYTES + 1)
    parsed: list[str] = []
    monkeypatch.setattr(replay_module, "load_document", parsed.append)
    assert main(["replay", str(huge)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1
    assert f"{replay_module.DEFAULT_MAX_TRANSCRIPT_BYTES + 1} bytes, over the transcript limit" in err
    assert "--max-transcript-bytes" in err
    assert parsed == []  # never read, never parsed
    monkeypatch.undo()
    small = TRANSCRIPTS / "gemini.json"
    size = small.stat().st_size
    data = ["--data-dir", str(ROOT / "examples" / "data")]
    assert main(["replay", str(small), "--max-transcript-bytes", str(size - 1), *data]) == 2
    assert "over the transcript limit of" in capsys.readouterr().err
    assert main(["replay", str(small), "--max-transcript-bytes", str(size), *data]) == 0


def test_a_pipe_is_read_only_up_to_the_limit(tmp_path: Path) -> None:
    """CIS-SIZE-2: a file whose ``stat`` size says nothing (a FIFO) is still read at most limit + 1 bytes."""
    fifo = tmp_path / "transcript.fifo"
    os.mkfifo(fifo)

    def write() -> None:
        with contextlib.suppress(BrokenPipeError), fifo.open("wb") as handle:
            handle.write(b" " * 10_000)

    writer = threading.Thread(target=write)
    writer.start()
    with pytest.raises(replay_module.TranscriptError, match="over the transcript limit of 100 bytes"):
        replay_module.load_transcript(fifo, max_bytes=100)
    writer.join(timeout=10)


def test_object_arguments_are_measured_against_the_runs_request_limit(tmp_path: Path) -> None:
    """CIS-SIZE-2: a transcript's object arguments meet the request limit the run uses, not the default."""
    big = {"q": "x" * 300_000}
    message = {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "search_logs", "input": big}],
    }
    path = tmp_path / "big.json"
    path.write_text(json.dumps({"messages": [message]}), encoding="utf-8")
    (default,) = replay_module.load_transcript(path).calls
    assert (
        len(default.envelope.arguments or "") == replay_module.DEFAULTS["request_limit"] + 1
    )  # refused early
    (wide,) = replay_module.load_transcript(path, request_bytes=1 << 20).calls
    assert wide.envelope.arguments == json.dumps(big, separators=(",", ":"))
