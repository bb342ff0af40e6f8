"""Each error code is stated once, with its message and its requirement (CIS-ERR-1, CIS-ORC-2).

Adding a code means adding it to ``kernel/_codes.py`` (member, fixed message,
requirement) and to the spec; these tests fail when one of the three is missing.
"""

from __future__ import annotations

import re
from pathlib import Path

from invocation_store.kernel import CODE_REQUIREMENTS, ERROR_MESSAGES, ErrorCode

SPEC = Path(__file__).resolve().parents[2] / "spec" / "requirements.md"


def test_every_code_has_a_fixed_message_and_a_requirement() -> None:
    """CIS-ERR-1, CIS-ORC-2: messages and requirements cover exactly the closed set of codes."""
    assert set(ERROR_MESSAGES) == set(ErrorCode)
    assert set(CODE_REQUIREMENTS) == set(ErrorCode)
    assert all(message.strip() and message.endswith(".") for message in ERROR_MESSAGES.values())


def test_every_code_requirement_is_defined_and_names_the_code() -> None:
    """CIS-SPEC-1: each code's requirement exists in the spec."""
    text = SPEC.read_text(encoding="utf-8")
    defined = set(re.findall(r"^### (CIS-[A-Z]+-\d+)", text, flags=re.MULTILINE))
    assert set(CODE_REQUIREMENTS.values()) <= defined
    for code in ErrorCode:
        assert code.value in text, f"{code.value} is never named in the spec"
