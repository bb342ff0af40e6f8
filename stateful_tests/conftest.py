"""Hypothesis profiles and store factories for the stateful suite.

Profiles are registered once, in the root ``conftest.py``, and chosen by
``HYPOTHESIS_PROFILE``; without it, ``CI=true`` selects ``ci`` and anything else ``dev``:

- ``dev``: quick local runs (25 examples of 30 steps per machine unit).
- ``ci``: derived from Hypothesis' built-in ``ci`` profile (derandomized, no
  database, no deadline), 100 examples of 50 steps per machine unit; the whole
  stateful suite stays well under 4 minutes on a 2-core machine.
- ``thorough``: long runs (1,000 examples of 100 steps per unit), e.g. nightly.

Each test scales the profile's ``max_examples`` by its store's cost (see
``stateful_tests/_support.py``): the in-memory machine runs three units, the Redis machines fewer.
Every machine runs with ``deadline=None`` (a stateful run is one example, and Redis
round trips vary). The steps each machine ran are printed at the end of the session.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from invocation_store.testing import RedisStoreFactory

# Registered and loaded once, in the root conftest.py (it applies to every test).
PROFILE = os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") == "true" else "dev")


@pytest.fixture(scope="session")
def redis_factory(redis_url: str) -> Iterator[RedisStoreFactory]:
    """Sync RedisStores on the session's private server, a fresh prefix per example."""
    factory = RedisStoreFactory(redis_url, prefix="cis-stateful")
    yield factory
    factory.close()


@pytest.fixture(scope="session")
def async_redis_factory(redis_url: str) -> Iterator[RedisStoreFactory]:
    """AsyncRedisStores on the session's private server, a fresh prefix per example."""
    factory = RedisStoreFactory(redis_url, asynchronous=True, prefix="cis-stateful-async")
    yield factory
    factory.close()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Print the steps each stateful machine ran (also under xdist, from the reports)."""
    rows = []
    for reports in terminalreporter.stats.values():
        for report in reports:
            for name, value in getattr(report, "user_properties", ()):
                if name == "stateful" and getattr(report, "when", "call") == "call":
                    rows.append((report.nodeid.split("::")[-1], *value))
    if not rows:
        return
    terminalreporter.write_sep("-", f"stateful machines (profile {PROFILE}; wall time on a shared machine)")
    for test, kind, examples, steps, checks, elapsed in sorted(rows):
        rate = steps / elapsed if elapsed else 0.0
        terminalreporter.write_line(
            f"{test:48} {kind:13} {examples:5} examples {steps:7} steps {checks:8} checks "
            f"{elapsed:7.2f} s {rate:7.0f} steps/s"
        )
