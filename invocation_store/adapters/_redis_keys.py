"""The Redis key layout (CIS-KEY-1..3): every key of a run under one hash tag.

The kernel owns the id rules (:func:`~invocation_store.kernel.is_safe_id`); this
module turns safe ids into the Redis adapter's key strings and nothing else. Every
key starts with a configurable prefix and puts the run id in a Redis Cluster hash
tag, ``{<run_id>}``, so that all keys of one run map to one slot (CIS-KEY-2):

- ``<prefix>:{<run_id>}:run``: the run state (HASH);
- ``<prefix>:{<run_id>}:done``: the ordered completed-call list (LIST, CIS-PROG-1);
- ``<prefix>:{<run_id>}:calls``: the admission-ordered call list (LIST);
- ``<prefix>:{<run_id>}:call:<tool_call_id>``: one canonical record (HASH);
- ``<prefix>:{<run_id>}:raw:<tool_call_id>``: its raw response (STRING).

Injective for a fixed prefix (CIS-KEY-3): safe ids contain no ``{`` or ``}``, so
the run id ends at the first ``}`` and the tool_call_id is the rest after the kind.
Each function raises ``ValueError`` for an unsafe id, or a prefix that is empty or
holds a brace.
"""

from __future__ import annotations

from ..kernel import is_safe_id

__all__ = ["call_key", "calls_key", "check_prefix", "done_key", "raw_key", "run_key"]


def _check_key_parts(prefix: str, run_id: str) -> None:
    if not is_safe_id(run_id):
        raise ValueError("run_id is not a safe id")
    if not prefix or "{" in prefix or "}" in prefix:
        raise ValueError("key prefix must be non-empty and contain no '{' or '}'")


def check_prefix(prefix: str) -> str:
    """Return ``prefix`` if it can prefix keys (non-empty, no braces); else ``ValueError``."""
    _check_key_parts(prefix, "x")
    return prefix


def run_key(prefix: str, run_id: str) -> str:
    """Key of a run's state: ``<prefix>:{<run_id>}:run`` (CIS-KEY-1, CIS-KEY-2).

    Raises ``ValueError`` for an unsafe run id or a prefix containing braces.
    """
    _check_key_parts(prefix, run_id)
    return f"{prefix}:{{{run_id}}}:run"


def done_key(prefix: str, run_id: str) -> str:
    """Key of a run's ordered completed-call list: ``<prefix>:{<run_id>}:done`` (CIS-PROG-1)."""
    _check_key_parts(prefix, run_id)
    return f"{prefix}:{{{run_id}}}:done"


def calls_key(prefix: str, run_id: str) -> str:
    """Key of a run's admission-ordered call list: ``<prefix>:{<run_id>}:calls`` (CIS-KEY-1).

    Raises ``ValueError`` for an unsafe run id or a prefix with braces.
    """
    _check_key_parts(prefix, run_id)
    return f"{prefix}:{{{run_id}}}:calls"


def call_key(prefix: str, run_id: str, tool_call_id: str) -> str:
    """Key of one canonical record: ``<prefix>:{<run_id>}:call:<tool_call_id>`` (CIS-KEY-1, CIS-KEY-3).

    Raises ``ValueError`` for an unsafe id or prefix.
    """
    _check_key_parts(prefix, run_id)
    if not is_safe_id(tool_call_id):
        raise ValueError("tool_call_id is not a safe id")
    return f"{prefix}:{{{run_id}}}:call:{tool_call_id}"


def raw_key(prefix: str, run_id: str, tool_call_id: str) -> str:
    """Key of a record's raw response: ``<prefix>:{<run_id>}:raw:<tool_call_id>`` (CIS-KEY-1).

    Raises ``ValueError`` for unsafe ids or a prefix with braces.
    """
    call_key(prefix, run_id, tool_call_id)  # validates every part
    return f"{prefix}:{{{run_id}}}:raw:{tool_call_id}"
