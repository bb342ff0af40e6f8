"""The stateful machine's vocabulary: pools of ids, shapes, refusals, and the codes they reach (CIS-STATE-1).

Small pools make collisions across runs and keys common; one draw per rule argument
keeps Hypothesis' per-step cost low. Every value here is data: no rule lives here.
"""

from __future__ import annotations

import itertools
from typing import Any, Final

from attrs import frozen

from ..kernel import ErrorCode
from ._tools import (
    MODES,
)

# ---------------------------------------------------------------------------
# Vocabulary (small pools, so that collisions across runs and keys are common)

#: Run ids; a small pool so that runs are reopened, cancelled and closed often.
RUN_IDS: Final = ("run-a", "run-b", "run.c:7")
#: Real framework ids, accepted unchanged (CIS-ID-1); shared by every run.
TOOL_CALL_IDS: Final = (
    "call_9Xb2Lm",
    "toolu_01A09q90qw90lq917835lq9",
    "tooluse_Qz7",
    "aB3dE5gH7",
    "chatcmpl-tool-1f2e",
    "functions.get_weather:0",
    "3f2c1a9e-7b4d-4c1e-9a8f-0e5d6c7b8a90",
    "call_Abc123",
    "toolu_bdrk_01",
    "Zx9Yw8Vu7",
    "functions.search:1",
    "tooluse_kZ-3",
    "c" * 128,
)
#: Missing tool_call_ids (CIS-ID-2).
MISSING_IDS: Final[tuple[object, ...]] = (None, "", "   ", "\t\n", 42)
#: Unsafe tool_call_ids (CIS-ID-3).
UNSAFE_IDS: Final = (
    " call_1",
    "call 1",
    "call_1\n",
    "caf\u00e9",
    "a{b}",
    "x*",
    "q?",
    "[0]",
    "y" * 129,
    "\x00",
)
#: Arguments that are not one I-JSON object, or too large (CIS-JSON-1..6, CIS-SIZE-2).
BAD_ARGUMENTS: Final[tuple[object, ...]] = (
    "[]",
    "{",
    '{"a":1,"a":2}',
    '{"a":NaN}',
    '{"a":"\\ud800"}',
    '{"a":1} x',
    "null",
    '{"a":' * 9 + "1" + "}" * 9,
    '{"n":' + "9" * 5000 + "}",
    '{"q":"' + "x" * 200 + '"}',
    '{"q":"' + "\u00e9" * 70 + '"}',
    None,
    7,
)
#: Tool names preflight refuses: unauthorized, writable, a string flag, unknown, none.
REFUSED_TOOLS: Final[tuple[object, ...]] = ("writer", "forbidden", "flagged", "nope", None)
WORDS: Final = ("alpha", "b\u00e9ta", "\u03b3")
SIZES: Final = (0, 30, 60, 140)
LATENCIES: Final = (0, 0, 0, 300, 45_000)
DEADLINES: Final = (600_000, 20_000, 1_000, 0)
TTLS: Final = (60_000, 3_600_000, 30_000)
BUDGETS: Final = (20, 3, 1, 0)
BYTE_BUDGETS: Final = (100_000, 1_000, 150)
ADVANCES: Final = (1, 250, 1_000, 20_000, 100_000)
SWEEP_AGES: Final = (0, 1_000, 60_000)
#: Ids only racing workers use. Which of them win a contended race is up to the
#: scheduler, so they never enter a bundle: later draws must not depend on it.
RACE_IDS: Final = ("race-1", "race-2", "race-3", "race-4")
RACE_SETS: Final = tuple(combo for size in (2, 3, 4) for combo in itertools.combinations(RACE_IDS, size))
#: Arguments of racing creates: all the same size, so the admitted count is fixed.
RACE_ARGUMENTS: Final = '{"mode":"found","race":true}'
START_MS: Final = 1_700_000_000_000
#: "Use the context's run id" / "write the arguments of the search tool".
DEFAULT: Final = object()


class _OneLine:
    """Shapes print on one line in failing sequences (Hypothesis' printer would wrap them)."""

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))


@frozen
class CallShape(_OneLine):
    """One valid call of the ``search`` tool: outcome ``mode``, query, raw size, latency, padding."""

    mode: str
    q: str = "alpha"
    size: int = 0
    lat: int = 0
    pad: int = 0


@frozen
class RunShape(_OneLine):
    """How a run is opened: id, deadline offset (ms), record TTL (ms), call and byte budgets."""

    run_id: str
    deadline: int
    ttl: int
    budget: int
    byte_budget: int


# One draw per rule argument keeps Hypothesis' per-step cost low (the machine is
# dominated by drawing, not by the stores); shrinking moves toward the first shape.
CALL_SHAPES: Final = tuple(
    CallShape(mode=m, q=q, size=size, lat=lat, pad=pad)
    for m, q, size, lat, pad in itertools.product(MODES, WORDS, SIZES, LATENCIES, (0, 40))
)
#: Shapes of a run that admits several calls: how every example starts.
FIRST_RUN_SHAPES: Final = tuple(
    RunShape(run_id=r, deadline=d, ttl=t, budget=b, byte_budget=y)
    for r, d, t, b, y in itertools.product(RUN_IDS[:2], (3_600_000,), TTLS, BUDGETS[:1], (100_000, 600))
)
#: Outcomes that make READY records, for the second submit rule.
READY_SHAPES: Final = tuple(shape for shape in CALL_SHAPES if shape.mode in ("found", "none", "json"))
RUN_SHAPES: Final = tuple(
    RunShape(run_id=r, deadline=d, ttl=t, budget=b, byte_budget=y)
    for r, d, t, b, y in itertools.product((*RUN_IDS, "bad run"), DEADLINES, TTLS, BUDGETS, BYTE_BUDGETS)
)


@frozen
class Refusal(_OneLine):
    """One wrong envelope field (``tool_call_id``, ``run_id``, ``arguments``, ``tool_name``) and its value."""

    field: str
    value: object


#: Every refusal, the four fields interleaved (Hypothesis favours the ends of a list).
REFUSALS: Final = tuple(
    refusal
    for group in itertools.zip_longest(
        (Refusal(field="tool_name", value=v) for v in REFUSED_TOOLS),
        (Refusal(field="tool_call_id", value=v) for v in MISSING_IDS + UNSAFE_IDS),
        (Refusal(field="run_id", value=v) for v in (*RUN_IDS, None, "")),
        (Refusal(field="arguments", value=v) for v in BAD_ARGUMENTS),
    )
    for refusal in group
    if refusal is not None
)


#: The rule of the machine (``stateful.py``) whose calls reach each error code, through the
#: vocabulary above (CIS-STATE-2). Every :class:`~invocation_store.kernel.ErrorCode` is here or
#: in :data:`NOT_CALL_OUTCOMES`: ``tests/test_stateful_outcomes.py`` checks that at once, and
#: the stateful suite (``stateful_tests/test_stateful_memory.py``) that the rule does reach the
#: code. A new code no rule reaches needs a vocabulary entry here (a refusal, a call shape),
#: or a rule.
OUTCOME_RULES: Final[dict[ErrorCode, str]] = {
    ErrorCode.MISSING_TOOL_CALL_ID: "submit_refused",
    ErrorCode.UNSAFE_TOOL_CALL_ID: "submit_refused",
    ErrorCode.RUN_MISMATCH: "submit_refused",
    ErrorCode.INVALID_ARGUMENTS: "submit_refused",
    ErrorCode.REQUEST_TOO_LARGE: "submit_refused",
    ErrorCode.UNAUTHORIZED: "submit_refused",
    ErrorCode.NOT_READ_ONLY: "submit_refused",
    ErrorCode.RUN_INACTIVE: "submit",
    ErrorCode.RUN_DEADLINE_EXCEEDED: "submit",
    ErrorCode.DUPLICATE_TOOL_CALL: "submit_duplicate",
    ErrorCode.CALL_IN_PROGRESS: "submit_duplicate",
    ErrorCode.TOOL_BUDGET_EXHAUSTED: "submit",
    ErrorCode.RUN_BYTES_EXHAUSTED: "submit",
    ErrorCode.EXECUTION_FAILED: "submit",
    ErrorCode.EXECUTION_TIMEOUT: "submit_slow",
    ErrorCode.RESULT_TOO_LARGE: "submit",
    ErrorCode.SERIALIZATION_FAILED: "submit",
    ErrorCode.PROJECTION_FAILED: "submit",
    ErrorCode.PROJECTION_INVALID: "submit",
    ErrorCode.INVALID_TRANSITION: "submit",
}

#: Codes that are no call's outcome on the memory machine, each with the reason.
NOT_CALL_OUTCOMES: Final[dict[ErrorCode, str]] = {
    ErrorCode.STORE_UNAVAILABLE: "the memory store never fails",
    ErrorCode.DURABILITY_NOT_REACHED: "only a Redis store in a durability mode refuses with it",
    ErrorCode.STALE_PROJECTION: "a sweep's code, counted as sweep:swept",
    ErrorCode.NOT_STALE: "a sweep's no-op on a young record, not a call outcome",
}
