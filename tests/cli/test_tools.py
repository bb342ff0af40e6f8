"""The example read-only tools and their projectors (invocation_store.tools)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from invocation_store.adapters import MemoryStore
from invocation_store.boundary import ToolBoundary
from invocation_store.kernel import (
    ErrorCode,
    EvidenceStatus,
    InvocationStatus,
    Limits,
    RunContext,
    ToolCallEnvelope,
    utf8_len,
)
from invocation_store.testing import FakeClock
from invocation_store.tools import (
    GuardedTool,
    LogSearch,
    RunbookOutline,
    RunbookSearch,
    SqliteQuery,
    ToolArgumentError,
    connect_read_only,
    default_registry,
)

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "examples" / "data"
RUN = "run-tools"


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """A private copy of examples/data (so a failed write test could not damage the original)."""
    target = tmp_path / "data"
    shutil.copytree(DATA, target)
    return target


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _boundary(data: Path, limits: Limits | None = None) -> tuple[ToolBoundary, RunContext, MemoryStore]:
    clock = FakeClock()
    store = MemoryStore(clock)
    boundary = ToolBoundary(store, default_registry(data), limits=limits or Limits())
    context = boundary.open_run(
        RUN, deadline_ms=clock.now + 60_000, ttl_ms=60_000, tool_call_budget=50, byte_budget=10_000_000
    )
    assert isinstance(context, RunContext)
    return boundary, context, store


def _call(tool_call_id: str, tool: str, arguments: dict[str, object]) -> ToolCallEnvelope:
    return ToolCallEnvelope(
        run_id=RUN, tool_call_id=tool_call_id, tool_name=tool, arguments=json.dumps(arguments)
    )


# -- SQLite ------------------------------------------------------------------------------------

WRITES = [
    "INSERT INTO services (name, team, tier) VALUES ('evil', 'x', 1)",
    "UPDATE incidents SET status = 'resolved'",
    "DELETE FROM deploys",
    "DROP TABLE services",
    "CREATE TABLE t (x)",
    # Written to slip past a keyword filter: the database still refuses it.
    "WITH x AS (SELECT 1) INSERT INTO services (name, team, tier) SELECT 'cte', 'x', 1 FROM x",
    "/* SELECT */ REPLACE INTO services (id, name, team, tier) VALUES (1, 'p', 'x', 1)",
]


@pytest.mark.parametrize("sql", WRITES)
def test_sqlite_tool_refuses_writes_at_the_database(data: Path, sql: str) -> None:
    """CIS-PRE-4: the SQL tool is read-only because SQLite refuses writes (mode=ro), not by matching text."""
    db = data / "incidents.db"
    before = _digest(db)
    tool = SqliteQuery(db, 2048)
    with pytest.raises(sqlite3.OperationalError, match=r"readonly|read-only|read only"):
        tool.execute({"sql": sql})
    assert _digest(db) == before


def test_mode_ro_alone_refuses_writes(data: Path) -> None:
    """CIS-PRE-4: with the query_only layer switched off, the mode=ro connection still cannot write."""
    db = data / "incidents.db"
    before = _digest(db)
    connection = connect_read_only(db)
    try:
        connection.execute("PRAGMA query_only = OFF")
        with pytest.raises(sqlite3.OperationalError, match="attempt to write a readonly database"):
            connection.execute("INSERT INTO services (name, team, tier) VALUES ('evil', 'x', 1)")
        with pytest.raises(sqlite3.OperationalError, match="too many attached databases"):
            connection.execute("ATTACH DATABASE ? AS side", (str(data / "side.db"),))
    finally:
        connection.close()
    assert _digest(db) == before
    assert not (data / "side.db").exists()


def test_sqlite_tool_reads_rows_and_scopes_empty_results(data: Path) -> None:
    """CIS-EVID-3: rows give EVIDENCE_FOUND; no rows give NO_EVIDENCE scoped to the database and statement."""
    tool = SqliteQuery(data / "incidents.db", 2048)
    found = {"sql": "SELECT id, status FROM incidents WHERE severity = ? ORDER BY id", "params": ["SEV1"]}
    raw = tool.execute(found)
    assert json.loads(raw) == {
        "columns": ["id", "status"],
        "rows": [["INC-2031", "mitigated"]],
        "row_count": 1,
        "more_rows": False,
    }
    projection = tool.project(raw, found)
    assert projection.evidence_status is EvidenceStatus.EVIDENCE_FOUND
    assert "id=INC-2031; status=mitigated" in projection.content
    empty = {"sql": "SELECT id FROM incidents WHERE severity = 'SEV9'"}
    negative = tool.project(tool.execute(empty), empty)
    assert negative.evidence_status is EvidenceStatus.NO_EVIDENCE
    assert negative.scope == "incidents.db (read-only): \"SELECT id FROM incidents WHERE severity = 'SEV9'\""


def test_sqlite_tool_row_limit_is_reported(data: Path) -> None:
    """CIS-SIZE-1: max_rows bounds what the query reads and the raw response says more rows exist."""
    tool = SqliteQuery(data / "incidents.db", 2048)
    arguments = {"sql": "SELECT id FROM incidents ORDER BY id", "max_rows": 2}
    raw = json.loads(tool.execute(arguments))
    assert raw["row_count"] == 2
    assert raw["more_rows"] is True
    assert tool.project(json.dumps(raw), arguments).content.startswith("at least 2 rows")


def test_sql_write_through_the_boundary_is_execution_failed(data: Path) -> None:
    """CIS-FAIL-2: a write statement fails inside SQLite, so the record is ERROR/EXECUTION_FAILED."""
    boundary, context, store = _boundary(data)
    result = boundary.invoke(context, _call("call_w1", "query_db", {"sql": "DELETE FROM incidents"}))
    assert not result.ok
    assert result.code is ErrorCode.EXECUTION_FAILED
    record = store.get(RUN, "call_w1")
    assert record is not None
    assert record.status is InvocationStatus.ERROR
    assert record.raw_response is None
    count = sqlite3.connect(data / "incidents.db").execute("SELECT count(*) FROM incidents").fetchone()
    assert count == (5,)


def test_committed_database_matches_its_build_script(tmp_path: Path) -> None:
    """CIS-BND-5: examples/data/incidents.db is what examples/data/build_db.py builds."""
    spec = importlib.util.spec_from_file_location("build_db", DATA / "build_db.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rebuilt = tmp_path / "rebuilt.db"
    module.build(rebuilt)

    def dump(path: Path) -> list[str]:
        connection = sqlite3.connect(path)
        try:
            return list(connection.iterdump())
        finally:
            connection.close()

    assert dump(rebuilt) == dump(DATA / "incidents.db")


# -- logs --------------------------------------------------------------------------------------

# payments-api.log line 66 is the first connection-acquire timeout.
FIRST_TIMEOUT = "2026-11-01T03:10:10.998Z"


def _log_matches(data: Path, arguments: dict[str, object]) -> list[dict[str, object]]:
    raw = json.loads(LogSearch(data / "logs", 2048).execute(arguments))
    matches: list[dict[str, object]] = raw["matches"]
    return matches


def test_log_search_time_window_is_start_inclusive_end_exclusive(data: Path) -> None:
    """CIS-EVID-3: the window filters by the line's timestamp, start inclusive, end exclusive."""
    base = {"pattern": "acquire timeout", "files": "payments-api.log"}
    all_lines = _log_matches(data, base)
    assert all_lines[0]["ts"] == FIRST_TIMEOUT
    starting = _log_matches(data, {**base, "start": FIRST_TIMEOUT})
    assert [m["ts"] for m in starting] == [m["ts"] for m in all_lines]
    ending = _log_matches(data, {**base, "end": FIRST_TIMEOUT})
    assert ending == []
    just_after = _log_matches(data, {**base, "start": "2026-11-01T03:10:10.999Z"})
    assert len(just_after) == len(all_lines) - 1
    # Offsets other than Z are converted: 04:10:10.998+01:00 is the same instant.
    shifted = _log_matches(data, {**base, "end": "2026-11-01T04:10:10.999+01:00"})
    assert [m["ts"] for m in shifted] == [FIRST_TIMEOUT]


def test_log_search_level_is_a_minimum(data: Path) -> None:
    """CIS-EVID-3: level keeps lines at or above it; WARNING is read as WARN."""
    levels = {m["level"] for m in _log_matches(data, {"pattern": "", "level": "warning"})}
    assert levels == {"WARN", "ERROR", "FATAL"}
    fatal = _log_matches(data, {"pattern": "", "level": "FATAL"})
    assert [m["file"] for m in fatal] == ["payments-api.log"]


def test_log_search_pattern_substring_and_regex(data: Path) -> None:
    """CIS-EVID-2: substrings match case-insensitively; regex only when asked, so '.' is literal otherwise."""
    assert len(_log_matches(data, {"pattern": "CIRCUIT BREAKER"})) == 2
    assert _log_matches(data, {"pattern": "breaker.*CLOSED"}) == []
    assert len(_log_matches(data, {"pattern": "breaker.*CLOSED", "regex": True})) == 1


@pytest.mark.parametrize(
    "arguments",
    [
        {},
        {"pattern": 3},
        {"pattern": "x", "levle": "ERROR"},
        {"pattern": "x", "level": "LOUD"},
        {"pattern": "x", "start": "2026-11-01T03:00:00"},
        {"pattern": "x", "start": "yesterday"},
        {"pattern": "(", "regex": True},
        {"pattern": "x", "regex": "true"},
        {"pattern": "x", "files": "../secrets/*.log"},
        {"pattern": "x", "files": "/etc/passwd"},
    ],
)
def test_log_search_refuses_bad_arguments(data: Path, arguments: dict[str, object]) -> None:
    """CIS-FAIL-2: arguments outside the schema raise (the boundary makes it EXECUTION_FAILED)."""
    with pytest.raises(ToolArgumentError):
        LogSearch(data / "logs", 2048).execute(arguments)


def test_log_search_no_evidence_scope_says_what_was_searched(data: Path) -> None:
    """CIS-EVID-3: NO_EVIDENCE carries a scope naming the files, level, window and pattern searched."""
    tool = LogSearch(data / "logs", 2048)
    arguments = {
        "pattern": "timeout",
        "level": "ERROR",
        "start": "2026-11-01T00:00Z",
        "end": "2026-11-01T03:00Z",
    }
    projection = tool.project(tool.execute(arguments), arguments)
    assert projection.evidence_status is EvidenceStatus.NO_EVIDENCE
    assert projection.scope == (
        "logs/*.log (3 files, 238 lines); level>=ERROR; "
        "time 2026-11-01T00:00:00Z..2026-11-01T03:00:00Z (end exclusive); "
        'substring "timeout" (case-insensitive)'
    )


@pytest.mark.parametrize("budget", [300, 512, 1024, 2048, 4096])
def test_log_summary_stays_within_its_byte_budget(data: Path, budget: int) -> None:
    """CIS-SIZE-4: the projector's content + scope never exceed its budget; the count is exact."""
    tool = LogSearch(data / "logs", budget)
    arguments = {"pattern": "", "level": "INFO"}
    raw = tool.execute(arguments)
    projection = tool.project(raw, arguments)
    total = (utf8_len(projection.content) or 0) + (utf8_len(projection.scope) or 0)
    assert total <= budget
    count = len(json.loads(raw)["matches"])
    assert projection.content.startswith(f"{count} matching log lines")
    shown = len(projection.content.splitlines()) - 2  # head line and "(+N more not shown)"
    assert f"(+{count - shown} more not shown)" in projection.content


# -- runbooks ----------------------------------------------------------------------------------


def test_runbook_search_all_and_any(data: Path) -> None:
    """CIS-EVID-2: 'all' needs every keyword in a runbook, 'any' one of them; best score first."""
    tool = RunbookSearch(data / "runbooks", 2048)
    all_of = json.loads(tool.execute({"query": "circuit breaker payments"}))
    assert [hit["file"] for hit in all_of["hits"]] == ["payments-api-timeouts.md", "checkout-5xx.md"]
    any_of = json.loads(tool.execute({"query": "evictions cancel", "match": "any"}))
    assert sorted(hit["file"] for hit in any_of["hits"]) == [
        "db-connection-pool.md",
        "legacy-cache.md",
        "payments-api-timeouts.md",
    ]
    none = json.loads(tool.execute({"query": "evictions cancel"}))
    assert none["hits"] == []
    # Snippets come from the body, never from the front matter block.
    first = all_of["hits"][0]["lines"][0]
    assert first["line"] > 6


def test_runbook_search_no_evidence_scope(data: Path) -> None:
    """CIS-EVID-3: a runbook search that finds nothing is NO_EVIDENCE scoped to folder, files and keywords."""
    tool = RunbookSearch(data / "runbooks", 2048)
    arguments = {"query": "disk full"}
    projection = tool.project(tool.execute(arguments), arguments)
    assert projection.evidence_status is EvidenceStatus.NO_EVIDENCE
    assert projection.content == "No runbook matched."
    assert (
        projection.scope
        == "runbooks/*.md (4 files); all of keywords 'disk', 'full' (case-insensitive substring)"
    )


def test_runbook_outline_needs_front_matter(data: Path) -> None:
    """CIS-EVID-5: a runbook without front matter makes the projector raise; with it, an outline."""
    tool = RunbookOutline(data / "runbooks", 2048)
    good = {"name": "checkout-5xx"}
    projection = tool.project(tool.execute(good), good)
    assert projection.content.splitlines() == [
        "checkout-web 5xx responses (service checkout-web, owner storefront, reviewed 2026-10-11); sections:",
        "- Symptoms",
        "- Diagnosis",
        "- Mitigation",
    ]
    legacy = {"name": "legacy-cache.md"}
    with pytest.raises(ValueError, match="front matter"):
        tool.project(tool.execute(legacy), legacy)
    for name in ("../logs/payments-api", "a/b", ""):
        with pytest.raises(ToolArgumentError):
            tool.execute({"name": name})


def test_projector_failure_keeps_raw_for_the_harness_only(data: Path) -> None:
    """CIS-EVID-5, CIS-FAIL-6: PROJECTION_FAILED leaves the raw text in the record, not in the result."""
    boundary, context, store = _boundary(data)
    result = boundary.invoke(context, _call("toolu_x1", "runbook_outline", {"name": "legacy-cache"}))
    assert result.code is ErrorCode.PROJECTION_FAILED
    record = store.get(RUN, "toolu_x1")
    assert record is not None
    assert record.raw_response == (data / "runbooks" / "legacy-cache.md").read_text(encoding="utf-8")
    assert "session-cache" not in json.dumps(result.as_dict())


# -- refused tools -----------------------------------------------------------------------------


def test_write_and_unauthorized_tools_are_refused_before_execution(data: Path) -> None:
    """CIS-PRE-4, CIS-PRE-6, CIS-PRE-5: restart_service is NOT_READ_ONLY, read_vault_secret UNAUTHORIZED."""
    _, context, store = _boundary(data)
    tools = default_registry(data)
    restart = tools.get("restart_service")
    secret = tools.get("read_vault_secret")
    assert restart is not None
    assert restart.read_only is False
    assert restart.authorized is True
    assert secret is not None
    assert secret.authorized is False
    boundary = ToolBoundary(store, tools)
    first = boundary.invoke(context, _call("call_r1", "restart_service", {"service": "payments-api"}))
    second = boundary.invoke(context, _call("call_s1", "read_vault_secret", {"path": "x"}))
    assert first.code is ErrorCode.NOT_READ_ONLY
    assert second.code is ErrorCode.UNAUTHORIZED
    assert store.calls(RUN) == ()
    for spec in (restart, secret):
        owner = getattr(spec.executor, "__self__", None)
        assert isinstance(owner, GuardedTool)
        assert owner.executed == 0


def test_default_registry_names_and_summary_budget(data: Path) -> None:
    """CIS-BND-3: the example registry declares six tools, four of them read-only and authorized."""
    registry = default_registry(data, summary_bytes=512)
    assert registry.names() == (
        "search_logs",
        "query_db",
        "search_runbooks",
        "runbook_outline",
        "restart_service",
        "read_vault_secret",
    )
    with pytest.raises(ValueError):
        default_registry(data, summary_bytes=0)
