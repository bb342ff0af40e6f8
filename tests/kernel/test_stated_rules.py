"""The rules round 3 stated for readings the vectors had left open (issue 22), at the kernel's API.

Each test holds one rule of ``spec/requirements.md`` with the value it must give, so a
kernel change that reopens the reading fails here as well as in ``spec/vectors``.
"""

from __future__ import annotations

import attrs
import pytest

from invocation_store.kernel import (
    MAX_SAFE_INT,
    Admission,
    Begin,
    CitationKind,
    ErrorCode,
    ExclusionReason,
    Failed,
    Limits,
    RawReceived,
    RunStatus,
    SweptStale,
    admit,
    cancel_run,
    cite,
    decide_completion,
    is_live,
    is_own_create,
    is_well_formed,
    open_run,
    project_progress,
    transition,
)

from ._helpers import T0, admitted, begun, default_limits, errored, make_run, ready, request


def _begin(**changes: object) -> Begin:
    event = Begin(
        run_id="run-1",
        tool_call_id="call_1",
        tool_name="search",
        request_json="{}",
        invocation_token="tok-1",
        sequence=1,
        ttl_ms=60_000,
        now_ms=T0,
    )
    return attrs.evolve(event, **changes)


def test_caller_errors_come_before_the_table() -> None:
    """CIS-KERN-2, CIS-LIFE-2: a Begin with a TTL of 0 on a live record and a Failed event with a code
    outside the failure set on a terminal one are caller errors, not INVALID_TRANSITION."""
    with pytest.raises(ValueError, match="ttl_ms"):
        transition(begun(), _begin(ttl_ms=0, now_ms=T0 + 1), default_limits())
    with pytest.raises(ValueError, match="failure code"):
        transition(ready(), Failed(code=ErrorCode.RUN_INACTIVE, now_ms=T0 + 1), default_limits())
    with pytest.raises(ValueError, match="older_than_ms"):
        transition(begun(), SweptStale(now_ms=T0 + 1, older_than_ms=-1), default_limits())


@pytest.mark.parametrize(
    "changes",
    [
        {"sequence": 0},
        {"sequence": MAX_SAFE_INT + 1},
        {"now_ms": -1},
        {"now_ms": MAX_SAFE_INT - 60_000 + 1},
        {"invocation_token": None},
        {"tool_name": 7},
        {"request_json": None},
    ],
)
def test_a_begin_outside_its_domain_is_a_caller_error(changes: dict[str, object]) -> None:
    """CIS-KERN-2, CIS-REC-4: a Begin's sequence, time, expiry and texts are in their domain or the
    event is refused as a caller error."""
    with pytest.raises((ValueError, TypeError)):
        transition(None, _begin(**changes), default_limits())


def test_the_edges_of_the_integer_domain_are_accepted() -> None:
    """CIS-KERN-2: 2^53 - 1 is a valid sequence and expiry; an empty token is a text."""
    record = transition(None, _begin(sequence=MAX_SAFE_INT, now_ms=MAX_SAFE_INT - 60_000), default_limits())
    assert not isinstance(record, ErrorCode)
    assert record.expires_at_ms == MAX_SAFE_INT
    assert not isinstance(transition(None, _begin(invocation_token=""), default_limits()), ErrorCode)
    with pytest.raises(ValueError, match="now_ms"):
        is_live(record, MAX_SAFE_INT + 1)
    with pytest.raises(ValueError, match=r"2\*\*53"):
        Limits(raw_bytes=MAX_SAFE_INT + 1)


def test_begin_judges_the_record_limit_only() -> None:
    """CIS-SIZE-5, CIS-SIZE-2: a Begin whose request is over request_bytes but whose record fits is
    created; the request limit is preflight's."""
    limits = Limits(request_bytes=4, record_bytes=1_000)
    record = transition(None, _begin(request_json='{"q":"a long enough request"}'), limits)
    assert not isinstance(record, ErrorCode)


def test_a_replay_needs_a_live_run_state_and_holds_whatever_the_status() -> None:
    """CIS-PRE-8, CIS-RETRY-2: the same token on a READY record is still a replay; on an expired run
    state it is RUN_INACTIVE (an expired run state is absent)."""
    run = make_run()
    first = admitted("call_1", run=run, token="tok-1")
    done = attrs.evolve(ready(first.record), expires_at_ms=run.expires_at_ms + 10)
    replayed = admit(first.run, done, request("call_1", token="tok-1"), default_limits(), T0 + 1)
    assert isinstance(replayed, Admission)
    assert replayed.replayed
    assert replayed.record == done
    lapsed = admit(first.run, done, request("call_1", token="tok-1"), default_limits(), run.expires_at_ms)
    assert lapsed is ErrorCode.RUN_INACTIVE


def test_run_inactive_comes_before_a_run_state_of_another_run() -> None:
    """CIS-PRE-8: a cancelled run state of another run id is RUN_INACTIVE, not RUN_MISMATCH."""
    other = attrs.evolve(make_run(), run_id="run-2", status=RunStatus.CANCELLED)
    assert admit(other, None, request("call_1"), default_limits(), T0 + 1) is ErrorCode.RUN_INACTIVE


def test_a_cancelled_run_is_charged_and_a_replay_compares_three_fields() -> None:
    """CIS-RUN-6, CIS-STORE-3: a completion of a live CANCELLED run charges it; a stored terminal
    record differing from `after` only in its content is a REPLAY of the stored record."""
    run = make_run()
    first = admitted("call_1", run=run)
    after = ready(first.record)
    cancelled = attrs.evolve(first.run, status=RunStatus.CANCELLED)
    effect = decide_completion(first.record, first.record, after, cancelled, T0 + 2)
    assert not isinstance(effect, ErrorCode)
    assert effect.run is not None
    assert effect.run.bytes_used > cancelled.bytes_used
    stored = attrs.evolve(after, agent_result="other")
    replay = decide_completion(stored, first.record, after, first.run, T0 + 2)
    assert not isinstance(replay, ErrorCode)
    assert (replay.action.value, replay.record) == ("REPLAY", stored)


def test_an_unsafe_run_id_is_compared_never_unsafe() -> None:
    """CIS-REF-3, CIS-ERR-1: asked by an unsafe run id, a record of the run is OTHER_RUN and the safe
    tool_call_id is echoed."""
    citation = cite("run 1", "call_1", ready(), T0 + 5)
    assert (citation.kind, citation.reason, citation.tool_call_id) == (
        CitationKind.NOT_REFERENCABLE,
        ExclusionReason.OTHER_RUN,
        "call_1",
    )


def test_progress_judges_a_duplicate_once_and_a_non_text_each_time() -> None:
    """CIS-PROG-2, CIS-PROG-3: an ERROR id listed twice is excluded once; identities that are not texts
    are UNSAFE_ID each time, never looked up."""
    failed = errored()
    identities: list[object] = [failed.tool_call_id, failed.tool_call_id, 7, None, ["call_1"], 7]
    report = project_progress("run-1", identities, {failed.tool_call_id: failed}, T0 + 5, default_limits())  # type: ignore[arg-type]
    assert report.excluded == {ExclusionReason.ERROR: 1, ExclusionReason.UNSAFE_ID: 4}


def test_an_empty_token_is_never_an_own_create_and_well_formed_is_exact() -> None:
    """CIS-RETRY-2, CIS-LIFE-5: an empty token identifies no invocation; well-formedness judges the
    integer ranges and nothing else (not the raw response nor the order of the update time)."""
    record = transition(None, _begin(invocation_token=""), default_limits())
    assert not isinstance(record, ErrorCode)
    assert not is_own_create(record, request("call_1", token=""), T0)
    assert is_well_formed(attrs.evolve(ready(), raw_response=None, updated_at_ms=T0 - 1))
    assert not is_well_formed(attrs.evolve(ready(), sequence=MAX_SAFE_INT + 1))
    assert not is_well_formed(attrs.evolve(ready(), expires_at_ms=MAX_SAFE_INT + 1))


def test_an_open_judges_its_numbers_before_its_run_id() -> None:
    """CIS-RUN-1, CIS-KERN-2: an unsafe run id with a TTL of 0 is a caller error; a cancel at a time
    outside the domain is refused before the run is looked at."""
    with pytest.raises(ValueError, match="ttl_ms"):
        open_run(None, run_id="run 1", now_ms=T0, deadline_ms=T0, ttl_ms=0, tool_call_budget=1, byte_budget=1)
    with pytest.raises(ValueError, match="now_ms"):
        cancel_run(None, MAX_SAFE_INT + 1)
    assert transition(begun(), RawReceived(raw_response="r", now_ms=MAX_SAFE_INT), default_limits()) is (
        ErrorCode.INVALID_TRANSITION
    )
