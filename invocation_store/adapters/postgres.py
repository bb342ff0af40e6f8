"""PostgreSQL stores: shared deployments on the database teams already run (CIS-STORE-4, CIS-STORE-10).

Requires the ``postgres`` extra (``psycopg`` 3 and ``psycopg_pool``) and PostgreSQL 14 or
later. :class:`AsyncPostgresStore` is written once (``_async/postgres.py``);
:class:`PostgresStore` is generated from it by ``scripts/unasync.py``.

Transactions. Every create, completion and run operation is one transaction at READ
COMMITTED, set by the store on each connection (``BEGIN ISOLATION LEVEL READ COMMITTED``,
whatever the server's ``default_transaction_isolation``): the run row is locked
(``SELECT ... FOR UPDATE``), then the record row, then the clock is read, the kernel
decides in Python on what was read, and the kernel's effects are written (the shared SQL
core, ``_sql.py``). Any number of hosts may share one database: two creates of one run
serialize on the run row, so duplicates and budgets are decided atomically. A run
inserted concurrently by another opener (``INSERT ... ON CONFLICT DO NOTHING`` touching
no row) makes the transaction run again.

One clock. With the default ``clock=None`` every time decision (deadline, expiry,
admission time) uses the database's ``clock_timestamp()``, read inside the transaction
after its locks, so hosts whose clocks differ decide alike; ``now_ms()`` is the host's
lower-bound estimate of that clock (``_postgres_common.DatabaseClock``).

Expiry. A row is visible while kernel ``live`` says so: an expired row reads as absent
and is never completed or extended (the expiry is written once, at creation). The bounded
lapse sweep (``sweep_lapsed``: ``DELETE ... WHERE expires_at_ms <= now`` in batches of
``sweep_limit``, mirroring kernel ``lapsed``) runs on demand and by the store itself at
most every ``sweep_interval_ms``, after a write (inside the write call, once the write is
done): a store that keeps writing keeps its tables bounded. Reads never sweep, and an idle
store does not sweep at all: its lapsed rows read as absent (they are invisible, only
their space is kept) until the next write or a ``sweep_lapsed()`` call. To bound the tables
of a database whose writers may go quiet, call ``sweep_lapsed()`` on your own schedule.

Schema. Created on first use (``CREATE TABLE``, under a transaction-scoped advisory lock
so hosts starting together create it once), with a version table (``<prefix>schema``).
A database at an older version is migrated by ``_sql.MIGRATIONS`` in the same
transaction (all steps or none); a newer one, or an older one no migration step starts
from, is refused (:class:`~invocation_store.adapters._sql.SchemaError`, permanent, its
``operator_text()`` naming both versions). The migration story: docs/stores.md.
Indexes: the primary keys ``runs(run_id)``, ``records(run_id, tool_call_id)``,
``calls``/``done(run_id, position)``, and ``expires_at_ms`` on ``runs`` and ``records``
(the sweep).

Retries. A lost connection, a restarting server, a serialization failure or a deadlock
runs the whole transaction again within the ``retry`` budget: safe even if the first
attempt committed, because every write is idempotent under the invocation token (a
resent create replays, a resent completion is a REPLAY, a resent open or cancel answers
like the first, CIS-RETRY-2, CIS-RETRY-3).

Durability. ``synchronous_commit`` (``None``: the server's, ``on`` by default): with
``on`` an acknowledged transaction is in the WAL on disk, surviving a server crash;
with synchronous standbys configured (``synchronous_standby_names``), ``on`` /
``remote_apply`` also wait for the standby; ``off`` may lose the last acknowledged
transactions in a crash. See the durability table in docs/durability.md.
"""

from ._async.postgres import (
    DEFAULT_SWEEP_INTERVAL_MS,
    DEFAULT_SWEEP_LIMIT,
    SYNCHRONOUS_COMMIT,
    AsyncPostgresStore,
)
from ._sql import SCHEMA_VERSION, SchemaError
from ._sync.postgres import PostgresStore

__all__ = [
    "DEFAULT_SWEEP_INTERVAL_MS",
    "DEFAULT_SWEEP_LIMIT",
    "SCHEMA_VERSION",
    "SYNCHRONOUS_COMMIT",
    "AsyncPostgresStore",
    "PostgresStore",
    "SchemaError",
]
