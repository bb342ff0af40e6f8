"""One deadline per operation: every step after the first starts only before it (CIS-DUR-4, CIS-DUR-5)."""

from __future__ import annotations

import pytest

from invocation_store._deadline import (
    attempt_allowed,
    cleanup_attempt,
    current_deadline,
    operation_deadline,
    retry_allowed,
    step_time_left,
    step_wait_s,
    use_clock,
)


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_first_attempt_is_made_later_steps_only_before_the_deadline() -> None:
    """CIS-DUR-4: the outermost scope's first send is always made; a second step of the same
    operation (another first send), or one in a nested scope, is not once the deadline passed."""
    clock = _Clock()
    with use_clock(clock), operation_deadline(1_000) as deadline:
        assert deadline == 101.0
        assert attempt_allowed()  # the operation's first send
        clock.now = 100.5
        assert attempt_allowed()  # a later step, before the deadline
        with operation_deadline(5_000) as inner:
            assert inner == deadline  # the earlier of the two
            clock.now = 101.0
            assert not attempt_allowed()  # at the deadline: not started
        assert current_deadline() == deadline
    assert current_deadline() is None
    assert attempt_allowed()  # outside any scope: the caller bounds itself


def test_each_outermost_scope_makes_its_own_first_attempt() -> None:
    """CIS-DUR-4: every new operation makes its first send, even once an earlier one spent its budget."""
    clock = _Clock()
    with use_clock(clock):
        for _ in range(2):
            with operation_deadline(1):
                clock.now += 1.0
                assert attempt_allowed()
                assert not attempt_allowed()


def test_a_budget_of_zero_never_retries_but_runs_every_step() -> None:
    """CIS-DUR-4, CIS-DUR-13: budget 0 is "never retry": no retry starts, but each step of the
    operation does (a healthy operation of several steps answers). Inside an enclosing scope
    its steps keep that scope's deadline; outside one, the connection's timeouts bound them."""
    clock = _Clock()
    with use_clock(clock):
        with operation_deadline(0):
            assert attempt_allowed()
            clock.now += 5.0
            assert attempt_allowed()  # another step, long after: still made
            assert not retry_allowed(0.001)  # but never a retry
        with operation_deadline(1_000):
            assert attempt_allowed()
            with operation_deadline(0):
                clock.now += 0.5
                assert attempt_allowed()  # before the enclosing deadline
                assert not retry_allowed(0.001)
                clock.now += 0.5
                assert not attempt_allowed()  # the enclosing deadline passed
            assert not attempt_allowed()


def test_a_wait_inside_a_step_is_bounded_by_the_step_deadline() -> None:
    """CIS-DUR-13: the time a wait inside one step (a pooled connection, a database lock) may
    last: the current step deadline less now (0 or below once passed); None where no scope
    bounds a step: outside every scope, and in budget-0 scopes only ("never retry")."""
    clock = _Clock()
    with use_clock(clock):
        assert step_time_left() is None
        with operation_deadline(0):
            assert step_time_left() is None
            with operation_deadline(2_000):
                assert step_time_left() == 2.0  # the store's own budget under a budget-0 caller
        with operation_deadline(1_000):
            clock.now += 0.25
            assert step_time_left() == 0.75
            with operation_deadline(5_000):
                assert step_time_left() == 0.75  # the earlier of the two
            with operation_deadline(0):
                assert step_time_left() == 0.75  # budget 0 keeps the enclosing step deadline
            clock.now += 1.0
            assert step_time_left() == -0.25
        assert step_time_left() is None


def test_a_step_wait_is_the_stores_limit_or_what_the_step_deadline_leaves() -> None:
    """CIS-DUR-13: a store's own wait limit outside any bounding scope; inside one, the time left,
    no more than the limit and 0.1 s at least (also once the deadline passed)."""
    clock = _Clock()
    with use_clock(clock):
        assert step_wait_s(5.0) == 5.0
        with operation_deadline(300):
            assert step_wait_s(5.0) == pytest.approx(0.3)
            assert step_wait_s(0.2) == 0.2
            clock.now += 0.25
            assert step_wait_s(5.0) == 0.1
            clock.now += 1.0
            assert step_wait_s(5.0) == 0.1
        with operation_deadline(0):
            assert step_wait_s(2.0) == 2.0


def test_a_cleanup_gets_one_send_past_the_deadline_and_no_retry() -> None:
    """CIS-DUR-2, CIS-DUR-4: the best-effort cleanup of an operation whose budget a durability wait
    spent (taking back an unacknowledged create or open) is sent once, never retried."""
    clock = _Clock()
    with use_clock(clock), operation_deadline(1_000):
        assert attempt_allowed()
        clock.now = 102.0
        assert not attempt_allowed()
        with cleanup_attempt():
            assert attempt_allowed()
            assert not attempt_allowed()
        assert not attempt_allowed()
