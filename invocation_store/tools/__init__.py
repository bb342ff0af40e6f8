"""Real read-only example tools, each with its projector (CIS-BND-3, CIS-BND-5).

- ``search_logs`` (:class:`LogSearch`): pattern, minimum level and time window over
  a folder of log files.
- ``query_db`` (:class:`SqliteQuery`): one SQL statement on a SQLite database opened
  read-only by URI (``mode=ro``), so writes fail inside SQLite.
- ``search_runbooks`` (:class:`RunbookSearch`) and ``runbook_outline``
  (:class:`RunbookOutline`): keyword search and outline over Markdown runbooks.
- ``restart_service`` (``read_only=False``) and ``read_vault_secret``
  (``authorized=False``): refused by preflight, never executed.

Every projector returns EVIDENCE_FOUND or a NO_EVIDENCE whose scope says exactly
what was searched (CIS-EVID-3), within a byte budget (``summary_bytes``).
:func:`default_registry` registers them all over a data folder laid out like
``examples/data``.
"""

from ._common import DEFAULT_SUMMARY_BYTES, ToolArgumentError
from ._guarded import GuardedTool, RefusedToolRanError
from ._logs import LEVELS, LogSearch
from ._registry import DEFAULT_TOOL_TIMEOUT_MS, TOOL_NAMES, default_registry
from ._runbooks import RunbookOutline, RunbookSearch, front_matter
from ._sql import SqliteQuery, connect_read_only

__all__ = [
    "DEFAULT_SUMMARY_BYTES",
    "DEFAULT_TOOL_TIMEOUT_MS",
    "LEVELS",
    "TOOL_NAMES",
    "GuardedTool",
    "LogSearch",
    "RefusedToolRanError",
    "RunbookOutline",
    "RunbookSearch",
    "SqliteQuery",
    "ToolArgumentError",
    "connect_read_only",
    "default_registry",
    "front_matter",
]
