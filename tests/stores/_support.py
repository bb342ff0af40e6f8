"""Helpers shared by the store tests: kernel-built records, run setup, Redis probes."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from typing import Any

import redis
from attrs import evolve

from invocation_store.adapters import InvocationStore
from invocation_store.kernel import (
    Admission,
    AdmissionRequest,
    CanonicalRecord,
    EvidenceStatus,
    Failed,
    Limits,
    Projection,
    ProjectionReceived,
    RawReceived,
    RunState,
    call_key,
    transition,
)

LIMITS = Limits()
RUN = "run-1"
DEADLINE_IN_MS = 60_000
TTL_MS = 30_000

#: Commands that set, change or drop a key's expiry, or overwrite a value whole.
EXPIRE_FAMILY = frozenset(
    {"EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT", "PERSIST", "GETEX", "SET", "SETEX", "PSETEX", "GETSET"}
)


def token() -> str:
    """A fresh invocation token, drawn as a boundary would."""
    return secrets.token_hex(8)


def open_default_run(
    store: InvocationStore,
    now_ms: int,
    *,
    run_id: str = RUN,
    tool_call_budget: int = 10,
    byte_budget: int = 1_000_000,
    ttl_ms: int = TTL_MS,
    deadline_in_ms: int = DEADLINE_IN_MS,
) -> RunState:
    """Open a run and return its state (fails the test on a code)."""
    run = store.open_run(
        run_id,
        deadline_ms=now_ms + deadline_in_ms,
        ttl_ms=ttl_ms,
        tool_call_budget=tool_call_budget,
        byte_budget=byte_budget,
    )
    assert isinstance(run, RunState), run
    return run


def request(
    now_ms: int,
    tool_call_id: str = "call_1",
    *,
    run_id: str = RUN,
    arguments: str = '{"q": "weather"}',
    invocation_token: str | None = None,
    tool_name: str = "search",
) -> AdmissionRequest:
    """An admission request as the boundary builds it after preflight."""
    return AdmissionRequest(
        run_id=run_id,
        tool_call_id=tool_call_id,
        tool_name=tool_name,
        request_json=arguments,
        invocation_token=invocation_token if invocation_token is not None else token(),
        now_ms=now_ms,
    )


def admitted(store: InvocationStore, req: AdmissionRequest) -> CanonicalRecord:
    """Create and return the PROJECTING record (fails the test on a code)."""
    result = store.create(req, LIMITS)
    assert isinstance(result, Admission), result
    return result.record


def with_raw(record: CanonicalRecord, now_ms: int, raw: str = '{"temp": 21}') -> CanonicalRecord:
    """The kernel's PROJECTING-with-raw record."""
    result = transition(record, RawReceived(raw_response=raw, now_ms=now_ms), LIMITS)
    assert isinstance(result, CanonicalRecord), result
    return result


def ready(
    record: CanonicalRecord,
    now_ms: int,
    *,
    raw: str = '{"temp": 21}',
    content: str = "21 C",
    evidence: EvidenceStatus = EvidenceStatus.EVIDENCE_FOUND,
    scope: str = "city=Paris",
) -> CanonicalRecord:
    """The kernel's READY record from a PROJECTING one (raw added if missing)."""
    base = record if record.raw_response is not None else with_raw(record, now_ms, raw)
    projection = Projection(evidence_status=evidence, content=content, scope=scope)
    result = transition(base, ProjectionReceived(projection=projection, now_ms=now_ms), LIMITS)
    assert isinstance(result, CanonicalRecord), result
    return result


def failed(record: CanonicalRecord, now_ms: int, code: Any) -> CanonicalRecord:
    """The kernel's ERROR record with ``code``."""
    result = transition(record, Failed(code=code, now_ms=now_ms), LIMITS)
    assert isinstance(result, CanonicalRecord), result
    return result


def moved(record: CanonicalRecord, **changes: Any) -> CanonicalRecord:
    """``attrs.evolve`` shorthand."""
    return evolve(record, **changes)


# -- Redis probes ------------------------------------------------------------------------


def record_key(prefix: str, run_id: str, tool_call_id: str) -> str:
    """The kernel's key of a record."""
    return call_key(prefix, run_id, tool_call_id)


@contextlib.contextmanager
def monitored(url: str) -> Iterator[list[dict[str, Any]]]:
    """Capture, with MONITOR, every command the server runs inside the block.

    The list is filled when the block ends (after a sentinel ECHO is seen), so read
    it after the ``with``. Each entry is redis-py's parsed MONITOR line, with
    ``client_type`` ``"lua"`` for commands a script ran. Use only on a server the
    tests started (``private_redis_url``).
    """
    commands: list[dict[str, Any]] = []
    sentinel = f"cis-sentinel-{secrets.token_hex(6)}"
    with redis.Redis.from_url(url) as watcher, redis.Redis.from_url(url) as client:
        client.ping()  # connect (HELLO, CLIENT SETINFO) before MONITOR starts
        with watcher.monitor() as monitor:
            yield commands
            client.echo(sentinel)
            while True:
                entry = monitor.next_command()
                if sentinel in entry["command"]:
                    break
                commands.append(entry)


def name_and_key(entry: dict[str, Any]) -> tuple[str, str]:
    """(upper-case command name, first argument) of a MONITOR entry."""
    parts = str(entry["command"]).split(" ")
    return parts[0].upper(), parts[1] if len(parts) > 1 else ""
