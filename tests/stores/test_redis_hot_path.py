"""The server's work per invocation: how many commands the two scripts run (CIS-STORE-9).

Counted from ``INFO commandstats`` (commands a script runs are counted there too) over a
hundred successful invocations through the boundary on a store on the server's clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
import redis

from invocation_store import RunContext, ToolBoundary, ToolCallEnvelope, ToolRegistry, ToolSpec
from invocation_store.adapters import RedisStore
from invocation_store.kernel import EvidenceStatus, Projection
from invocation_store.testing.redis_server import redis_server

pytestmark = pytest.mark.redis

CALLS = 100
#: The hot path of one invocation, per script (see the contracts in ``_redis_scripts``).
CREATE_CALLS = {"time": 1, "hmget": 2, "rpush": 1, "hset": 2, "pexpireat": 1}
COMPLETE_CALLS = {"hmget": 2, "pttl": 1, "rpush": 1, "hset": 1, "set": 1, "hincrby": 1}


def _project(raw: object, args: Mapping[str, Any]) -> Projection:
    return Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content="x", scope="s")


def test_an_invocation_runs_fourteen_commands_in_two_scripts() -> None:
    """CIS-STORE-9: a successful invocation is two EVALSHA (two round trips) whose
    scripts run 7 commands each (create: TIME, HMGET run, HMGET record, RPUSH, HSET record, PEXPIREAT
    record, HSET run; complete: HMGET record, PTTL record, HMGET run, RPUSH, HSET record, SET raw,
    HINCRBY run), and nothing else reaches the server: no TYPE, no second PTTL, no GET."""
    spec = ToolSpec(name="t", executor=lambda _args: "r" * 4096, projector=_project)
    with redis_server() as url:
        store = RedisStore.from_url(url)
        boundary = ToolBoundary(store, ToolRegistry([spec]))
        context = boundary.open_run(
            "run-hot",
            deadline_ms=boundary.now_ms() + 600_000,
            ttl_ms=600_000,
            tool_call_budget=500,
            byte_budget=10**9,
        )
        assert isinstance(context, RunContext)

        def invoke(tool_call_id: str) -> None:
            envelope = ToolCallEnvelope(
                run_id="run-hot", tool_call_id=tool_call_id, tool_name="t", arguments="{}"
            )
            assert boundary.invoke(context, envelope).ok

        invoke("warm")  # the lists' first push sets their expiry once per run
        with redis.Redis.from_url(url) as admin:
            admin.config_resetstat()
            for index in range(CALLS):
                invoke(f"call_{index}")
            stats = admin.info("commandstats")
        counts = {
            name.removeprefix("cmdstat_"): int(values["calls"])
            for name, values in stats.items()
            if not name.startswith(("cmdstat_config", "cmdstat_info"))
        }
        expected = {
            name: CREATE_CALLS.get(name, 0) + COMPLETE_CALLS.get(name, 0)
            for name in {*CREATE_CALLS, *COMPLETE_CALLS}
        }
        assert counts == {"evalsha": 2 * CALLS, **{name: n * CALLS for name, n in expected.items()}}
        assert sum(expected.values()) == 14
        store.close()
