"""The Redis completion plan: which raw responses go through a staging key (CIS-STORE-5).

``plan_complete`` is pure (it builds the COMPLETE_SCRIPT call and sends nothing), so
the staging threshold is pinned here on both sides, in UTF-8 bytes.
"""

from __future__ import annotations

import pytest

from invocation_store.adapters._redis_complete import finish_complete
from invocation_store.adapters._redis_core import STAGE_ABOVE_BYTES, CompletePlan, plan_complete
from invocation_store.adapters._redis_decode import CorruptReplyError
from invocation_store.kernel import (
    Admission,
    AdmissionRequest,
    CanonicalRecord,
    ErrorCode,
    Limits,
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
