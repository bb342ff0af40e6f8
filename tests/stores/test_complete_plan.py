"""The Redis completion plan: which raw responses go through a staging key (CIS-STORE-5).

``plan_complete`` is pure (it builds the COMPLETE_SCRIPT call and sends nothing), so
the staging threshold is pinned here on both sides, in UTF-8 bytes.
"""

from __future__ import annotations

import pytest

from invocation_store import codec
from invocation_store.adapters._redis_complete import finish_complete
from invocation_store.adapters._redis_core import STAGE_ABOVE_BYTES, CompletePlan, plan_complete
from invocation_store.adapters._redis_decode import MAX_EXACT_INT, CorruptReplyError
from invocation_store.kernel import (
    Admission,
    AdmissionRequest,
    CanonicalRecord,
    ErrorCode,
    EvidenceStatus,
    Limits,
    Projection,
    ProjectionReceived,
    RawReceived,
    RunState,
    admit,
    open_run,
    transition,
)

T0 = 1_700_000_000_000


def _begun() -> CanonicalRecord:
    run = open_run(
        run_id="run-1",
        now_ms=T0,
        deadline_ms=T0 + 60_000,
        ttl_ms=60_000,
        tool_call_budget=5,
        byte_budget=10_000_000,
    )
    assert isinstance(run, RunState)
    request = AdmissionRequest(
        run_id="run-1",
        tool_call_id="call_1",
        tool_name="search",
        request_json="{}",
        invocation_token="tok-1",
    )
    admission = admit(run, None, request, Limits(), T0)
    assert isinstance(admission, Admission)
    return admission.record


def _plan(raw: str) -> CompletePlan:
    before = _begun()
    after = transition(before, RawReceived(raw_response=raw, now_ms=T0 + 5), Limits())
    assert isinstance(after, CanonicalRecord)
    assert after.raw_response == raw
    plan = plan_complete("cis", before, after, T0 + 5, lambda: "n0nce")
    assert isinstance(plan, CompletePlan)
    return plan


@pytest.mark.parametrize(
    ("raw", "staged"),
    [
        ("a" * STAGE_ABOVE_BYTES, False),
        ("a" * (STAGE_ABOVE_BYTES + 1), True),
        ("\u00e9" * (STAGE_ABOVE_BYTES // 2), False),  # 2 bytes each: exactly the threshold
        ("\u00e9" * (STAGE_ABOVE_BYTES // 2) + "a", True),  # fewer code points than bytes
    ],
    ids=["ascii-at", "ascii-above", "utf8-at", "utf8-above"],
)
def test_raw_responses_above_the_threshold_are_staged(raw: str, staged: bool) -> None:
    """CIS-STORE-5: a raw response of more than STAGE_ABOVE_BYTES UTF-8 bytes is staged; at it, inline."""
    call = _plan(raw).call
    if staged:
        assert call.staged == raw
        assert call.stage_key is not None
        assert call.stage_key.endswith("n0nce")
        assert call.stage_key in call.command
        assert raw not in call.command
    else:
        assert (call.staged, call.stage_key) == (None, None)
        assert raw in call.command


@pytest.mark.parametrize(
    "reply",
    [
        "ERR RUN_INACTIVE",
        "ERR STORE_UNAVAILABLE",
        "ERR invalid_transition",
        b"ERR TOOL_BUDGET_EXHAUSTED",
        ["ERR CALL_IN_PROGRESS"],
    ],
)
def test_a_completion_refused_for_another_reason_is_a_corrupt_reply(reply: object) -> None:
    """CIS-STORE-8: COMPLETE_SCRIPT refuses with INVALID_TRANSITION only; a refusal naming any other
    code (or spelled otherwise) is not taken as the store's answer: CorruptReplyError
    (UnexpectedReply), as for any reply of the wrong shape."""
    with pytest.raises(CorruptReplyError) as caught:
        finish_complete(_plan("{}"), reply)
    assert caught.value.cause == "UnexpectedReply"


def test_a_completion_refused_as_an_invalid_transition_is_answered_when_the_kernel_agrees() -> None:
    """CIS-STORE-8: INVALID_TRANSITION with no stored record (the record lapsed): the kernel,
    fed the same nothing, refuses too, so the code is the answer."""
    assert finish_complete(_plan("{}"), "ERR INVALID_TRANSITION") is ErrorCode.INVALID_TRANSITION


def _replay_items(record: CanonicalRecord) -> list[object]:
    """A REPLAY reply's array for ``record``: the tag, the raw flag and value, then the HASH pairs."""
    fields = {name: value for name, value in codec.unstructure(record).items() if value is not None}
    raw = fields.pop("raw_response", None)
    pairs = [part for name, value in fields.items() for part in (name.encode(), str(value).encode())]
    return [b"REPLAY", b"1" if raw is not None else b"0", None if raw is None else raw.encode(), *pairs]


def test_a_completion_reply_of_another_shape_is_an_unexpected_reply() -> None:
    """CIS-STORE-8: COMPLETE_SCRIPT answers WRITE, "ERR <code>", a bare RESEND, or REPLAY with the
    stored record; RESEND with more, REPLAY with more text or with no record, and any other tag
    are UnexpectedReply, never taken for an answer."""
    plan = _plan("{}")
    assert finish_complete(plan, _replay_items(plan.before)) == plan.before  # the stored record
    assert finish_complete(plan, b"RESEND") is None
    items = _replay_items(plan.before)
    for reply in (
        b"RESEND 5",
        [b"RESEND", b"x"],
        [b"REPLAY extra", *items[1:]],
        [b"STORED", *items[1:]],
        [b"REPLAY"],
        [b"REPLAY", b"0", None],  # a replay that holds no record
    ):
        with pytest.raises(CorruptReplyError) as caught:
            finish_complete(plan, reply)
        assert caught.value.cause == "UnexpectedReply", reply


def test_a_completion_plan_decides_on_the_given_clock_unless_told_the_server_decides() -> None:
    """CIS-STORE-10: by default the script decides at the store's now_ms (sent in the header); with
    server_clock it reads the server's (the header's first word is empty)."""
    before = _begun()
    after = transition(before, RawReceived(raw_response="{}", now_ms=T0 + 5), Limits())
    assert isinstance(after, CanonicalRecord)
    given = plan_complete("cis", before, after, T0 + 5, lambda: "n0nce")
    server = plan_complete("cis", before, after, T0 + 5, lambda: "n0nce", server_clock=True)
    assert isinstance(given, CompletePlan)
    assert isinstance(server, CompletePlan)
    header = 5  # ARGV[1], after numkeys and the four keys
    assert bytes(given.call.command[header]).split(b" ")[0] == str(T0 + 5).encode()
    assert bytes(server.call.command[header]).split(b" ")[0] == b""


@pytest.mark.parametrize("now_ms", [MAX_EXACT_INT, MAX_EXACT_INT + 1, -MAX_EXACT_INT - 1, 2**63])
def test_a_time_a_script_cannot_hold_exactly_is_refused_before_sending(now_ms: int) -> None:
    """CIS-STORE-5: Lua holds integers exactly below 2**53 only; a completion planned at a time
    outside [-2**53, 2**53) is refused (ValueError) before anything is sent; the bounds
    themselves are sent."""
    before = _begun()
    after = transition(before, RawReceived(raw_response="{}", now_ms=T0 + 5), Limits())
    assert isinstance(after, CanonicalRecord)
    with pytest.raises(ValueError, match="2\\*\\*53"):
        plan_complete("cis", before, after, now_ms, lambda: "n0nce")
    for inside in (MAX_EXACT_INT - 1, -MAX_EXACT_INT):
        assert isinstance(plan_complete("cis", before, after, inside, lambda: "n0nce"), CompletePlan)


def test_a_refusal_of_a_completion_that_keeps_its_raw_response_is_re_decided_at_its_time() -> None:
    """CIS-STORE-8: a completion whose raw response the record already holds (sent as "kept", not
    resent) keeps the plan's time for re-deciding a refusal: a stored record that lapsed by then
    is INVALID_TRANSITION as the script said, not a disagreement."""
    before = transition(_begun(), RawReceived(raw_response="{}", now_ms=T0 + 5), Limits())
    assert isinstance(before, CanonicalRecord)
    after = transition(
        before,
        ProjectionReceived(
            projection=Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content="c", scope="s"),
            now_ms=T0 + 6,
        ),
        Limits(),
    )
    assert isinstance(after, CanonicalRecord)
    late = before.expires_at_ms + 10  # the record lapsed before this completion was decided
    plan = plan_complete("cis", before, after, late, lambda: "n0nce")
    assert isinstance(plan, CompletePlan)
    assert plan.call is not plan.resend  # the raw response is kept, not sent
    pairs = _replay_items(before)[3:]
    assert finish_complete(plan, [b"ERR INVALID_TRANSITION", *pairs]) is ErrorCode.INVALID_TRANSITION
