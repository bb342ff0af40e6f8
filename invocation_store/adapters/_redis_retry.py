"""Which Redis failures the stores retry, and for how long (CIS-DUR-4).

A transient failure is one after which sending the same command again is safe and
may succeed: the connection was lost or timed out (the server restarted, failed
over, or a reply was dropped), the cluster is moving the slot (``TRYAGAIN``,
``MOVED``/``ASK`` beyond what the cluster client follows itself), the cluster is
down for a moment (``CLUSTERDOWN``), or a demoted master refuses writes
(``READONLY``). Resending is safe even when the first attempt ran: every write is
idempotent (a retried create of the same invocation is recognised as itself, a
replayed completion writes nothing, CIS-RETRY-2), and a ``TRYAGAIN``/``MOVED``/
``ASK`` reply means the script did not run at all.

The stores retry such a failure with exponential backoff (:attr:`RetryPolicy.first_delay_ms`
doubling up to :attr:`RetryPolicy.max_delay_ms`) for at most
:attr:`RetryPolicy.budget_ms` of wall time from the first failure; then the
operation fails with STORE_UNAVAILABLE. Any other failure (a script error, a
corrupt reply, an unreachable-for-good server after the budget) is not retried.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

import redis
import redis.exceptions
from attrs import field, frozen

__all__ = ["DEFAULT_RETRY", "TRANSIENT", "RetryPolicy"]

#: Failures that may pass: retried within the budget.
TRANSIENT: Final = (
    redis.ConnectionError,  # includes BusyLoadingError (a restarted server loading its data)
    redis.TimeoutError,
    redis.exceptions.TryAgainError,
    redis.exceptions.AskError,  # includes MovedError
    redis.exceptions.ClusterError,  # includes ClusterDownError, MasterDownError
    redis.exceptions.ReadOnlyError,
    redis.exceptions.SlotNotCoveredError,
)


def _positive(_: object, attribute: object, value: int) -> None:
    if type(value) is not int or value < 0:
        raise ValueError("retry times are non-negative int milliseconds")


@frozen(kw_only=True)
class RetryPolicy:
    """How long a Redis store keeps retrying a transient failure, in integer ms (CIS-DUR-4).

    ``budget_ms``: the operation's deadline, from its start: no retry and no later step
    starts after it (0: never retry; the steps of a healthy operation still run, each
    bounded by the connection's timeouts);
    ``first_delay_ms``: the first pause, doubled after each attempt up to
    ``max_delay_ms``.
    """

    budget_ms: int = field(default=2_000, validator=_positive)
    first_delay_ms: int = field(default=5, validator=_positive)
    max_delay_ms: int = field(default=200, validator=_positive)

    def pauses_ms(self) -> Iterator[int]:
        """The pause before each retry, in ms, forever; the caller stops at the budget."""
        pause = max(1, self.first_delay_ms)
        while True:
            yield pause
            pause = min(self.max_delay_ms, pause * 2) if self.max_delay_ms else pause * 2


#: The stores' default: two seconds of retries.
DEFAULT_RETRY: Final = RetryPolicy()
