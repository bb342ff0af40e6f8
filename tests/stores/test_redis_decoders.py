"""Each malformed reply a Redis decoder can meet, and the cause it is refused with (CIS-STORE-6, CIS-DUR-12).

The cause label is what ``StoreUnavailableError.cause`` and the store's log line carry
(``docs/stores.md``, "Cause labels"): an operator tells a corrupt record (repair the key)
from a reply of the wrong shape (a client or proxy problem) by it. So each shape is held
to its exact label here, on fabricated replies, in both reply types redis-py produces
(bytes, and str with ``decode_responses=True``).
"""

from __future__ import annotations

from typing import Any

import pytest

from invocation_store.adapters._redis_decode import (
    CorruptReplyError,
    decode_embedded,
    decode_ids,
    decode_progress,
    decode_progress_reply,
    decode_record,
    decode_run,
    finish_ttl,
)
from invocation_store.adapters._redis_runs import finish_end_run
from invocation_store.kernel import PROGRESS_FIELDS, EvidenceStatus, InvocationStatus, ProgressView

#: A READY record's progress fields, in PROGRESS_FIELDS order.
GOOD: dict[str, bytes | None] = {
    "run_id": b"run_1",
    "tool_call_id": b"call_1",
    "tool_name": b"search",
    "sequence": b"3",
    "status": b"READY",
    "evidence_status": b"EVIDENCE_FOUND",
    "agent_result": b"the result",
    "scope": b"the scope",
    "expires_at_ms": b"1000",
}
VIEW = ProgressView(
    "run_1",
    "call_1",
    "search",
    3,
    InvocationStatus.READY,
    EvidenceStatus.EVIDENCE_FOUND,
    "the result",
    "the scope",
    1000,
)


def _values(**changed: bytes | None) -> list[bytes | None]:
    return [changed.get(name, GOOD[name]) for name in PROGRESS_FIELDS]


def _as_str(values: list[bytes | None]) -> list[str | None]:
    return [None if value is None else value.decode() for value in values]


#: name -> (changed fields, the cause). Each is one way a stored record can be damaged.
PROGRESS_REFUSALS: dict[str, tuple[dict[str, bytes | None], str]] = {
    "no run id, other fields": ({"run_id": None}, "CorruptRecord"),
    "no call id": ({"tool_call_id": None}, "CorruptRecord"),
    "no run id and no call id": ({"run_id": None, "tool_call_id": None}, "CorruptRecord"),
    "another run": ({"run_id": b"run_2"}, "IdentityMismatch"),
    "another call": ({"tool_call_id": b"call_2"}, "IdentityMismatch"),
    "no tool name": ({"tool_name": None}, "CorruptRecord"),
    "no sequence": ({"sequence": None}, "CorruptRecord"),
    "no expiry": ({"expires_at_ms": None}, "CorruptRecord"),
    "a sequence that is not digits": ({"sequence": b"3x"}, "CorruptRecord"),
    "an expiry that is not digits": ({"expires_at_ms": b"-1"}, "CorruptRecord"),
    "an unknown status": ({"status": b"DONE"}, "CorruptRecord"),
    "no status": ({"status": None}, "CorruptRecord"),
    "an unknown evidence status": ({"evidence_status": b"MAYBE"}, "CorruptRecord"),
    "READY without evidence": ({"evidence_status": None}, "CorruptRecord"),
    "READY without a result": ({"agent_result": None}, "CorruptRecord"),
}


@pytest.mark.parametrize("as_str", [False, True], ids=["bytes", "str"])
def test_a_whole_record_decodes_and_an_absent_one_is_none(as_str: bool) -> None:
    """CIS-PERF-3: the nine fields of a well-formed record are its view; nine nils are no record."""
    values: list[Any] = _as_str(_values()) if as_str else _values()
    assert decode_progress(values, "run_1", "call_1") == VIEW
    assert decode_progress([None] * len(PROGRESS_FIELDS), "run_1", "call_1") is None
    assert decode_progress_reply(values, "run_1", ["call_1"]) == [VIEW]
    two = [*values, *([None] * len(PROGRESS_FIELDS))]
    assert decode_progress_reply(two, "run_1", ["call_1", "call_2"]) == [VIEW, None]


@pytest.mark.parametrize("as_str", [False, True], ids=["bytes", "str"])
@pytest.mark.parametrize("damage", list(PROGRESS_REFUSALS))
def test_each_damaged_progress_record_is_refused_with_its_cause(damage: str, as_str: bool) -> None:
    """CIS-STORE-6: a partial record, bad values, or the record of another run or call is refused
    with its own cause label, by the one-record decoder and the script-reply decoder alike."""
    changed, cause = PROGRESS_REFUSALS[damage]
    values: list[Any] = _values(**changed)
    if as_str:
        values = _as_str(values)
    with pytest.raises(CorruptReplyError) as caught:
        decode_progress(values, "run_1", "call_1")
    assert caught.value.args == (cause,)
    with pytest.raises(CorruptReplyError) as caught:
        decode_progress_reply([*([None] * len(PROGRESS_FIELDS)), *values], "run_1", ["call_0", "call_1"])
    assert caught.value.args == (cause,)


@pytest.mark.parametrize(
    "reply",
    [
        _values()[:-1],  # a field short
        [*_values(), b"extra"],  # a field over
        [],  # nothing for an id asked
        [*_values()[:4], 3, *_values()[5:]],  # an integer where the text should be
        [*_values()[:4], [b"READY"], *_values()[5:]],  # a nested array
        {"run_id": b"run_1"},  # a map, not an array
        b"OK",  # a status reply
        None,
    ],
    ids=["short", "long", "empty", "integer", "nested", "map", "status", "nil"],
)
def test_a_progress_reply_of_the_wrong_shape_is_an_unexpected_reply(reply: Any) -> None:
    """CIS-STORE-6: a reply whose shape no script or HMGET produces is UnexpectedReply (a client,
    proxy or protocol problem), not a corrupt record (which an operator would go and repair)."""
    with pytest.raises(CorruptReplyError) as caught:
        decode_progress_reply(reply, "run_1", ["call_1"])
    assert caught.value.args == ("UnexpectedReply",)
    if isinstance(reply, list):
        with pytest.raises(CorruptReplyError) as caught:
            decode_progress(reply, "run_1", "call_1")
        assert caught.value.args == ("UnexpectedReply",)


RUN_VALUES = [b"run_1", b"ACTIVE", b"5", b"100", b"50", b"150", b"10", b"1000", b"1", b"20"]


def test_run_values_decode_and_each_damage_has_its_cause() -> None:
    """CIS-STORE-6: a run's ten fields are its state; all nil is no run; some nil is CorruptRun;
    a status no run has, or a run open_run never makes (the kernel's is_well_formed_run), is
    CorruptRun; another run's id is IdentityMismatch; another count of values is UnexpectedReply."""
    state = decode_run(RUN_VALUES, "run_1")
    assert state is not None
    assert (state.tool_call_budget, state.bytes_used, state.expires_at_ms) == (10, 20, 150)
    assert decode_run([value.decode() for value in RUN_VALUES], "run_1") == state
    assert decode_run([None] * len(RUN_VALUES), "run_1") is None
    for values, cause in (
        ([None, *RUN_VALUES[1:]], "CorruptRun"),
        ([*RUN_VALUES[:-1], None], "CorruptRun"),
        ([b"run_2", *RUN_VALUES[1:]], "IdentityMismatch"),
        ([RUN_VALUES[0], b"PAUSED", *RUN_VALUES[2:]], "CorruptRun"),  # no such run status
        ([RUN_VALUES[0], b"active", *RUN_VALUES[2:]], "CorruptRun"),
        ([*RUN_VALUES[:5], b"151", *RUN_VALUES[6:]], "CorruptRun"),  # not deadline + TTL
        ([*RUN_VALUES[:3], b"150", b"0", b"150", *RUN_VALUES[6:]], "CorruptRun"),  # a TTL of 0
        (RUN_VALUES[:-1], "UnexpectedReply"),
        ([*RUN_VALUES, b"1"], "UnexpectedReply"),
    ):
        with pytest.raises(CorruptReplyError) as caught:
            decode_run(values, "run_1")
        assert caught.value.args == (cause,)


def test_a_call_list_with_an_unsafe_id_is_a_corrupt_list() -> None:
    """CIS-STORE-6: a run's call list holds safe ids only; anything else is CorruptList."""
    assert decode_ids([b"call_1", "call_2"]) == ("call_1", "call_2")
    for bad in ([b"call 1"], [b"call_1", b""], [b"x" * 1000]):
        with pytest.raises(CorruptReplyError) as caught:
            decode_ids(bad)
        assert caught.value.args == ("CorruptList",)


IDS = [b"run_1", b"call_1", b"1000"]  # HMGET run_id, tool_call_id, expires_at_ms


def test_the_remaining_ttl_is_the_smaller_of_pttl_and_the_store_clock() -> None:
    """CIS-TTL-2: PTTL alone without a store clock; with one, the smaller of PTTL and
    expires_at_ms - now; a record gone or past its expiry has none (None)."""
    assert finish_ttl(IDS, 500, "run_1", "call_1", None) == 500
    assert finish_ttl(IDS, 500, "run_1", "call_1", 600) == 400  # the clock's view is shorter
    assert finish_ttl(IDS, 300, "run_1", "call_1", 600) == 300  # PTTL is shorter
    assert finish_ttl(IDS, 500, "run_1", "call_1", 1000) is None  # expired by the store clock
    assert finish_ttl([value.decode() for value in IDS], 500, "run_1", "call_1", None) == 500
    assert finish_ttl([None, None, None], -2, "run_1", "call_1", 5) is None  # no record
    assert finish_ttl(IDS, -2, "run_1", "call_1", 5) is None  # expired between HMGET and PTTL


@pytest.mark.parametrize(
    ("fields", "pttl", "cause"),
    [
        (IDS[:2], 500, "UnexpectedReply"),
        ([*IDS, b"x"], 500, "UnexpectedReply"),
        (IDS, b"500", "UnexpectedReply"),
        (IDS, None, "UnexpectedReply"),
        ([None, *IDS[1:]], 500, "CorruptRecord"),
        ([*IDS[:2], None], 500, "CorruptRecord"),
        (IDS, -1, "NoTTL"),  # a record that would never expire
        ([b"run_2", *IDS[1:]], 500, "IdentityMismatch"),
        ([IDS[0], b"call_2", IDS[2]], 500, "IdentityMismatch"),
    ],
    ids=[
        "short",
        "long",
        "pttl-bytes",
        "pttl-nil",
        "no-run",
        "no-expiry",
        "no-ttl",
        "other-run",
        "other-call",
    ],
)
def test_each_damaged_ttl_reply_is_refused_with_its_cause(fields: list[Any], pttl: Any, cause: str) -> None:
    """CIS-STORE-6, CIS-DUR-12: ttl_remaining_ms's replies, each damage with its own cause."""
    with pytest.raises(CorruptReplyError) as caught:
        finish_ttl(fields, pttl, "run_1", "call_1", 5)
    assert caught.value.args == (cause,)


@pytest.mark.parametrize(
    "reply",
    [
        b"ERR",  # no code
        b"ERR NO_SUCH_CODE 5",  # a code no script sends
        b"ERR RUN_INACTIVE",  # no time
        b"ERR RUN_INACTIVE 5 run_1",  # a run of one field
        b"MAYBE 5",  # an unknown tag
        [],
        42,
    ],
    ids=["no-code", "foreign-code", "no-time", "short-run", "unknown-tag", "empty", "integer"],
)
def test_an_end_run_reply_of_the_wrong_shape_is_an_unexpected_reply(reply: Any) -> None:
    """CIS-STORE-8: a cancel's or close's reply that END_RUN_SCRIPT never sends is UnexpectedReply."""
    for cancel in (True, False):
        with pytest.raises(CorruptReplyError) as caught:
            finish_end_run("run_1", cancel, reply)
        assert caught.value.args == ("UnexpectedReply",)


@pytest.mark.parametrize("reply", [42, None, 3.5, b"run_1", "run_1", {"run_id": "run_1"}])
@pytest.mark.parametrize("decoder", ["record", "embedded", "progress", "run", "ids", "ttl"])
def test_a_reply_that_is_not_an_array_is_an_unexpected_reply(decoder: str, reply: object) -> None:
    """CIS-STORE-6, CIS-STORE-8: where an array is expected (a record's pairs, a script's items,
    progress or run values, a call list, HMGET's fields), an integer, a nil, a float, a string or a
    map is UnexpectedReply (never a TypeError, never a map's keys read as ids)."""
    decode = {
        "record": lambda: decode_record(
            reply if not isinstance(reply, dict) else [reply], None, "run_1", "call_1"
        ),
        "embedded": lambda: decode_embedded(reply, "run_1", "call_1"),  # type: ignore[arg-type]
        "progress": lambda: decode_progress(reply, "run_1", "call_1"),  # type: ignore[arg-type]
        "run": lambda: decode_run(reply, "run_1"),  # type: ignore[arg-type]
        "ids": lambda: decode_ids(reply),  # type: ignore[arg-type]
        "ttl": lambda: finish_ttl(reply, 5_000, "run_1", "call_1", 5),  # type: ignore[arg-type]
    }[decoder]
    with pytest.raises(CorruptReplyError) as caught:
        decode()
    assert caught.value.args == ("UnexpectedReply",)
