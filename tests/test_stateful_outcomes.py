"""What the stateful suite's outcome check needs, checked at once (CIS-STATE-2).

``stateful_tests/test_stateful_memory.py::test_machine_reaches_every_outcome`` runs the
machine until every error code has been an outcome; that takes a while and lives in the
stateful suite. This fails in ``pytest tests`` as soon as a code has no rule that claims
to reach it, naming the file to edit.
"""

from __future__ import annotations

import inspect

from invocation_store.kernel import ErrorCode
from invocation_store.testing._vocabulary import NOT_CALL_OUTCOMES, OUTCOME_RULES
from invocation_store.testing.stateful import InvocationMachine

KIT = "invocation_store/testing/_vocabulary.py"


def test_every_code_is_claimed_by_a_rule_or_exempt() -> None:
    """CIS-STATE-2: each ErrorCode is reached by a named rule of the machine, or exempt with a reason."""
    claimed = set(OUTCOME_RULES) | set(NOT_CALL_OUTCOMES)
    missing = sorted(code.value for code in set(ErrorCode) - claimed)
    assert not missing, (
        f"{KIT}: add {missing} to OUTCOME_RULES (the rule whose calls reach it; write one, or a "
        "vocabulary entry in _vocabulary.py, if none does) or to NOT_CALL_OUTCOMES with the reason"
    )
    both = sorted(code.value for code in set(OUTCOME_RULES) & set(NOT_CALL_OUTCOMES))
    assert not both, f"{KIT}: {both} are both reached and exempt"
    assert all(len(reason) > 10 for reason in NOT_CALL_OUTCOMES.values())


def test_each_named_rule_is_a_rule_of_the_machine() -> None:
    """CIS-STATE-2: every rule OUTCOME_RULES names is a Hypothesis rule of InvocationMachine."""
    for code, name in OUTCOME_RULES.items():
        method = getattr(InvocationMachine, name, None)
        assert method is not None, f"{KIT}: OUTCOME_RULES[{code.value}] names no method {name!r}"
        assert inspect.isfunction(method)
        assert hasattr(method, "hypothesis_stateful_rule"), f"{KIT}: {name!r} is not a @rule"
