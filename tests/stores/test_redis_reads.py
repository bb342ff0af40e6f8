"""The double-collect decision of a read-rights-only record read, on fabricated replies (CIS-DUR-9)."""

from __future__ import annotations

import pytest
import redis

from invocation_store.adapters._redis_core import run_keys
from invocation_store.adapters._redis_reads import SNAPSHOT_FIELDS, decide_snapshot, snapshot_commands

RUN = "run-1"
HASH = {
    b"run_id": b"run-1",
    b"tool_call_id": b"call_1",
    b"tool_name": b"search",
    b"invocation_token": b"tok",
    b"sequence": b"1",
    b"status": b"PROJECTING",
    b"request_json": b"{}",
    b"created_at_ms": b"5",
    b"updated_at_ms": b"5",
    b"expires_at_ms": b"1000",
}
SAME = [HASH[name.encode()] for name in SNAPSHOT_FIELDS]


def test_the_pipeline_is_plain_read_commands_with_the_check_last() -> None:
    """CIS-DUR-9: HGETALL, PTTL, GET per record, then one HMGET of the written-by-every-write fields."""
    keys = run_keys("cis", RUN)
    assert keys is not None
    commands = snapshot_commands(keys, ["call_1", "call_2"], include_raw=True)
    assert [command[0] for command in commands] == [
        "HGETALL",
        "PTTL",
        "GET",
        "HGETALL",
        "PTTL",
        "GET",
        "HMGET",
        "HMGET",
    ]
    assert commands[-1][2:] == SNAPSHOT_FIELDS
    assert [command[0] for command in snapshot_commands(keys, ["call_1"], include_raw=False)] == [
        "HGETALL",
        "PTTL",
    ]


def test_a_record_written_between_the_reads_is_read_again() -> None:
    """CIS-DUR-9: the same check fields mean a consistent snapshot; changed ones mean read it again
    (a completion landed between HGETALL and GET, whose raw response would not belong to the hash)."""
    stable = decide_snapshot([HASH, 900, None, SAME], RUN, ["call_1"], include_raw=True)
    assert stable.unstable == []
    assert stable.records["call_1"] is not None
    changed = [b"READY", b"9", b"tok"]
    moved = decide_snapshot([HASH, 900, b"raw", changed], RUN, ["call_1"], include_raw=True)
    assert moved.unstable == ["call_1"]
    assert moved.records == {}
    gone = decide_snapshot([HASH, 900, None, [None, None, None]], RUN, ["call_1"], include_raw=True)
    assert gone.unstable == ["call_1"]  # expired between the reads: read again, then absent
    absent = decide_snapshot([{}, -2, None, [None, None, None]], RUN, ["call_1"], include_raw=True)
    assert absent.records == {"call_1": None}


def test_corrupt_records_are_named_and_the_others_still_decided() -> None:
    """CIS-DUR-12: no TTL, a foreign type and an undecodable hash are named by id; others still read;
    an error reply that says nothing about the record is raised."""
    replies = [
        HASH, -1,  # no expiry
        redis.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value"), -1,
        {**HASH, b"tool_call_id": b"call_3", b"status": b"DONE"}, 900,
        {**HASH, b"tool_call_id": b"call_4"}, 900,
    ]  # fmt: skip
    snapshot = decide_snapshot(replies, RUN, ["call_1", "call_2", "call_3", "call_4"], include_raw=False)
    assert snapshot.corrupt == {"call_1": "NoTTL", "call_2": "WrongType", "call_3": "CorruptRecord"}
    assert snapshot.records["call_4"] is not None
    with pytest.raises(redis.ResponseError, match="NOPERM"):
        decide_snapshot([redis.ResponseError("NOPERM no rights"), 900], RUN, ["call_1"], include_raw=False)
