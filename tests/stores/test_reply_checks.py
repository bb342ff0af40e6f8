"""The Redis adapter's reply checks, fed replies directly (no server): refusals included (CIS-STORE-8)."""

from __future__ import annotations

from typing import Any

import pytest

from invocation_store.adapters import RetryPolicy
from invocation_store.adapters import _redis_core as core
from invocation_store.adapters._redis_decode import CorruptReplyError, decode_embedded, decode_record
from invocation_store.kernel import ErrorCode, Limits, RunState, admit, open_run

from ._support import RUN, request

NOW = 1_700_000_000_000


def _run_tail(*, used: int, used_bytes: int, budget: int, byte_budget: int, deadline: int) -> str:
    """A CREATE_SCRIPT run tail (CREATE_RUN_ORDER) for an ACTIVE run opened at NOW."""
    expires = deadline + 30_000
    return f"ACTIVE {used} {used_bytes} {RUN} {NOW} {deadline} 30000 {expires} {budget} {byte_budget}"


def _plan(arguments: str = '{"a": 1}') -> core.CreatePlan:
    plan = core.plan_create("cis", request(arguments=arguments), Limits(), None)
    assert isinstance(plan, core.CreatePlan)
    return plan


@pytest.mark.parametrize(
    ("reply", "agrees"),
    [
        # used + size == byte budget: the kernel admits, so this refusal is a corrupt reply.
        (
            f"ERR RUN_BYTES_EXHAUSTED {NOW} "
            + _run_tail(used=0, used_bytes=2, budget=5, byte_budget=10, deadline=NOW + 9),
            False,
        ),
        (
            f"ERR RUN_BYTES_EXHAUSTED {NOW} "
            + _run_tail(used=0, used_bytes=3, budget=5, byte_budget=10, deadline=NOW + 9),
            True,
        ),
        (
            f"ERR TOOL_BUDGET_EXHAUSTED {NOW} "
            + _run_tail(used=4, used_bytes=0, budget=5, byte_budget=99, deadline=NOW + 9),
            False,
        ),
        (
            f"ERR TOOL_BUDGET_EXHAUSTED {NOW} "
            + _run_tail(used=5, used_bytes=0, budget=5, byte_budget=99, deadline=NOW + 9),
            True,
        ),
        (
            f"ERR RUN_DEADLINE_EXCEEDED {NOW} "
            + _run_tail(used=0, used_bytes=0, budget=5, byte_budget=99, deadline=NOW + 1),
            False,
        ),
        (
            f"ERR RUN_DEADLINE_EXCEEDED {NOW} "
            + _run_tail(used=0, used_bytes=0, budget=5, byte_budget=99, deadline=NOW),
            True,
        ),
        (
            f"ERR DUPLICATE_TOOL_CALL {NOW} "
            + _run_tail(used=0, used_bytes=0, budget=5, byte_budget=99, deadline=NOW),
            False,
        ),
        (
            f"ERR DUPLICATE_TOOL_CALL {NOW} "
            + _run_tail(used=5, used_bytes=0, budget=5, byte_budget=99, deadline=NOW + 9),
            True,
        ),
        # the time the script decided at is the kernel's: one ms later the deadline has passed
        (
            f"ERR RUN_DEADLINE_EXCEEDED {NOW + 1} "
            + _run_tail(used=0, used_bytes=0, budget=5, byte_budget=99, deadline=NOW + 1),
            True,
        ),
        (f"ERR RUN_INACTIVE {NOW}", True),
        (f"ERR TOOL_BUDGET_EXHAUSTED {NOW}", False),  # a refusal decided on a run must say which run
        (f"ERR NO_SUCH_CODE {NOW}", False),
    ],
)
def test_create_refusals_are_re_decided_by_the_kernel(reply: str, agrees: bool) -> None:
    """CIS-STORE-8, CIS-RUN-5, CIS-RUN-6, CIS-RUN-4, CIS-STORE-10: a refusal stands only if kernel admit
    makes it too, at the time the script reports it decided at (the server's clock).

    The request is 8 bytes; at ``used_bytes=2`` and a budget of 10 it fits exactly.
    """
    plan = _plan()
    if agrees:
        code, decided_at = core.finish_create(plan, reply.encode())
        assert code.value == reply.split(" ")[1]  # type: ignore[union-attr]
        assert decided_at == int(reply.split(" ")[2])
    else:
        with pytest.raises(core.CorruptReplyError) as caught:
            core.finish_create(plan, reply.encode())
        known = reply.split(" ")[1] != "NO_SUCH_CODE"
        assert caught.value.cause == ("KernelDisagrees" if known else "UnexpectedReply")


def test_open_and_end_refusals_are_re_decided_by_the_kernel() -> None:
    """CIS-STORE-8, CIS-RETRY-3, CIS-RUN-2: OPEN/END refusals carry the run the script saw."""
    plan = core.plan_open("cis", RUN, NOW, deadline_ms=NOW + 10, ttl_ms=5, tool_call_budget=1, byte_budget=1)
    assert isinstance(plan, core.OpenPlan)
    same = plan.args[2:]  # the run values the script would compare: identical parameters
    with pytest.raises(core.CorruptReplyError):
        core.finish_open(plan, (f"ERR INVALID_TRANSITION {NOW} " + " ".join(same)).encode())
    other = (*same[:6], "2", *same[7:])  # another tool-call budget: refusing is right
    refused, _ = core.finish_open(plan, (f"ERR INVALID_TRANSITION {NOW} " + " ".join(other)).encode())
    assert refused is ErrorCode.INVALID_TRANSITION
    # A lapsed run (the script's time past its expiry) is never refused: the kernel opens afresh.
    lapsed = f"ERR INVALID_TRANSITION {NOW + 10 + 5} " + " ".join(other)
    with pytest.raises(core.CorruptReplyError):
        core.finish_open(plan, lapsed.encode())
    fresh, decided_at = core.finish_open(plan, f"FRESH {NOW + 3}".encode())
    assert isinstance(fresh, RunState)
    assert fresh.opened_at_ms == decided_at == NOW + 3  # stamped with the script's time
    closed = (same[0], "CLOSED", *same[2:])
    cancelled = (same[0], "CANCELLED", *same[2:])

    def end(reply: str) -> object:
        head, _, rest = reply.partition(" ")
        if head == "ERR":
            code, _, rest = rest.partition(" ")
            head = f"ERR {code}"
        return core.finish_end_run(RUN, True, f"{head} {NOW} {rest}".strip().encode())[0]

    assert end("ERR INVALID_TRANSITION " + " ".join(closed)).value == "INVALID_TRANSITION"  # type: ignore[attr-defined]
    assert end("ERR RUN_INACTIVE").value == "RUN_INACTIVE"  # type: ignore[attr-defined]
    for wrong in (
        "ERR INVALID_TRANSITION " + " ".join(same),  # cancelling an ACTIVE run is allowed
        "ERR INVALID_TRANSITION " + " ".join(cancelled),  # a retried cancel repeats
        "ERR RUN_INACTIVE " + " ".join(same),  # a live run is not inactive
    ):
        with pytest.raises(core.CorruptReplyError) as caught:
            end(wrong)
        assert caught.value.cause == "KernelDisagrees"
    assert end("OK " + " ".join(same)).status.value == "CANCELLED"  # type: ignore[attr-defined]
    with pytest.raises(core.CorruptReplyError) as caught:
        end("OK " + " ".join(closed))  # a closed run cannot be cancelled: the script lied
    assert caught.value.cause == "KernelDisagrees"


def test_a_version_with_non_ascii_bytes_is_read_leniently() -> None:
    """CIS-STORE-1: a server version is decoded with replacement, never an error: b"7.2.\\xff4" is 7.2.4."""
    assert core.parse_version({"redis_version": b"7.2.\xff4"}) == (7, 2, 4)
    assert core.parse_version({"redis_version": "6.2.14"}) == (6, 2, 14)
    with pytest.raises(core.CorruptReplyError):
        core.parse_version({})


def test_the_plans_kernel_run_matches_open_run() -> None:
    """CIS-RUN-1: the fresh run a plan would store is kernel open_run's (the refusal checks rely on it)."""
    plan = core.plan_open("cis", RUN, NOW, deadline_ms=NOW + 10, ttl_ms=5, tool_call_budget=1, byte_budget=1)
    assert isinstance(plan, core.OpenPlan)
    fresh = open_run(
        None, run_id=RUN, now_ms=NOW, deadline_ms=NOW + 10, ttl_ms=5, tool_call_budget=1, byte_budget=1
    )
    assert plan.fresh == fresh
    # the refusal checks run on it: a 1-byte budget refuses the request's bytes
    assert admit(fresh, None, request(), Limits(), NOW) is ErrorCode.RUN_BYTES_EXHAUSTED


def test_a_create_reply_with_a_foreign_run_status_is_corrupt() -> None:
    """CIS-STORE-6: an admission reply whose run status is no RunStatus is CorruptRun, never decoded."""
    tail = _run_tail(used=0, used_bytes=0, budget=5, byte_budget=99, deadline=NOW + 9)
    with pytest.raises(core.CorruptReplyError) as caught:
        core.finish_create(_plan(), (f"OK {NOW} " + tail.replace("ACTIVE", "PAUSED", 1)).encode())
    assert caught.value.cause == "CorruptRun"
    with pytest.raises(core.CorruptReplyError) as caught:
        core.finish_create(_plan(), (f"OK {NOW} " + tail.replace(RUN, "run-2", 1)).encode())
    assert caught.value.cause == "IdentityMismatch"


@pytest.mark.parametrize("flag", [b"0", b"1", "0", "1"])
def test_an_embedded_record_of_two_items_is_absent_and_fewer_is_corrupt(flag: bytes | str) -> None:
    """CIS-STORE-6: a script's ``<flag>, <raw>, <pairs...>`` with no pairs is no record (None), with
    either flag and either reply type; a reply without the raw item is UnexpectedReply."""
    assert decode_embedded([flag, None], "run_1", "call_1") is None
    assert decode_embedded([flag, b"raw"], "run_1", "call_1") is None
    for short in ([flag], []):
        with pytest.raises(CorruptReplyError) as caught:
            decode_embedded(short, "run_1", "call_1")
        assert caught.value.cause == "UnexpectedReply"


@pytest.mark.parametrize("flat", [[b"status"], [b"status", b"READY", b"run_id"], ["a", "b", "c"]])
def test_a_record_reply_of_an_odd_number_of_items_is_an_unexpected_reply(flat: list[object]) -> None:
    """CIS-STORE-6: a record read as a flat field/value list must pair up; an odd count (a field
    without its value) is UnexpectedReply, for bytes and str replies, embedded or not."""
    with pytest.raises(CorruptReplyError) as caught:
        decode_record(flat, None, "run_1", "call_1")
    assert caught.value.cause == "UnexpectedReply"
    with pytest.raises(CorruptReplyError) as embedded:
        decode_embedded([b"0", None, *flat], "run_1", "call_1")
    assert embedded.value.cause == "UnexpectedReply"


def test_a_durable_open_takes_back_only_the_run_this_call_stored() -> None:
    """CIS-DUR-14: FRESH was stored by this attempt; EXISTING after a resend was stored by the first
    attempt when opened no earlier than it was sent; EXISTING on a first attempt, or opened before
    this call, is another open's run and stays."""
    plan = core.plan_open("cis", RUN, NOW, deadline_ms=NOW + 10, ttl_ms=5, tool_call_budget=1, byte_budget=1)
    assert isinstance(plan, core.OpenPlan)
    fresh, _ = core.finish_open(plan, f"FRESH {NOW}".encode())
    assert isinstance(fresh, RunState)
    existing = f"EXISTING {NOW} " + " ".join(plan.args[2:])
    found, _ = core.finish_open(plan, existing.encode())
    assert isinstance(found, RunState)
    assert core.takes_back(f"FRESH {NOW}".encode(), fresh, resent=False, not_before_ms=NOW)
    assert core.takes_back(f"FRESH {NOW}".encode(), fresh, resent=True, not_before_ms=None)
    assert not core.takes_back(existing.encode(), found, resent=False, not_before_ms=NOW)
    assert core.takes_back(existing.encode(), found, resent=True, not_before_ms=found.opened_at_ms)
    assert not core.takes_back(existing.encode(), found, resent=True, not_before_ms=found.opened_at_ms + 1)
    assert not core.takes_back(existing.encode(), found, resent=True, not_before_ms=None)


def test_a_create_refusal_with_items_after_it_is_an_unexpected_reply() -> None:
    """CIS-STORE-8: CREATE_SCRIPT's refusal is one status line ("ERR <code> <now> [<run>]"); a refusal
    that comes with array items (a record, as only a duplicate's REPLAY carries) is UnexpectedReply."""
    plan = _plan()
    refusal = f"ERR TOOL_BUDGET_EXHAUSTED {NOW} " + _run_tail(
        used=5, used_bytes=0, budget=5, byte_budget=99, deadline=NOW + 9
    )
    code, _decided_at = core.finish_create(plan, refusal.encode())
    assert code is ErrorCode.TOOL_BUDGET_EXHAUSTED  # the same refusal alone stands
    with pytest.raises(core.CorruptReplyError) as caught:
        core.finish_create(plan, [refusal.encode(), b"1", b"raw"])
    assert caught.value.cause == "UnexpectedReply"


@pytest.mark.parametrize("field", ["budget_ms", "first_delay_ms", "max_delay_ms"])
@pytest.mark.parametrize("value", [-1, 1.5, True, "5"])
def test_a_retry_policy_takes_non_negative_int_milliseconds(field: str, value: object) -> None:
    """CIS-DUR-4: every RetryPolicy time is a non-negative int of ms; anything else is refused when
    the policy is built, saying so."""
    with pytest.raises(ValueError, match=r"^retry times are non-negative int milliseconds$"):
        RetryPolicy(**{field: value})  # type: ignore[arg-type]
    assert getattr(RetryPolicy(**{field: 0}), field) == 0


def test_the_first_pause_is_the_first_delay_and_at_least_one_millisecond() -> None:
    """CIS-DUR-4: retries pause first_delay_ms (1 ms at least: 0 and 1 both pause 1 ms), doubling
    up to max_delay_ms."""
    for first, expected in ((0, [1, 2, 4, 8]), (1, [1, 2, 4, 8]), (5, [5, 10, 20, 20])):
        pauses = RetryPolicy(first_delay_ms=first, max_delay_ms=20).pauses_ms()
        assert [next(pauses) for _ in range(4)] == expected


def test_stores_from_a_url_turn_the_clients_own_retries_off() -> None:
    """CIS-DUR-13: a store built by from_url makes its client retry nothing itself (redis-py's
    Retry with 0 retries), so that the store's budget is the only retry loop, on both flavours;
    nothing is connected to build them."""
    from invocation_store.adapters import AsyncRedisStore, RedisStore  # noqa: PLC0415 - this test only

    for kind in (RedisStore, AsyncRedisStore):
        store: Any = kind.from_url("redis://127.0.0.1:1/0")
        assert store._client.get_retry().get_retries() == 0, kind.__name__
