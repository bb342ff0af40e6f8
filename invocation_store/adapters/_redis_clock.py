"""The Redis store's reading of the server's clock: a lower bound of server ``TIME`` (CIS-STORE-10).

Every decision that compares times is taken by a script on the server's clock
(``_redis_scripts``). What the store's ``now_ms()`` returns is what the caller stamps
completions with, passes as ``not_before_ms`` (kernel ``is_own_create``) and adds its
deadlines to, so it must follow that clock and never run ahead of it: a completion
stamped later than the server's time, or a ``not_before_ms`` after the create's own
stamp, would misjudge a call.

Theory of operation: a reading is a server time ``S`` (a ``TIME`` reply, or the time a
script reports it decided at) that the server took somewhere between the local instants
``sent`` and ``received`` of its round trip. At any later local instant ``m`` the server's
clock reads at least ``S + (m - received) * (1 - DRIFT)``, where ``DRIFT`` bounds how
much faster the local monotonic clock may run than the server's (:data:`DRIFT`, 0.1%:
two hundred times the 5 ppm-500 ppm of common crystals). :class:`ServerClock` keeps the
best such lower bound over every reading, and :meth:`ServerClock.now_ms` is never
ahead of server ``TIME`` and never goes back. It is behind by at most the round trip of
the reading it rests on plus ``DRIFT`` of the time since that reading
(:meth:`ServerClock.error_ms` states the bound). Readings come free with every script
reply; the store also reads ``TIME`` with its server checks, and before any decision
that compares times when it holds no reading yet (the store's ``synced_now_ms``: before
the first reading, :meth:`ServerClock.now_ms` is None, and no host clock stands in for
a decision). A server clock that is
stepped back (a manual change, an NTP step) breaks the bound until the next reading
after the step: run servers with a slewing NTP client.

Pure: no I/O, and the local clock is an argument (a monotonic source in ms).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

__all__ = ["DRIFT", "ServerClock", "monotonic_ms"]

#: The most the local monotonic clock may run faster than the server's, as a fraction.
DRIFT: Final = 0.001


def monotonic_ms() -> float:
    """The host's monotonic clock in ms (the default local clock of :class:`ServerClock`)."""
    return time.monotonic_ns() / 1_000_000


class ServerClock:
    """A lower bound of one server's ``TIME``, in integer ms, from readings taken on round trips.

    ``local_ms`` is the host's monotonic clock in ms (float or int). Safe to share
    across threads: a reading replaces one tuple at once, never a partial state.
    """

    __slots__ = ("_best", "_last", "_local")

    def __init__(self, local_ms: Callable[[], float]) -> None:
        self._local = local_ms
        #: (server ms, local ms at receipt, round trip ms) of the best reading, or None.
        self._best: tuple[int, float, float] | None = None
        #: The last value handed out (now_ms never goes back).
        self._last = 0

    def local_ms(self) -> float:
        """The local monotonic clock (ms): read it just before sending a round trip that brings a reading."""
        return self._local()

    @staticmethod
    def _bound(reading: tuple[int, float, float], local: float) -> float:
        server, received, _ = reading
        return server + (local - received) * (1 - DRIFT)

    def observe(self, server_ms: int, sent_ms: float, received_ms: float) -> None:
        """Take a reading: the server read ``server_ms`` between local ``sent_ms`` and ``received_ms``.

        Kept if it raises the lower bound at the present instant (a later or faster
        reading), else ignored; one whose local instants are out of order is ignored.
        """
        if received_ms < sent_ms:
            return
        reading = (server_ms, received_ms, received_ms - sent_ms)
        best = self._best
        if best is None:
            self._best = reading
            return
        local = self._local()
        if self._bound(reading, local) >= self._bound(best, local):
            self._best = reading

    def now_ms(self) -> int | None:
        """The lower bound of the server's clock now, in integer ms; None before the first reading."""
        best = self._best
        if best is None:
            return None
        value = int(self._bound(best, self._local()))
        if value < self._last:
            return self._last
        self._last = value
        return value

    def error_ms(self) -> float | None:
        """How far behind server ``TIME`` :meth:`now_ms` may be now, in ms; None before the first reading.

        The round trip of the reading it rests on, plus ``2 * DRIFT`` of the time since
        (the bound decays by DRIFT, and the local clock may be that much slow too).
        """
        best = self._best
        if best is None:
            return None
        _, received, round_trip = best
        return round_trip + 2 * DRIFT * max(0.0, self._local() - received)
