"""Limits take positive ints only (CIS-SIZE-1): 0, negatives, bools, floats and text are refused."""

from __future__ import annotations

import attrs
import pytest

from invocation_store.kernel import Limits

FIELDS = [field.name for field in attrs.fields(Limits)]


@pytest.mark.parametrize("name", FIELDS)
def test_every_limit_accepts_one_and_keeps_it(name: str) -> None:
    """CIS-SIZE-1: the smallest limit, 1, is accepted and stored as given."""
    assert getattr(Limits(**{name: 1}), name) == 1


@pytest.mark.parametrize("name", FIELDS)
@pytest.mark.parametrize("value", [0, -1, -(2**40), True, False, 1.0, 2.5, "8", None])
def test_every_limit_refuses_non_positive_and_non_int(name: str, value: object) -> None:
    """CIS-SIZE-1: a limit of 0, below 0, a bool (an int subclass), a float, text or None is a ValueError."""
    with pytest.raises(ValueError, match=name):
        Limits(**{name: value})


def test_the_fields_are_the_documented_limits() -> None:
    """CIS-SIZE-1: the parametrisation above covers every limit the class has, defaults positive."""
    assert FIELDS == [
        "request_bytes",
        "raw_bytes",
        "agent_result_bytes",
        "record_bytes",
        "max_json_depth",
        "max_facts",
        "max_fact_bytes",
    ]
    defaults = Limits()
    assert all(isinstance(getattr(defaults, name), int) and getattr(defaults, name) > 0 for name in FIELDS)
