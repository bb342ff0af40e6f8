"""Concurrent histories: format, linearizability checker and recorder (CIS-HIST-1..3).

A *history* records what several workers did to one store, operation by operation,
with each operation's invocation and completion (or unknown outcome) in real-time
order (``spec/history.md``). :func:`check_history_lines` (the ``invocation-store
check-history`` command) decides whether it is linearizable with respect to the
kernel: whether some order of the operations, consistent with real time, explains
every observed result by the kernel's sequential rules, within a :class:`Budget` of
states and CPU seconds (a run it cannot decide is reported :class:`Undecided`). :class:`HistoryRecorder`
records such histories from any :class:`~invocation_store.adapters.InvocationStore`.
"""

from ._checker import (
    HistoryReport,
    OrderTried,
    Undecided,
    Violation,
    check_history,
    check_history_lines,
    is_linearizable,
)
from ._format import (
    HISTORY_FORMAT,
    HISTORY_VERSION,
    OPERATIONS,
    History,
    HistoryOp,
    MalformedHistoryError,
    Outcome,
    decode_history,
    encode_args,
    encode_result,
    header_line,
)
from ._recorder import HistoryRecorder, HistoryWriter
from ._search import DEFAULT_BUDGET, Budget, BudgetExhausted

__all__ = [
    "DEFAULT_BUDGET",
    "HISTORY_FORMAT",
    "HISTORY_VERSION",
    "OPERATIONS",
    "Budget",
    "BudgetExhausted",
    "History",
    "HistoryOp",
    "HistoryRecorder",
    "HistoryReport",
    "HistoryWriter",
    "MalformedHistoryError",
    "OrderTried",
    "Outcome",
    "Undecided",
    "Violation",
    "check_history",
    "check_history_lines",
    "decode_history",
    "encode_args",
    "encode_result",
    "header_line",
    "is_linearizable",
]
