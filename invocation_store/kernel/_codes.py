"""The closed set of error codes, the fixed agent-facing message and the requirement of each.

Everything an agent can see on failure is one member of :class:`ErrorCode` plus, at
most, the fixed message of :data:`ERROR_MESSAGES` (CIS-ERR-1). Messages never carry
payloads, ids, keys, credentials or exception text.
"""

from __future__ import annotations

import enum
from typing import Final

__all__ = ["CODE_REQUIREMENTS", "ERROR_MESSAGES", "ErrorCode"]


class ErrorCode(enum.StrEnum):
    """Stable error codes; the value is the code's wire spelling (CIS-ERR-1)."""

    #: The envelope has no tool_call_id, or it is blank or not a string (CIS-ID-2).
    MISSING_TOOL_CALL_ID = "MISSING_TOOL_CALL_ID"
    #: The tool_call_id is outside 1-128 characters of ``A-Z a-z 0-9 _ - . :`` (CIS-ID-3).
    UNSAFE_TOOL_CALL_ID = "UNSAFE_TOOL_CALL_ID"
    #: The envelope's run id differs from the explicit RunContext run id (CIS-PRE-3).
    RUN_MISMATCH = "RUN_MISMATCH"
    #: The arguments are not one I-JSON object (CIS-JSON-1..6).
    INVALID_ARGUMENTS = "INVALID_ARGUMENTS"
    #: The arguments exceed the request byte limit (CIS-SIZE-2).
    REQUEST_TOO_LARGE = "REQUEST_TOO_LARGE"
    #: The tool is unknown or not authorized for this run (CIS-PRE-5).
    UNAUTHORIZED = "UNAUTHORIZED"
    #: The tool is not declared read-only (CIS-PRE-6).
    NOT_READ_ONLY = "NOT_READ_ONLY"
    #: The run is unknown, cancelled, closed or expired (CIS-RUN-3).
    RUN_INACTIVE = "RUN_INACTIVE"
    #: The run's deadline has passed (CIS-RUN-4).
    RUN_DEADLINE_EXCEEDED = "RUN_DEADLINE_EXCEEDED"
    #: A record with this run id and tool_call_id already exists and its tool ran (CIS-ID-5).
    DUPLICATE_TOOL_CALL = "DUPLICATE_TOOL_CALL"
    #: This run id and tool_call_id were admitted and have not completed; the outcome is unknown (CIS-ID-5).
    CALL_IN_PROGRESS = "CALL_IN_PROGRESS"
    #: The run's tool-call budget is spent (CIS-RUN-5).
    TOOL_BUDGET_EXHAUSTED = "TOOL_BUDGET_EXHAUSTED"
    #: The run's cumulative byte budget is spent (CIS-RUN-6).
    RUN_BYTES_EXHAUSTED = "RUN_BYTES_EXHAUSTED"
    #: The executor raised (CIS-FAIL-2).
    EXECUTION_FAILED = "EXECUTION_FAILED"
    #: The executor did not return within the tool's timeout (CIS-FAIL-3).
    EXECUTION_TIMEOUT = "EXECUTION_TIMEOUT"
    #: The raw response or the agent result exceeds its byte limit (CIS-SIZE-3, CIS-SIZE-4).
    RESULT_TOO_LARGE = "RESULT_TOO_LARGE"
    #: A value could not be encoded or decoded (raw response not text, bad record) (CIS-FAIL-4).
    SERIALIZATION_FAILED = "SERIALIZATION_FAILED"
    #: The projector raised (CIS-EVID-5).
    PROJECTION_FAILED = "PROJECTION_FAILED"
    #: The projector returned an invalid evidence status, scope or content (CIS-EVID-5).
    PROJECTION_INVALID = "PROJECTION_INVALID"
    #: The record stayed PROJECTING past the sweep age: its worker is presumed lost (CIS-LIFE-7).
    STALE_PROJECTION = "STALE_PROJECTION"
    #: The store could not be reached or answered unexpectedly (CIS-FAIL-5).
    STORE_UNAVAILABLE = "STORE_UNAVAILABLE"
    #: The create did not reach the store's durability mode in time; the tool did not run (CIS-DUR-2).
    DURABILITY_NOT_REACHED = "DURABILITY_NOT_REACHED"
    #: The event is not allowed in the record's current state (CIS-LIFE-2).
    INVALID_TRANSITION = "INVALID_TRANSITION"
    #: A sweep found the record younger than the sweep age; nothing changes (CIS-LIFE-7).
    NOT_STALE = "NOT_STALE"


#: One short, fixed, payload-free message per code (CIS-ERR-1).
ERROR_MESSAGES: dict[ErrorCode, str] = {
    ErrorCode.MISSING_TOOL_CALL_ID: "The tool call has no tool_call_id.",
    ErrorCode.UNSAFE_TOOL_CALL_ID: "The tool_call_id is not a safe identifier.",
    ErrorCode.RUN_MISMATCH: "The tool call belongs to another run.",
    ErrorCode.INVALID_ARGUMENTS: "The arguments are not a valid JSON object.",
    ErrorCode.REQUEST_TOO_LARGE: "The arguments are too large.",
    ErrorCode.UNAUTHORIZED: "The tool is not authorized.",
    ErrorCode.NOT_READ_ONLY: "The tool is not read-only.",
    ErrorCode.RUN_INACTIVE: "The run is not active.",
    ErrorCode.RUN_DEADLINE_EXCEEDED: "The run's deadline has passed.",
    ErrorCode.DUPLICATE_TOOL_CALL: "This tool_call_id was already used in this run.",
    ErrorCode.CALL_IN_PROGRESS: "This tool call was already admitted and has not finished yet.",
    ErrorCode.TOOL_BUDGET_EXHAUSTED: "The run's tool-call budget is exhausted.",
    ErrorCode.RUN_BYTES_EXHAUSTED: "The run's byte budget is exhausted.",
    ErrorCode.EXECUTION_FAILED: "The tool failed.",
    ErrorCode.EXECUTION_TIMEOUT: "The tool timed out.",
    ErrorCode.RESULT_TOO_LARGE: "The tool result is too large.",
    ErrorCode.SERIALIZATION_FAILED: "The tool result could not be serialized.",
    ErrorCode.PROJECTION_FAILED: "The tool result could not be summarized.",
    ErrorCode.PROJECTION_INVALID: "The tool result summary was invalid.",
    ErrorCode.STALE_PROJECTION: "The tool call was abandoned.",
    ErrorCode.STORE_UNAVAILABLE: "The invocation store is unavailable.",
    ErrorCode.DURABILITY_NOT_REACHED: "The tool call was not stored durably in time; the tool did not run.",
    ErrorCode.INVALID_TRANSITION: "The tool call is not in a state that allows this.",
    ErrorCode.NOT_STALE: "The tool call is not stale.",
}

#: The requirement each code belongs to: what an answer with it wrongly given (or wrongly
#: withheld) violates. The oracle names it in a divergence (CIS-ORC-2).
CODE_REQUIREMENTS: Final[dict[ErrorCode, str]] = {
    ErrorCode.MISSING_TOOL_CALL_ID: "CIS-ID-2",
    ErrorCode.UNSAFE_TOOL_CALL_ID: "CIS-ID-3",
    ErrorCode.RUN_MISMATCH: "CIS-PRE-3",
    ErrorCode.INVALID_ARGUMENTS: "CIS-JSON-1",
    ErrorCode.REQUEST_TOO_LARGE: "CIS-SIZE-2",
    ErrorCode.UNAUTHORIZED: "CIS-PRE-5",
    ErrorCode.NOT_READ_ONLY: "CIS-PRE-6",
    ErrorCode.RUN_INACTIVE: "CIS-RUN-3",
    ErrorCode.RUN_DEADLINE_EXCEEDED: "CIS-RUN-4",
    ErrorCode.DUPLICATE_TOOL_CALL: "CIS-ID-5",
    ErrorCode.CALL_IN_PROGRESS: "CIS-ID-5",
    ErrorCode.TOOL_BUDGET_EXHAUSTED: "CIS-RUN-5",
    ErrorCode.RUN_BYTES_EXHAUSTED: "CIS-RUN-6",
    ErrorCode.EXECUTION_FAILED: "CIS-FAIL-2",
    ErrorCode.EXECUTION_TIMEOUT: "CIS-FAIL-3",
    ErrorCode.SERIALIZATION_FAILED: "CIS-FAIL-4",
    ErrorCode.PROJECTION_FAILED: "CIS-EVID-5",
    ErrorCode.PROJECTION_INVALID: "CIS-EVID-5",
    ErrorCode.RESULT_TOO_LARGE: "CIS-SIZE-4",
    ErrorCode.STALE_PROJECTION: "CIS-LIFE-7",
    ErrorCode.NOT_STALE: "CIS-LIFE-7",
    ErrorCode.STORE_UNAVAILABLE: "CIS-FAIL-5",
    ErrorCode.INVALID_TRANSITION: "CIS-LIFE-2",
    ErrorCode.DURABILITY_NOT_REACHED: "CIS-DUR-2",
}
