"""Held calls: completions and creates the store did not confirm, kept so that no call's fate is lost.

Completions
-----------

The last step of a call is one compare-and-set, ``store.complete(created, final)``.
When the store cannot apply it (connection loss, a failover, a slot migration), the
tool has already run and ``final`` holds its complete raw response. Giving up at
once would lose that response and leave the record PROJECTING until a sweep.

So the boundary (CIS-DUR-5):

1. retries the compare-and-set, which is idempotent (a completion that did land
   replays as itself, CIS-RETRY-2), with exponential backoff for at most
   :attr:`CompletionRetry.budget_ms` of wall time;
2. if it still fails, answers the agent STORE_UNAVAILABLE and keeps the completion
   (``created``, ``final``, raw response included) in memory, in a bounded table
   (:attr:`CompletionRetry.max_pending` entries, the oldest dropped first);
3. answers a later call with the same run, tool_call_id, tool and arguments text (the
   harness's retry) by
   applying the kept completion instead of admitting a second invocation: the
   retry gets the result of the one execution (its executor never runs again) or,
   while the store still fails, STORE_UNAVAILABLE again, never DUPLICATE_TOOL_CALL
   for a call made once;
4. lets the harness learn every call's fate: ``pending_completions`` lists what it
   holds, ``finish_pending`` applies them (e.g. when the store is back), and
   ``drop_pending`` forgets one, after which ``sweep_stale`` ends its record as
   ERROR/STALE_PROJECTION. A completion held by a process that died is gone with
   it: its record stays PROJECTING until swept (or its TTL ends).

Only the store's failure (``StoreUnavailableError``) is retried, and not a permanent
one (``permanent``: a corrupt record, a refused server), which is held at once; any
answer of the store (the written record, or a code such as INVALID_TRANSITION after a
sweep) ends the completion. The budget is one deadline for the whole completion, the
store's own retries included (``invocation_store._deadline``).

Creates (CIS-BND-7)
--------------------
A create that fails with a (non-permanent) :class:`StoreUnavailableError` after the
store's own retries, or that is interrupted (a cancellation) while in flight, has an
unknown outcome: the server may have applied it and lost only its reply. Its record
would then be PROJECTING under a token no one holds, and every re-send of the call
would be told the call is in progress (the tool never ran). So the boundary holds
the create (:class:`HeldCreate`: the admission request with its invocation token, and
the store-clock reading taken before the first send) in a second bounded table
(:class:`HeldCreates`, :attr:`CompletionRetry.max_pending` entries, oldest dropped
first). The harness's re-send of the same call (same run, tool_call_id, tool and
arguments text) *takes* the held create and sends it again with the same token: if
the first attempt landed, the store answers it as a replay and the kernel's
``is_own_create`` (created at or after the held reading) recognises it as this
call's own create, so the tool runs, once; if it did not land, the create is made
now. Taking is atomic: two concurrent re-sends cannot both replay one token; the
second is answered by the stored record's fate (CALL_IN_PROGRESS). A create that
fails again is held again, with its first reading. ``pending_creates`` lists the
held creates, ``drop_pending`` forgets one. A create held by a process that died is
lost with it: a re-send from another process gets CALL_IN_PROGRESS while the record
is PROJECTING and STALE_PROJECTION once it is swept (kernel ``duplicate_code``).
"""

from __future__ import annotations

import collections
import contextlib
import threading
from collections.abc import Iterator
from typing import Final, Generic, TypeVar

from attrs import field, frozen

from ._deadline import operation_deadline, retry_allowed
from .kernel import AdmissionRequest, CanonicalRecord

__all__ = [
    "DEFAULT_COMPLETION_RETRY",
    "CompletionRetry",
    "HeldCreate",
    "HeldCreates",
    "PendingCompletion",
    "PendingCompletions",
]


def _non_negative(_: object, attribute: object, value: int) -> None:
    if type(value) is not int or value < 0:
        raise ValueError("CompletionRetry values are non-negative ints")


@frozen(kw_only=True)
class CompletionRetry:
    """How the boundary retries a completion the store could not apply (CIS-DUR-5).

    ``budget_ms``: wall time, in integer ms, allowed from the first compare-and-set,
    the store's own retries included (0: no retry); ``first_delay_ms``: the first
    pause, doubled up to ``max_delay_ms``; ``max_pending``: completions kept in memory
    after their retries failed, and as many creates whose outcome is unknown
    (CIS-BND-7); 0 keeps none.
    """

    budget_ms: int = field(default=2_000, validator=_non_negative)
    first_delay_ms: int = field(default=10, validator=_non_negative)
    max_delay_ms: int = field(default=250, validator=_non_negative)
    max_pending: int = field(default=1_024, validator=_non_negative)

    def pauses_ms(self) -> Iterator[int]:
        """Pauses before each retry, in ms, forever; the caller stops at the budget."""
        pause = max(1, self.first_delay_ms)
        while True:
            yield pause
            pause = max(1, min(self.max_delay_ms, pause * 2))


#: The boundary's default: two seconds of retries, 1024 pending completions.
DEFAULT_COMPLETION_RETRY: Final = CompletionRetry()


@frozen(kw_only=True)
class PendingCompletion:
    """A completion the store has not confirmed: ``created`` -> ``final``, raw response included (CIS-DUR-5).

    ``created`` is the PROJECTING record the create wrote; ``final`` the kernel's
    terminal record the compare-and-set writes.
    """

    created: CanonicalRecord
    final: CanonicalRecord

    @property
    def key(self) -> tuple[str, str]:
        """(run_id, tool_call_id)."""
        return (self.created.run_id, self.created.tool_call_id)


_Call = TypeVar("_Call")


class _Held(Generic[_Call]):
    """A bounded, thread-safe table of held calls by (run_id, tool_call_id), oldest first.

    At most ``policy.max_pending`` are kept (0: none); holding one more drops the oldest
    first, and holding a call again makes it the newest.
    """

    def __init__(self, policy: CompletionRetry = DEFAULT_COMPLETION_RETRY) -> None:
        if not isinstance(policy, CompletionRetry):
            raise TypeError("completion_retry must be a CompletionRetry")
        self.policy = policy
        self._held: collections.OrderedDict[tuple[str, str], _Call] = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, run_id: str, tool_call_id: str) -> _Call | None:
        """What is held for this call, if anything."""
        with self._lock:
            return self._held.get((run_id, tool_call_id))

    def keys(self, run_id: str | None = None) -> tuple[tuple[str, str], ...]:
        """(run_id, tool_call_id) of everything held (of ``run_id`` only, if given), oldest first."""
        with self._lock:
            return tuple(key for key in self._held if run_id is None or key[0] == run_id)

    def drop(self, run_id: str, tool_call_id: str) -> bool:
        """Forget what is held for this call; True if something was."""
        with self._lock:
            return self._held.pop((run_id, tool_call_id), None) is not None

    def _keep(self, key: tuple[str, str], call: _Call) -> None:
        with self._lock:
            self._keep_locked(key, call)

    def _keep_locked(self, key: tuple[str, str], call: _Call) -> None:
        """:meth:`_keep`, the lock already held."""
        self._held.pop(key, None)
        self._held[key] = call
        while len(self._held) > self.policy.max_pending:
            self._held.popitem(last=False)


class PendingCompletions(_Held[PendingCompletion]):
    """The completions a boundary holds (raw responses included), by (run_id, tool_call_id) (CIS-DUR-5)."""

    def retry_of(
        self, run_id: str, tool_call_id: str, tool_name: str, request_json: str
    ) -> PendingCompletion | None:
        """The completion held for this call if the call is its retry: same tool, same arguments text.

        Another call under the same id (other tool or arguments) is not a retry: it is
        admitted as usual, and refused as the duplicate it is (CIS-ID-5).
        """
        if not self._held:  # nothing held: the common case costs no lock
            return None
        held = self.get(run_id, tool_call_id)
        if held is None or held.created.tool_name != tool_name or held.created.request_json != request_json:
            return None
        return held

    def _hold(self, pending: PendingCompletion) -> None:
        self._keep(pending.key, pending)

    def settled(self, pending: PendingCompletion) -> None:
        """The store answered ``pending``'s completion: it is no longer held."""
        with self._lock:
            if self._held.get(pending.key) is pending:
                del self._held[pending.key]

    # -- retrying a completion -----------------------------------------------------

    def retrying(self) -> contextlib.AbstractContextManager[float]:
        """The scope of one completion's retries: one deadline for them all, store retries included.

        Enter it before the first compare-and-set: :attr:`CompletionRetry.budget_ms`
        runs from then (``invocation_store._deadline``), and the store's own retry loop
        honours the same deadline, so the caller waits at most the budget plus the round
        trip in flight when it passed (CIS-DUR-5). Pauses come from :meth:`pauses`,
        asked for only after a failure.
        """
        return operation_deadline(self.policy.budget_ms)

    def pauses(self, pending: PendingCompletion) -> Iterator[float]:
        """Seconds to pause before each retry of ``pending``'s completion, within the deadline.

        Iterate after a StoreUnavailableError inside :meth:`retrying`: a pause is
        yielded only while the retry after it starts before the scope's deadline. When
        it would not, ``pending`` is held (see the module docstring) and the iteration
        ends: the caller then gives up with the last error. The boundary (each flavour
        pausing its own way) drives the retries.
        """
        for pause_ms in self.policy.pauses_ms():
            pause = pause_ms / 1000
            if not retry_allowed(pause):
                break
            yield pause
        self._hold(pending)

    def hold(self, pending: PendingCompletion) -> None:
        """Hold ``pending`` without retrying (a permanent store fault: a corrupt record, CIS-DUR-7)."""
        self._hold(pending)


@frozen(kw_only=True)
class HeldCreate:
    """A create whose outcome is unknown: its request and the clock reading before it was sent (CIS-BND-7).

    ``request`` carries the invocation token a re-send replays; ``not_before_ms`` is
    the store clock's reading (integer ms) taken before the first attempt was sent,
    the bound kernel ``is_own_create`` compares the stored record's creation time with.
    """

    request: AdmissionRequest
    not_before_ms: int

    @property
    def key(self) -> tuple[str, str]:
        """(run_id, tool_call_id)."""
        return (self.request.run_id, self.request.tool_call_id)


class InFlight:
    """What :meth:`HeldCreates.take` answers while a re-send of the call's held create is in flight."""

    def __repr__(self) -> str:
        return "IN_FLIGHT"


#: A re-send of this call's held create is in flight: its outcome is still unknown (CIS-BND-7).
IN_FLIGHT: Final = InFlight()
#: This call's first create is being sent by this boundary right now: the call is in progress.
SENDING: Final = InFlight()


class HeldCreates(_Held[HeldCreate]):
    """The creates a boundary holds, their outcome unknown, by (run_id, tool_call_id) (CIS-BND-7).

    A create being sent (a fresh one, :meth:`begin`, or a held one sent again,
    :meth:`take`) is *in flight*: it stays this boundary's until the send ends
    (:meth:`release`), or is held (:meth:`hold`). Meanwhile another send of the same
    call gets :data:`IN_FLIGHT` (or False from :meth:`begin`), never a fresh invocation
    token: a new token could only be refused by the store as a duplicate of the first.
    """

    def __init__(self, policy: CompletionRetry = DEFAULT_COMPLETION_RETRY) -> None:
        super().__init__(policy)
        self._in_flight: dict[tuple[str, str], HeldCreate] = {}
        self._fresh: set[tuple[str, str]] = set()  # in flight on their first send (begin)
        self._dropped: set[str] = set()  # tokens of creates dropped while in flight

    def hold(self, held: HeldCreate) -> None:
        """Keep ``held``, newest last; the oldest go past the bound. One atomic step.

        A create of the call that this boundary holds or sends under another token
        stays this call's, and ``held`` is not kept: of one call, a boundary holds one
        token (:meth:`begin` adopts a held create rather than drawing another), so
        another token of the key is another call under the same id, sent as the
        duplicate it is, whose fate never displaces the call's own. A create dropped
        (:meth:`drop`) while in flight is not kept either.
        """
        key, token = held.key, held.request.invocation_token
        with self._lock:
            if self._in_flight.get(key) == held:
                del self._in_flight[key]
                self._fresh.discard(key)
            if token in self._dropped:
                self._dropped.discard(token)
                return
            flying = self._in_flight.get(key)
            current = self._held.get(key)
            for other in (flying, current):
                if other is not None and other.request.invocation_token != token:
                    return
            self._keep_locked(key, held)

    def begin(self, fresh: HeldCreate) -> bool | HeldCreate:
        """Mark the first send of a fresh create in flight, or say what to send instead.

        Atomic, and it sees what :meth:`take` saw and everything since (another send
        may have held its create while this one read the clock):

        - True: ``fresh`` is in flight; send it. Also for another call under the same
          id (other tool or arguments) than the one in flight or held: it is sent as
          the duplicate it is, and never held in that call's place (:meth:`hold`).
        - False: this call's create is in flight right now (the harness sent the call
          twice at once): the call is in progress, its fate the first send's.
        - a :class:`HeldCreate`: this call's create was held meanwhile; it is now in
          flight, to be sent again with its token and reading (``fresh`` is dropped),
          so that this boundary never has two tokens of one call whose fates it would
          have to tell apart.

        End it with :meth:`release` (answered) or :meth:`hold` (outcome unknown).
        """
        key = fresh.key

        def same(other: HeldCreate) -> bool:
            return (
                other.request.tool_name == fresh.request.tool_name
                and other.request.request_json == fresh.request.request_json
            )

        with self._lock:
            flying = self._in_flight.get(key)
            if flying is not None:
                return not same(flying)
            held = self._held.get(key)
            if held is not None and same(held):
                del self._held[key]
                self._in_flight[key] = held
                return held
            self._in_flight[key] = fresh
            self._fresh.add(key)
            return True

    def release(self, held: HeldCreate) -> None:
        """The send of ``held`` ended with an answer: it is no longer in flight (nor held)."""
        with self._lock:
            self._dropped.discard(held.request.invocation_token)
            if self._in_flight.get(held.key) == held:
                del self._in_flight[held.key]
                self._fresh.discard(held.key)

    def drop(self, run_id: str, tool_call_id: str) -> bool:
        """Forget the create held (or in flight) for this call; True if there was one.

        A create dropped while in flight stays dropped: when its send ends without an
        answer it is not held again.
        """
        key = (run_id, tool_call_id)
        with self._lock:
            flying = self._in_flight.pop(key, None)
            self._fresh.discard(key)
            if flying is not None:
                self._dropped.add(flying.request.invocation_token)
            held = self._held.pop(key, None)
        return held is not None or flying is not None

    def take(
        self, run_id: str, tool_call_id: str, tool_name: str, request_json: str
    ) -> HeldCreate | InFlight | None:
        """The create held for this call if the call re-sends it (same tool and arguments), now in flight.

        Atomic: of two concurrent re-sends, one takes it and the other gets
        :data:`IN_FLIGHT` until the first one's send ends; while the call's first create
        is being sent (:meth:`begin`), :data:`SENDING`. Another call under the same
        id (other tool or arguments) is not a re-send: None, and the held create stays.
        """
        if not self._held and not self._in_flight:  # nothing held: the common case costs no lock
            return None
        key = (run_id, tool_call_id)
        with self._lock:
            flying = self._in_flight.get(key)
            if flying is not None:
                same = flying.request.tool_name == tool_name and flying.request.request_json == request_json
                if not same:
                    return None
                return SENDING if key in self._fresh else IN_FLIGHT
            held = self._held.get(key)
            if (
                held is None
                or held.request.tool_name != tool_name
                or held.request.request_json != request_json
            ):
                return None
            del self._held[key]
            self._in_flight[key] = held
            return held
