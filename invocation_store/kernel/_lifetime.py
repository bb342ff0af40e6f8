"""The rule on stored lifetimes: a stored record or run always has an expiry (CIS-DUR-7).

Every record and run is written with its expiry in the same atomic step that creates
it (CIS-TTL-1), and nothing ever removes it (CIS-TTL-2). So one found without an
expiry was changed from outside the store (``PERSIST``, a restore without TTL) or
half-written: it is corrupt, never live. It is never completed, admitted into,
reopened or served: the store reports it as unavailable (STORE_UNAVAILABLE), and
its raw response cannot lapse at once under a completion that trusted it.
"""

from __future__ import annotations

__all__ = ["lifetime_is_intact"]


def lifetime_is_intact(remaining_ms: int | None) -> bool:
    """Whether a stored key's remaining lifetime is one the store could have written (CIS-DUR-7).

    ``remaining_ms`` is the store's report in integer ms: ``None`` when the key has
    no expiry (Redis ``PTTL`` -1), else the time left (0 or less: already lapsed).
    Only ``None`` is corrupt; an absent key is not this function's question.
    Raises ``TypeError`` for anything but ``None`` or an exact int.
    """
    if remaining_ms is None:
        return False
    if type(remaining_ms) is not int:
        raise TypeError("remaining_ms is an int or None")
    return True
