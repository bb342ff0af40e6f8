"""Build ``incidents.db``, the tiny SQLite database the example transcripts query.

Run from anywhere: ``python examples/data/build_db.py [OUTPUT]`` (default: the
``incidents.db`` beside this script). The output is deterministic: the same rows
every time, so the committed ``incidents.db`` can be checked against a rebuild.
Tables: ``services`` (owning team, tier, runbook), ``incidents`` (times are
ISO-8601 UTC text) and ``deploys``.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

SCHEMA = """
CREATE TABLE services (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    team TEXT NOT NULL,
    tier INTEGER NOT NULL CHECK (tier BETWEEN 1 AND 3),
    runbook TEXT
);
CREATE TABLE incidents (
    id TEXT PRIMARY KEY,
    service_id INTEGER NOT NULL REFERENCES services(id),
    severity TEXT NOT NULL CHECK (severity IN ('SEV1', 'SEV2', 'SEV3')),
    status TEXT NOT NULL CHECK (status IN ('open', 'mitigated', 'resolved')),
    opened_at TEXT NOT NULL,
    resolved_at TEXT,
    title TEXT NOT NULL
);
CREATE TABLE deploys (
    id INTEGER PRIMARY KEY,
    service_id INTEGER NOT NULL REFERENCES services(id),
    version TEXT NOT NULL,
    deployed_at TEXT NOT NULL,
    change_id TEXT NOT NULL,
    author TEXT NOT NULL,
    rolled_back INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX incidents_by_service ON incidents(service_id, opened_at);
CREATE INDEX deploys_by_service ON deploys(service_id, deployed_at);
"""

SERVICES = [
    (1, "payments-api", "payments", 1, "payments-api-timeouts.md"),
    (2, "checkout-web", "storefront", 1, "checkout-5xx.md"),
    (3, "db-proxy", "data-platform", 1, "db-connection-pool.md"),
    (4, "reporting-batch", "data-platform", 3, None),
    (5, "session-cache", "storefront", 2, "legacy-cache.md"),
]

INCIDENTS = [
    (
        "INC-1987",
        5,
        "SEV3",
        "resolved",
        "2026-09-14T11:02:00Z",
        "2026-09-14T11:40:00Z",
        "session-cache evictions spike after node replacement",
    ),
    (
        "INC-2004",
        4,
        "SEV3",
        "resolved",
        "2026-10-03T01:15:00Z",
        "2026-10-03T04:00:00Z",
        "nightly reporting batch overran its window",
    ),
    (
        "INC-2019",
        1,
        "SEV2",
        "resolved",
        "2026-10-21T16:45:00Z",
        "2026-10-21T17:05:00Z",
        "elevated refund latency during card-network maintenance",
    ),
    (
        "INC-2031",
        1,
        "SEV1",
        "mitigated",
        "2026-11-01T03:12:00Z",
        None,
        "checkout failures: payments-api cannot get ledger-db connections",
    ),
    (
        "INC-2032",
        2,
        "SEV2",
        "mitigated",
        "2026-11-01T03:16:00Z",
        None,
        "checkout-web 502s while payments-api circuit breaker open",
    ),
]

DEPLOYS = [
    (1, 1, "v2.13.1", "2026-10-20T09:30:00Z", "CHG-4702", "ci-bot", 0),
    (2, 1, "v2.13.2", "2026-10-28T14:10:00Z", "CHG-4777", "ci-bot", 0),
    (3, 2, "v8.4.0", "2026-10-29T10:00:00Z", "CHG-4790", "ci-bot", 0),
    (4, 1, "v2.14.0", "2026-11-01T02:58:04Z", "CHG-4821", "ci-bot", 1),
    (5, 3, "v1.9.3", "2026-10-15T08:00:00Z", "CHG-4650", "dbre:aokafor", 0),
]


def build(path: Path) -> None:
    """Write the database to ``path``, replacing any file there."""
    path.unlink(missing_ok=True)
    connection = sqlite3.connect(path)
    try:
        connection.executescript(SCHEMA)
        connection.executemany("INSERT INTO services VALUES (?, ?, ?, ?, ?)", SERVICES)
        connection.executemany("INSERT INTO incidents VALUES (?, ?, ?, ?, ?, ?, ?)", INCIDENTS)
        connection.executemany("INSERT INTO deploys VALUES (?, ?, ?, ?, ?, ?, ?)", DEPLOYS)
        connection.commit()
        connection.execute("VACUUM")
    finally:
        connection.close()


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("incidents.db")
    build(target)
    print(f"wrote {target}")
