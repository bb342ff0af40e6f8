"""Two tools the boundary must refuse before they run (CIS-PRE-4).

``restart_service`` is declared ``read_only=False``: preflight answers NOT_READ_ONLY.
``read_vault_secret`` is declared ``authorized=False``: preflight answers
UNAUTHORIZED. Neither executor may ever be reached; if one were, it raises
:class:`RefusedToolRanError` (the boundary would record EXECUTION_FAILED, which the
tests would catch) and counts the call in :attr:`GuardedTool.executed`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..kernel import EvidenceStatus, Projection

__all__ = ["GuardedTool", "RefusedToolRanError"]


class RefusedToolRanError(RuntimeError):
    """A tool that preflight must refuse was executed anyway."""


class GuardedTool:
    """A tool whose executor must never run; ``executed`` counts the calls that reached it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.executed = 0

    def execute(self, arguments: Mapping[str, Any]) -> str:
        """Never expected to run: counts the call and raises :class:`RefusedToolRanError`."""
        del arguments
        self.executed += 1
        raise RefusedToolRanError(self.name)

    def project(self, raw: str, arguments: Mapping[str, Any]) -> Projection:
        """Never expected to run either."""
        del raw, arguments
        return Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content="", scope="")
