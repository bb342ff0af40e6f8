"""The SQL stores' shared core: schema, row codec and each operation as sans-IO steps.

Theory of operation
-------------------
Both SQL stores (SQLite, PostgreSQL) run every operation as one transaction that
reads the rows it needs (locked: ``SELECT ... FOR UPDATE`` in PostgreSQL, the
database lock ``BEGIN IMMEDIATE`` takes in SQLite), reads the store's clock *after*
the locks are held (CIS-STORE-10), runs the kernel in Python on what it read, and
writes the effects the kernel returned. No SQL statement decides a rule, except the
bounded lapse sweep, whose ``expires_at_ms <= now`` mirrors kernel ``lapsed``.

An operation is a generator (the h11 sans-IO pattern): it yields :class:`Fetch`
(rows wanted), :class:`Execute` (a write; the row count comes back) or :data:`NOW`
(the clock reading), and returns the operation's answer. Each store's I/O shell
drives it inside its transaction, so the logic is written once for a blocking
``sqlite3`` connection and an asyncio ``psycopg`` one. A generator that finds a
concurrent insert raises :class:`Conflict`: the shell rolls back and runs it again
(nothing was kept; the kernel decides afresh on what it then reads), at most
:data:`CONFLICT_ATTEMPTS` times in all, then answers STORE_UNAVAILABLE (``Conflict``).

Tables (``prefix`` + name; integers are ms or UTF-8 bytes):

- ``schema``: one row, the schema version (:data:`SCHEMA_VERSION`).
- ``runs``: one row per run, primary key ``run_id``; index on ``expires_at_ms``.
- ``records``: one row per call, primary key ``(run_id, tool_call_id)``; index on
  ``expires_at_ms`` (the lapse sweep).
- ``calls`` / ``done``: the run's call and completed lists, primary key
  ``(run_id, position)``; they live and lapse with the run row (deleted when the run
  is opened afresh or swept).

Size: the schema, the row codec and the nine operations: one unit, read together
(each operation's steps are short; splitting them would scatter the statements
from the steps that run them).
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from typing import Any, Final, get_args, get_type_hints

import attrs
from attrs import frozen

from .. import codec
from ..kernel import (
    IDENTITY_FIELDS,
    Admission,
    AdmissionRequest,
    CanonicalRecord,
    CompareAndSet,
    ErrorCode,
    Limits,
    ProgressView,
    RunState,
    admit,
    cancel_run,
    close_run,
    decide_completion,
    is_safe_id,
    is_well_formed,
    is_well_formed_run,
    lapsed,
    live,
    open_run,
    remaining_ms,
)
from ._protocol import CorruptRecordError, StoreUnavailableError
from ._reads import read_records, read_views, wanted_ids

__all__ = [
    "CONFLICT_ATTEMPTS",
    "MIGRATIONS",
    "NOW",
    "SCHEMA_VERSION",
    "Conflict",
    "Dialect",
    "Execute",
    "Fetch",
    "SchemaError",
    "Statements",
    "Steps",
]

#: The schema this library writes and reads. A database at a lower version is migrated
#: on first use by :data:`MIGRATIONS`; one at a higher version is refused.
SCHEMA_VERSION: Final = 1

#: Statements that take a database from version ``n`` to ``n + 1``, by ``n``: empty
#: while there is one version. A new schema version adds its entry here and raises
#: SCHEMA_VERSION; first use applies the missing steps in one transaction.
MIGRATIONS: Final[dict[int, tuple[str, ...]]] = {}


class SchemaError(StoreUnavailableError):
    """The database holds a schema this library cannot use (a newer version, or a foreign table)."""

    permanent = True

    def __init__(self, found: object) -> None:
        super().__init__(cause="SchemaVersion")
        self.found = found

    def operator_text(self) -> str:
        """What the operator must know: the version found, the one this library reads, and for an
        older version without a migration step what to do."""
        if not isinstance(self.found, int) or isinstance(self.found, bool):
            return f"schema version unreadable in the database; this library reads version {SCHEMA_VERSION}"
        text = f"schema version {self.found} in the database; this library reads version {SCHEMA_VERSION}"
        if self.found < SCHEMA_VERSION:
            text += (
                f"; no migration step from version {self.found} (MIGRATIONS in adapters/_sql.py "
                f"migrates from version {min(MIGRATIONS, default=SCHEMA_VERSION)}): use a fresh table prefix "
                "or database, or migrate it by hand"
            )
        return text


#: How many times a shell runs an operation that meets a concurrent insert of its row (the
#: next attempt finds the row and updates it); past it: STORE_UNAVAILABLE (``Conflict``),
#: so an insert that never lands (a trigger, a policy) cannot loop for ever.
CONFLICT_ATTEMPTS: Final = 5


class Conflict(Exception):  # noqa: N818 - a signal to the shell, not an error
    """A concurrent transaction inserted the row this one meant to insert: run the operation again."""


@frozen
class Fetch:
    """Rows wanted: ``sql`` with ``params``; the shell answers the list of row tuples."""

    sql: str
    params: tuple[Any, ...] = ()


@frozen
class Execute:
    """A write: ``sql`` with ``params``; the shell answers the number of rows it touched."""

    sql: str
    params: tuple[Any, ...] = ()


class _Now:
    """The step that asks the shell for its clock reading (integer ms), taken inside the transaction."""

    def __repr__(self) -> str:
        return "NOW"


#: Ask the shell for the store's clock, read now, inside the transaction (CIS-STORE-10).
NOW: Final = _Now()

#: One step of an operation.
Step = Fetch | Execute | _Now
#: An operation: yields steps, receives their answers, returns the operation's answer.
Steps = Generator[Step, Any, Any]


@frozen
class Dialect:
    """What differs between the SQL databases: the placeholder and the row-lock clause."""

    #: The parameter placeholder (``?`` for sqlite3, ``%s`` for psycopg).
    placeholder: str
    #: Appended to a SELECT that locks its rows ("" where the transaction locks the database).
    lock: str


SQLITE: Final = Dialect(placeholder="?", lock="")
POSTGRES: Final = Dialect(placeholder="%s", lock=" FOR UPDATE")


def _column_type(cls: type[Any], name: str) -> str:
    """The SQL type of field ``name`` of attrs class ``cls``: BIGINT for int, TEXT for str and
    string enums, NOT NULL unless the field may be None. ``TypeError`` for any other type."""
    hint = get_type_hints(cls)[name]
    options = get_args(hint) or (hint,)
    base = [option for option in options if option is not type(None)]
    if len(base) == 1 and base[0] is int:
        sql = "BIGINT"
    elif len(base) == 1 and isinstance(base[0], type) and issubclass(base[0], str):
        sql = "TEXT"
    else:
        raise TypeError(f"{cls.__name__}.{name}: no SQL column type for {hint} (adapters/_sql.py)")
    return sql if type(None) in options else f"{sql} NOT NULL"


#: The columns of the runs and records tables: the attrs fields of RunState and
#: CanonicalRecord, in their order, so a new field is a new column (and a schema change:
#: see :data:`SCHEMA_VERSION`; ``tests/stores/test_sql_stores.py`` pins each version's).
_RUN_COLUMNS: Final = tuple(field.name for field in attrs.fields(RunState))
_RECORD_COLUMNS: Final = tuple(field.name for field in attrs.fields(CanonicalRecord))
#: Columns a completion may change: all but the kernel's identity fields (CIS-LIFE-6).
_MUTABLE: Final = tuple(name for name in _RECORD_COLUMNS if name not in IDENTITY_FIELDS)


def _ddl(prefix: str) -> tuple[str, ...]:
    record_types = ", ".join(f"{name} {_column_type(CanonicalRecord, name)}" for name in _RECORD_COLUMNS)
    run_types = ", ".join(f"{name} {_column_type(RunState, name)}" for name in _RUN_COLUMNS)
    return (
        f"CREATE TABLE {prefix}runs ({run_types}, PRIMARY KEY (run_id))",
        f"CREATE INDEX {prefix}runs_expiry ON {prefix}runs (expires_at_ms)",
        f"CREATE TABLE {prefix}records ({record_types}, PRIMARY KEY (run_id, tool_call_id))",
        f"CREATE INDEX {prefix}records_expiry ON {prefix}records (expires_at_ms)",
        f"CREATE TABLE {prefix}calls (run_id TEXT NOT NULL, position BIGINT NOT NULL, "
        "tool_call_id TEXT NOT NULL, PRIMARY KEY (run_id, position))",
        f"CREATE TABLE {prefix}done (run_id TEXT NOT NULL, position BIGINT NOT NULL, "
        "tool_call_id TEXT NOT NULL, PRIMARY KEY (run_id, position))",
    )


class Statements:
    """Every statement of the SQL stores for one dialect and table ``prefix``, and the operations.

    ``prefix`` (default ``cis_``) starts every table and index name; it must be
    letters, digits and ``_`` (``ValueError`` otherwise), since it is part of the SQL.
    """

    def __init__(self, dialect: Dialect, prefix: str) -> None:
        if not prefix or not all(ch.isascii() and (ch.isalnum() or ch == "_") for ch in prefix):
            raise ValueError("the table prefix is letters, digits and _")
        if prefix[0].isdigit():
            raise ValueError("the table prefix starts with a letter or _")
        self.prefix = prefix
        self.dialect = dialect
        p, q = prefix, dialect.placeholder
        self.ddl = _ddl(prefix)
        self.schema_table = f"CREATE TABLE IF NOT EXISTS {p}schema (version BIGINT NOT NULL)"
        self.schema_version = f"SELECT version FROM {p}schema"
        self.schema_insert = f"INSERT INTO {p}schema (version) VALUES ({q})"
        self.schema_update = f"UPDATE {p}schema SET version = {q}"
        runs = ", ".join(_RUN_COLUMNS)
        self.lock_run = f"SELECT {runs} FROM {p}runs WHERE run_id = {q}{dialect.lock}"
        self.select_run = f"SELECT {runs} FROM {p}runs WHERE run_id = {q}"
        self.insert_run = (
            f"INSERT INTO {p}runs ({runs}) VALUES ({', '.join([q] * len(_RUN_COLUMNS))}) "
            "ON CONFLICT (run_id) DO NOTHING"
        )
        self.update_run = (
            f"UPDATE {p}runs SET {', '.join(f'{c} = {q}' for c in _RUN_COLUMNS[1:])} WHERE run_id = {q}"
        )
        records = ", ".join(_RECORD_COLUMNS)
        self._records = records
        self.lock_record = (
            f"SELECT {records} FROM {p}records WHERE run_id = {q} AND tool_call_id = {q}{dialect.lock}"
        )
        self.upsert_record = (
            f"INSERT INTO {p}records ({records}) VALUES ({', '.join([q] * len(_RECORD_COLUMNS))}) "
            f"ON CONFLICT (run_id, tool_call_id) DO UPDATE SET "
            + ", ".join(f"{c} = excluded.{c}" for c in _RECORD_COLUMNS[2:])
        )
        self.update_record = (
            f"UPDATE {p}records SET {', '.join(f'{c} = {q}' for c in _MUTABLE)} "
            f"WHERE run_id = {q} AND tool_call_id = {q} AND invocation_token = {q}"
        )
        self.insert_call = f"INSERT INTO {p}calls (run_id, position, tool_call_id) VALUES ({q}, {q}, {q})"
        self.insert_done = (
            f"INSERT INTO {p}done (run_id, position, tool_call_id) "
            f"SELECT {q}, COALESCE(MAX(position), 0) + 1, {q} FROM {p}done WHERE run_id = {q}"
        )
        self.delete_lists = (
            f"DELETE FROM {p}calls WHERE run_id = {q}",
            f"DELETE FROM {p}done WHERE run_id = {q}",
        )
        self.delete_run_records = f"DELETE FROM {p}records WHERE run_id = {q}"
        self.list_statements = {
            name: f"SELECT tool_call_id FROM {p}{name} WHERE run_id = {q} ORDER BY position"
            for name in ("calls", "done")
        }
        # The lapse sweep: ``expires_at_ms <= now`` mirrors kernel ``lapsed``. The outer
        # DELETE says it again: a row the subquery picked may be re-created meanwhile (a
        # create upserting a lapsed id, its row lock awaited), and at READ COMMITTED
        # PostgreSQL re-checks only the DELETE's own condition on the row's new version.
        self.lapsed_records = (
            f"DELETE FROM {p}records WHERE expires_at_ms <= {q} AND (run_id, tool_call_id) IN "
            f"(SELECT run_id, tool_call_id FROM {p}records WHERE expires_at_ms <= {q} LIMIT {q})"
        )
        self.lapsed_runs = f"SELECT run_id FROM {p}runs WHERE expires_at_ms <= {q} LIMIT {q}{dialect.lock}"
        self.delete_lapsed_run = f"DELETE FROM {p}runs WHERE run_id = {q} AND expires_at_ms <= {q}"

    def select_records(self, count: int) -> str:
        """The SELECT of ``count`` records of one run (``run_id``, then ``count`` ids)."""
        q = self.dialect.placeholder
        ids = ", ".join([q] * count)
        return (
            f"SELECT {self._records} FROM {self.prefix}records WHERE run_id = {q} AND tool_call_id IN ({ids})"
        )

    # -- the schema, on first use ---------------------------------------------------

    def ensure_schema(self) -> Steps:
        """Create the tables (a fresh database), migrate an older schema, or refuse a newer one."""
        yield Execute(self.schema_table)
        rows = yield Fetch(self.schema_version)
        if not rows:
            for statement in self.ddl:
                yield Execute(statement)
            yield Execute(self.schema_insert, (SCHEMA_VERSION,))
            return SCHEMA_VERSION
        found = rows[0][0]
        if len(rows) != 1 or type(found) is not int or found > SCHEMA_VERSION:
            raise SchemaError(found if len(rows) == 1 else None)
        if any(version not in MIGRATIONS for version in range(found, SCHEMA_VERSION)):
            raise SchemaError(found)
        for version in range(found, SCHEMA_VERSION):
            for statement in MIGRATIONS[version]:
                yield Execute(statement.format(prefix=self.prefix))
        if found != SCHEMA_VERSION:
            yield Execute(self.schema_update, (SCHEMA_VERSION,))
        return SCHEMA_VERSION

    # -- rows ----------------------------------------------------------------------

    def _run(self, run_id: str, *, lock: bool) -> Generator[Step, Any, RunState | None]:
        if not is_safe_id(run_id):
            return None
        rows = yield Fetch(self.lock_run if lock else self.select_run, (run_id,))
        return _run_from(rows[0], run_id) if rows else None

    def _record(self, run_id: str, tool_call_id: str) -> Generator[Step, Any, CanonicalRecord | None]:
        if not (is_safe_id(run_id) and is_safe_id(tool_call_id)):
            return None
        rows = yield Fetch(self.lock_record, (run_id, tool_call_id))
        return _record_from(rows[0], run_id, tool_call_id) if rows else None

    def _write_run(self, run: RunState, existing: RunState | None) -> Steps:
        """Store ``run`` over ``existing`` (as read); a fresh run over a lapsed one drops its lists."""
        if existing is None:
            if (yield Execute(self.insert_run, _run_row(run))) != 1:
                raise Conflict
            return
        if lapsed(existing, run.opened_at_ms):
            for statement in self.delete_lists:
                yield Execute(statement, (run.run_id,))
            yield Execute(self.delete_run_records, (run.run_id,))  # every one lapsed before the run did
        yield Execute(self.update_run, (*_run_row(run)[1:], run.run_id))

    # -- operations ------------------------------------------------------------------

    def open_run(self, run_id: str, parameters: Mapping[str, int]) -> Steps:
        """Kernel ``open_run`` on the locked run row, at the clock read after the lock (CIS-RUN-1)."""
        existing = yield from self._run(run_id, lock=True)
        now = yield NOW
        result = open_run(existing, run_id=run_id, now_ms=now, **parameters)
        if isinstance(result, RunState) and result is not existing:
            yield from self._write_run(result, existing)
        return result

    def end_run(self, run_id: str, *, cancel: bool) -> Steps:
        """Kernel ``cancel_run`` / ``close_run`` on the locked run row (CIS-RUN-2)."""
        existing = yield from self._run(run_id, lock=True)
        now = yield NOW
        result = cancel_run(existing, now) if cancel else close_run(existing, now)
        if isinstance(result, RunState) and result != existing:
            yield Execute(self.update_run, (*_run_row(result)[1:], run_id))
        return result

    def create(self, request: AdmissionRequest, limits: Limits) -> Steps:
        """Kernel ``admit`` on the locked run and record rows, its effects written (CIS-PRE-8)."""
        run = yield from self._run(request.run_id, lock=True)
        existing = yield from self._record(request.run_id, request.tool_call_id)
        now = yield NOW
        result = admit(run, existing, request, limits, now)
        if isinstance(result, Admission) and not result.replayed:
            yield from self.write_admission(result.record, result.run)
        return result

    def write_admission(self, record: CanonicalRecord, run: RunState) -> Steps:
        """Write a (not replayed) Admission's effects: the record (over a lapsed one), the run's
        usage, and the call appended to the run's call list (``Admission.append_call``)."""
        yield Execute(self.upsert_record, _record_row(record))
        yield Execute(self.update_run, (*_run_row(run)[1:], run.run_id))
        yield Execute(self.insert_call, (record.run_id, record.sequence, record.tool_call_id))

    def complete(self, before: CanonicalRecord, after: CanonicalRecord) -> Steps:
        """Kernel ``decide_completion`` on the locked rows; its effects written (CIS-STORE-3, CIS-RUN-6)."""
        run = yield from self._run(after.run_id, lock=True)
        stored = yield from self._record(before.run_id, before.tool_call_id)
        now = yield NOW
        effect = decide_completion(stored, before, after, run, now)
        if isinstance(effect, ErrorCode):
            return effect
        if effect.action is CompareAndSet.WRITE:
            record = effect.record
            values = tuple(_record_row(record)[_RECORD_COLUMNS.index(c)] for c in _MUTABLE)
            written = yield Execute(
                self.update_record, (*values, record.run_id, record.tool_call_id, before.invocation_token)
            )
            if written != 1:
                raise StoreUnavailableError("LostRow")  # the locked row vanished: never a silent success
            if effect.run is not None:
                yield Execute(self.update_run, (*_run_row(effect.run)[1:], effect.run.run_id))
            if effect.append_done:
                yield Execute(self.insert_done, (record.run_id, record.tool_call_id, record.run_id))
        return effect.record

    def get_run(self, run_id: str) -> Steps:
        """The live run state, or None (CIS-RUN-3)."""
        run = yield from self._run(run_id, lock=False)
        now = yield NOW
        return live(run, now)

    def _found(
        self, run_id: str, tool_call_ids: Sequence[str]
    ) -> Generator[Step, Any, dict[str, CanonicalRecord]]:
        wanted = wanted_ids(tool_call_ids)
        if not wanted or not is_safe_id(run_id):
            return {}
        rows = yield Fetch(self.select_records(len(wanted)), (run_id, *wanted))
        found: dict[str, CanonicalRecord] = {}
        for row in rows:
            tcid = row[1]
            if tcid in found or tcid not in wanted:
                raise CorruptRecordError(run_id, {str(tcid): "IdentityMismatch"})
            found[tcid] = _record_from(row, run_id, tcid)
        return found

    def get_many(self, run_id: str, tool_call_ids: Sequence[str], include_raw: bool) -> Steps:
        """Records of one run in one statement; through the shared read helper (CIS-PROG-5)."""
        found = yield from self._found(run_id, tool_call_ids)
        now = yield NOW
        return read_records(run_id, tool_call_ids, found, now, include_raw=include_raw)

    def get_progress(
        self, run_id: str, tool_call_ids: Sequence[str]
    ) -> Generator[Step, Any, dict[str, ProgressView | None]]:
        """Progress views of one run's records (CIS-PERF-3)."""
        found = yield from self._found(run_id, tool_call_ids)
        now = yield NOW
        return read_views(run_id, tool_call_ids, found, now)

    def ttl_remaining(self, run_id: str, tool_call_id: str) -> Steps:
        """Kernel ``remaining_ms`` of the record at the store's clock (CIS-TTL-5)."""
        found = yield from self._found(run_id, [tool_call_id])
        now = yield NOW
        return remaining_ms(found.get(tool_call_id), now)

    def list_ids(self, run_id: str, name: str) -> Steps:
        """The run's ``calls`` or ``done`` list; () unless the run is live (the lists lapse with it)."""
        run = yield from self._run(run_id, lock=False)
        now = yield NOW
        if live(run, now) is None:
            return ()
        rows = yield Fetch(self.list_statements[name], (run_id,))
        return tuple(str(row[0]) for row in rows)

    def sweep_lapsed(self, limit: int) -> Steps:
        """Delete at most ``limit`` lapsed records and ``limit`` lapsed runs with their lists (CIS-TTL-4).

        The statements' ``expires_at_ms <= now`` mirrors kernel ``lapsed``. Returns how
        many rows of records and runs were deleted.
        """
        now = yield NOW
        deleted = yield Execute(self.lapsed_records, (now, now, limit))
        rows = yield Fetch(self.lapsed_runs, (now, limit))
        for (run_id,) in rows:
            if (yield Execute(self.delete_lapsed_run, (run_id, now))) == 1:
                deleted += 1
                for statement in self.delete_lists:
                    yield Execute(statement, (run_id,))
        return int(deleted)


# -- the row codec -------------------------------------------------------------------


def _run_row(run: RunState) -> tuple[Any, ...]:
    encoded = codec.unstructure(run)
    return tuple(encoded[name] for name in _RUN_COLUMNS)


def _record_row(record: CanonicalRecord) -> tuple[Any, ...]:
    encoded = codec.unstructure(record)
    return tuple(encoded[name] for name in _RECORD_COLUMNS)


def _run_from(row: Sequence[Any], run_id: str) -> RunState:
    try:
        run = codec.run_state_from_obj(dict(zip(_RUN_COLUMNS, row, strict=True)))
    except (ValueError, TypeError):
        raise CorruptRecordError(run_id, {"": "CorruptRun"}) from None
    if run.run_id != run_id:
        raise CorruptRecordError(run_id, {"": "IdentityMismatch"})
    if not is_well_formed_run(run):
        raise CorruptRecordError(run_id, {"": "CorruptRun"})
    return run


def _record_from(row: Sequence[Any], run_id: str, tool_call_id: str) -> CanonicalRecord:
    try:
        record = codec.record_from_obj(dict(zip(_RECORD_COLUMNS, row, strict=True)))
    except (ValueError, TypeError):
        raise CorruptRecordError(run_id, {tool_call_id: "CorruptRecord"}) from None
    if (record.run_id, record.tool_call_id) != (run_id, tool_call_id):
        raise CorruptRecordError(run_id, {tool_call_id: "IdentityMismatch"})
    if not is_well_formed(record):
        raise CorruptRecordError(run_id, {tool_call_id: "CorruptRecord"})
    return record
