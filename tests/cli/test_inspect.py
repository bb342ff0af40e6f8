"""`invocation-store inspect`: a run's records and TTLs from Redis, read-only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import redis

from invocation_store.adapters import call_key
from invocation_store.cli import main

ROOT = Path(__file__).resolve().parents[2]
TRANSCRIPT = ROOT / "examples" / "transcripts" / "openai_responses.json"
RUN = "run-inc2031-responses"

#: Commands that write or touch a TTL: none may run while inspecting (also counted inside scripts).
FORBIDDEN = {
    "expire",
    "pexpire",
    "expireat",
    "pexpireat",
    "persist",
    "getex",
    "getdel",
    "set",
    "setex",
    "psetex",
    "mset",
    "hset",
    "hmset",
    "hsetnx",
    "hdel",
    "hincrby",
    "del",
    "unlink",
    "rpush",
    "lpush",
    "lset",
    "ltrim",
    "incr",
    "incrby",
    "rename",
    "copy",
    "restore",
    "touch",
}


def _commandstats(client: redis.Redis) -> dict[str, int]:
    stats = client.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(value["calls"]) for name, value in stats.items()}


def _pttls(client: redis.Redis, prefix: str, ids: list[str]) -> dict[str, int]:
    return {tcid: int(client.pttl(call_key(prefix, RUN, tcid))) for tcid in ids}


@pytest.mark.redis
def test_inspect_lists_records_without_touching_ttls(
    capsys: pytest.CaptureFixture[str], redis_url: str
) -> None:
    """CIS-TTL-5, CIS-TTL-2: inspect reads records and PTTLs; PTTL never rises, no EXPIRE-family call."""
    prefix = "cli-inspect"
    replay_args = ["replay", "--json", str(TRANSCRIPT), "--redis-url", redis_url, "--prefix", prefix]
    assert main(replay_args) == 0
    replayed: dict[str, Any] = json.loads(capsys.readouterr().out)
    ids = [row["tool_call_id"] for row in replayed["records"]]
    assert len(ids) == 4
    client = redis.Redis.from_url(redis_url)
    try:
        before = _pttls(client, prefix, ids)
        assert all(0 < ttl <= 3_600_000 for ttl in before.values())
        stats_before = _commandstats(client)
        inspect_args = ["inspect", "--redis-url", redis_url, "--run", RUN, "--prefix", prefix]
        assert main([*inspect_args, "--json"]) == 0
        listing: dict[str, Any] = json.loads(capsys.readouterr().out)
        assert main(inspect_args) == 0
        text = capsys.readouterr().out
        assert main([*inspect_args, "--raw-sizes", "--json"]) == 0
        with_raw: dict[str, Any] = json.loads(capsys.readouterr().out)
        stats_after = _commandstats(client)
        after = _pttls(client, prefix, ids)
    finally:
        client.close()
    ran = {name for name, calls in stats_after.items() if calls > stats_before.get(name, 0)}
    assert not ran & FORBIDDEN, ran
    for tcid in ids:
        assert after[tcid] <= before[tcid]
    # The listing is the replay's records, with TTLs read through PTTL.
    assert [row["tool_call_id"] for row in listing["records"]] == ids
    for row, original in zip(listing["records"], replayed["records"], strict=True):
        for key in ("sequence", "tool", "status", "evidence_status", "error_code", "request_bytes"):
            assert row[key] == original[key]
        assert row["raw_bytes"] is None  # raw responses not even read by default
        assert 0 < row["ttl_remaining_ms"] <= original["ttl_remaining_ms"]
    assert [row["raw_bytes"] for row in with_raw["records"]] == [
        row["raw_bytes"] for row in replayed["records"]
    ]
    assert listing["run"]["status"] == "CLOSED"
    assert listing["run"]["tool_calls_used"] == 4
    assert text.startswith(f"run {RUN}: CLOSED, 4/100 calls")
    assert "call_Tq2wE4rT6yUi" in text
    assert "EXECUTION_FAILED" in text


@pytest.mark.redis
def test_inspect_unknown_run_and_bad_input(capsys: pytest.CaptureFixture[str], redis_url: str) -> None:
    """CIS-FAIL-5, CIS-ID-3: an unknown run exits 1, an unsafe run id exits 2, both one line on stderr."""
    assert main(["inspect", "--redis-url", redis_url, "--run", "no-such-run", "--prefix", "cli-none"]) == 1
    _, err = capsys.readouterr()
    assert err.count("\n") == 1
    assert "no run no-such-run" in err
    assert main(["inspect", "--redis-url", redis_url, "--run", "bad run"]) == 2
    _, err = capsys.readouterr()
    assert err.count("\n") == 1
    assert "not a safe id" in err


def test_inspect_unreachable_redis_is_one_safe_line(capsys: pytest.CaptureFixture[str]) -> None:
    """CIS-FAIL-5: an unreachable Redis is one line (exit 1) without the URL or its password."""
    code = main(["inspect", "--redis-url", "redis://:hunter2@127.0.0.1:1/0", "--run", RUN])
    out, err = capsys.readouterr()
    assert code == 1
    assert out == ""
    assert err.count("\n") == 1
    assert "unavailable" in err
    assert "hunter2" not in err


def test_inspect_help_is_complete(capsys: pytest.CaptureFixture[str]) -> None:
    """CIS-TTL-5: `inspect --help` documents every option and says it never changes a TTL."""
    with pytest.raises(SystemExit):
        main(["inspect", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for flag in ("--redis-url", "--run", "--prefix", "--raw-sizes", "--json"):
        assert flag in text
    assert "never" in text
    assert "TTL" in text
