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

:class:`RunKeys` holds every key of one run, validated once and cached, also as the
UTF-8 bytes that script calls send (the hot path encodes no key per call).

Injective for a fixed prefix (CIS-KEY-3): safe ids contain no ``{`` or ``}``, so
the run id ends at the first ``}`` and the tool_call_id is the rest after the kind.
Each function raises ``ValueError`` for an unsafe id, or a prefix that is empty or
holds a brace.
"""

from __future__ import annotations

import functools

from ..kernel import MAX_ID_LENGTH, is_safe_id

__all__ = ["RunKeys", "call_key", "calls_key", "check_prefix", "done_key", "raw_key", "run_key", "run_keys"]


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


def _wire(text: str) -> bytes | str:
    """``text`` as UTF-8 bytes, sent as is by redis-py (no per-call encoding).

    A text without a UTF-8 form (a prefix holding a lone surrogate) stays a str, so
    that redis-py refuses it inside the store's call, as for any other argument.
    """
    try:
        return text.encode()
    except UnicodeEncodeError:
        return text


class RunKeys:
    """Every key of one run (validated once, then cached): all share the ``{run_id}`` hash tag.

    ``run``/``done``/``calls`` are the str keys; ``run_wire``/``calls_wire``/``done_wire``
    the same keys as the bytes that script calls send (see :func:`_wire`).
    """

    __slots__ = (
        "_base",
        "_call_wire",
        "_raw_wire",
        "calls",
        "calls_wire",
        "done",
        "done_wire",
        "run",
        "run_wire",
    )

    def __init__(self, prefix: str, run_id: str) -> None:
        base = f"{prefix}:{{{run_id}}}"
        self._base = base
        self.run = run_key(prefix, run_id)
        self.done = done_key(prefix, run_id)
        self.calls = calls_key(prefix, run_id)
        self.run_wire = _wire(self.run)
        self.done_wire = _wire(self.done)
        self.calls_wire = _wire(self.calls)
        self._call_wire = _wire(f"{base}:call:")
        self._raw_wire = _wire(f"{base}:raw:")

    def record(self, tool_call_id: str) -> str:
        """The record HASH key (= :func:`call_key`) of a tool_call_id already known to be safe."""
        return f"{self._base}:call:{tool_call_id}"

    def raw(self, tool_call_id: str) -> str:
        """The raw STRING key (= :func:`raw_key`) of a tool_call_id already known to be safe."""
        return f"{self._base}:raw:{tool_call_id}"

    def record_wire(self, tool_call_id: str) -> bytes | str:
        """:meth:`record` as sent (bytes); ``tool_call_id`` is a safe id, hence ASCII."""
        head = self._call_wire
        return head + tool_call_id.encode() if isinstance(head, bytes) else head + tool_call_id

    def raw_wire(self, tool_call_id: str) -> bytes | str:
        """:meth:`raw` as sent (bytes); ``tool_call_id`` is a safe id, hence ASCII."""
        head = self._raw_wire
        return head + tool_call_id.encode() if isinstance(head, bytes) else head + tool_call_id

    def stage(self, nonce: str) -> str:
        """A staging key for one large raw response: ``<prefix>:{<run_id>}:stage:<nonce>``."""
        return f"{self._base}:stage:{nonce}"


@functools.lru_cache(maxsize=4096)
def _cached_run_keys(prefix: str, run_id: str) -> RunKeys | None:
    if not is_safe_id(run_id):
        return None
    keys = RunKeys(prefix, run_id)  # run_key() validates the prefix
    if keys.record("x") != call_key(prefix, run_id, "x"):  # pragma: no cover - layout guard
        raise AssertionError("key layout differs from call_key")
    return keys


def run_keys(prefix: str, run_id: str) -> RunKeys | None:
    """The keys of run ``run_id`` under ``prefix`` (cached); ``None`` if ``run_id`` is not a safe id.

    Raises ``ValueError`` for a prefix that cannot start keys (empty, braces).
    """
    if not isinstance(run_id, str) or len(run_id) > MAX_ID_LENGTH:  # never cache long junk
        return None
    return _cached_run_keys(prefix, run_id)
