"""docs/stores.md: its examples run (SQLite as a ```python block, PostgreSQL against a private server)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDE = (ROOT / "docs" / "stores.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    start = GUIDE.index(f"## {title}\n")
    end = GUIDE.find("\n## ", start + 1)
    return GUIDE[start : end if end > 0 else None]


@pytest.mark.postgres
def test_postgres_example_runs(postgres_dsn: str) -> None:
    """CIS-STORE-4, CIS-STORE-10: docs/stores.md's PostgreSQL example runs as written on a private server."""
    (block,) = re.findall(r"```py\n(.*?)```", _section("PostgreSQL"), re.DOTALL)
    env = {**os.environ, "INVOCATION_STORE_POSTGRES_DSN": postgres_dsn}
    result = subprocess.run(
        [sys.executable, "-c", block],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]


def test_choosing_a_store_names_every_store() -> None:
    """CIS-STORE-4: the "Choosing a store" table has a row for each store this package ships."""
    table = _section("Choosing a store")
    for name in ("MemoryStore", "SqliteStore", "PostgresStore", "RedisStore", "Redis Cluster"):
        assert name in table, name
