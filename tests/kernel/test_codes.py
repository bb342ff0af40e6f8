"""Each error code is stated once, with its message and its requirement (CIS-ERR-1, CIS-ORC-2).

Adding a code means adding it to ``invocation_store/kernel/_codes.py`` (member, fixed
message, requirement) and naming it in ``spec/requirements.md``; these tests fail, naming
the file, when one of them is missing. CONTRIBUTING.md has the whole checklist.
"""

from __future__ import annotations

import re
from pathlib import Path

from invocation_store.kernel import CODE_REQUIREMENTS, ERROR_MESSAGES, ErrorCode

SPEC = Path(__file__).resolve().parents[2] / "spec" / "requirements.md"


def test_every_code_has_a_fixed_message_and_a_requirement() -> None:
    """CIS-ERR-1, CIS-ORC-2: messages and requirements cover exactly the closed set of codes."""
    for table, name in ((ERROR_MESSAGES, "ERROR_MESSAGES"), (CODE_REQUIREMENTS, "CODE_REQUIREMENTS")):
        missing = sorted(code.value for code in set(ErrorCode) - set(table))
        assert not missing, f"invocation_store/kernel/_codes.py: add {missing} to {name}"
    assert all(message.strip() and message.endswith(".") for message in ERROR_MESSAGES.values())


def test_every_code_requirement_is_defined_and_names_the_code() -> None:
    """CIS-SPEC-1: each code's requirement exists in the spec."""
    text = SPEC.read_text(encoding="utf-8")
    defined = set(re.findall(r"^### (CIS-[A-Z]+-\d+)", text, flags=re.MULTILINE))
    undefined = sorted(set(CODE_REQUIREMENTS.values()) - defined)
    assert not undefined, f"spec/requirements.md: define {undefined} (a '### CIS-...' heading)"
    for code in ErrorCode:
        assert code.value in text, (
            f"spec/requirements.md: name {code.value} in the text of {CODE_REQUIREMENTS[code]}, "
            "the requirement invocation_store/kernel/_codes.py gives it"
        )
