"""The stored-lifetime rule: a record or run found without expiry is corrupt."""

from __future__ import annotations

import pytest

from invocation_store.kernel import lifetime_is_intact


def test_only_a_missing_expiry_is_corrupt() -> None:
    """CIS-DUR-7: no expiry (None) is corrupt; any int remaining lifetime, even lapsed, is one the store
    could have written; anything else is a programming error."""
    assert lifetime_is_intact(None) is False
    for remaining in (1, 30_000, 0, -5):
        assert lifetime_is_intact(remaining) is True
    for bad in (True, 1.5, "100"):
        with pytest.raises(TypeError):
            lifetime_is_intact(bad)  # type: ignore[arg-type]


def test_a_bad_remaining_lifetime_is_named_in_the_error() -> None:
    """CIS-DUR-7: the TypeError for a value of the wrong type says what is expected."""
    with pytest.raises(TypeError) as raised:
        lifetime_is_intact(2.0)  # type: ignore[arg-type]
    assert raised.value.args == ("remaining_ms is an int or None",)
