"""The example tool set over a data folder, registered with a :class:`ToolRegistry`."""

from __future__ import annotations

from pathlib import Path

from ..boundary import ToolRegistry, ToolSpec
from ._common import DEFAULT_SUMMARY_BYTES
from ._guarded import GuardedTool
from ._logs import LogSearch
from ._runbooks import RunbookOutline, RunbookSearch
from ._sql import SqliteQuery

__all__ = ["DEFAULT_TOOL_TIMEOUT_MS", "TOOL_NAMES", "default_registry"]

#: Executor time limit of each example tool, in ms.
DEFAULT_TOOL_TIMEOUT_MS = 5_000

#: Registered tool names, in registration order.
TOOL_NAMES = (
    "search_logs",
    "query_db",
    "search_runbooks",
    "runbook_outline",
    "restart_service",
    "read_vault_secret",
)


def default_registry(
    data_dir: Path | str,
    *,
    summary_bytes: int = DEFAULT_SUMMARY_BYTES,
    timeout_ms: int = DEFAULT_TOOL_TIMEOUT_MS,
) -> ToolRegistry:
    """The example tools over ``data_dir`` (CIS-BND-3).

    ``data_dir`` holds ``logs/*.log``, ``incidents.db`` and ``runbooks/*.md`` (the
    layout of ``examples/data``). ``summary_bytes`` bounds every agent result
    (content + scope, UTF-8 bytes); ``timeout_ms`` bounds every executor.

    Registered: ``search_logs``, ``query_db``, ``search_runbooks``,
    ``runbook_outline`` (read-only, authorized); ``restart_service``
    (``read_only=False``: NOT_READ_ONLY); ``read_vault_secret``
    (``authorized=False``: UNAUTHORIZED). The folder is not checked here: a missing
    file makes the tool's executor fail (EXECUTION_FAILED) when it is called.
    Raises ``ValueError`` for a non-positive ``summary_bytes`` or ``timeout_ms``.
    """
    if summary_bytes <= 0 or timeout_ms <= 0:
        raise ValueError("summary_bytes and timeout_ms must be positive")
    root = Path(data_dir)
    logs = LogSearch(root / "logs", summary_bytes)
    sql = SqliteQuery(root / "incidents.db", summary_bytes, statement_timeout_ms=timeout_ms)
    search = RunbookSearch(root / "runbooks", summary_bytes)
    outline = RunbookOutline(root / "runbooks", summary_bytes)
    restart = GuardedTool("restart_service")
    secret = GuardedTool("read_vault_secret")
    specs = [
        ToolSpec(name=tool.name, executor=tool.execute, projector=tool.project, timeout_ms=timeout_ms)
        for tool in (logs, sql, search, outline)
    ]
    specs.append(
        ToolSpec(
            name=restart.name,
            executor=restart.execute,
            projector=restart.project,
            read_only=False,
            timeout_ms=timeout_ms,
        )
    )
    specs.append(
        ToolSpec(
            name=secret.name,
            executor=secret.execute,
            projector=secret.project,
            authorized=False,
            timeout_ms=timeout_ms,
        )
    )
    return ToolRegistry(specs)
