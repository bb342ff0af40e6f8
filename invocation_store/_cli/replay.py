"""`invocation-store replay TRANSCRIPT`: run a provider transcript's tool calls through the boundary.

The transcript is a JSON file in one provider's own shape (detected, or chosen with
``--format``):

- ``openai-chat``: ``{"messages": [...]}`` whose assistant messages carry
  ``tool_calls``, or a completion ``{"choices": [{"message": ...}]}``;
- ``openai-responses``: ``{"input": [...]}`` and/or ``{"output": [...]}`` holding
  ``function_call`` items;
- ``anthropic``: ``{"messages": [...]}`` whose assistant ``content`` holds
  ``tool_use`` blocks, or one Message ``{"type": "message", "content": [...]}``;
- ``gemini``: ``{"contents": [...]}`` whose model turns hold ``functionCall``
  parts, or a response ``{"candidates": [{"content": ...}]}``.

Two conventions of this project ride along (providers ignore unknown keys):

- a top-level ``"x_invocation_store"`` object: ``run_id`` (the run's id),
  ``description``, ``data_dir`` (relative to the transcript file) and ``options``
  (defaults for this transcript, named like the long options with ``_``:
  ``raw_limit``, ``request_limit``, ``result_limit``, ``record_limit``,
  ``ttl_ms``, ``deadline_ms``, ``tool_budget``, ``byte_budget``). Command-line
  options win over the transcript's, which win over the built-in defaults;
- an ``"x_run_id"`` key on one call item (on a Gemini part or inside its
  ``functionCall``): the run id that call's envelope carries. Every other call
  carries the run's own id. A different one simulates an envelope from another run
  (RUN_MISMATCH, CIS-PRE-3).

Every call runs through :class:`~invocation_store.boundary.ToolBoundary` with the
example tools of :mod:`invocation_store.tools`, in transcript order (the calls of
one message one after the other, so sequences are deterministic). The output lists
the run's canonical records (sizes only, never a raw response or a request text),
the calls rejected before any record was written, and the progress facts.

The store is in memory unless ``--store`` names another (``sqlite:PATH``: a durable
SQLite file; ``postgres``: the database named by ``INVOCATION_STORE_POSTGRES_DSN``) or
a Redis URL is given, by ``--redis-url`` or else by the ``INVOCATION_STORE_REDIS_URL``
environment variable (environment variables keep a password out of ``ps`` and the
shell history); ``--prefix`` without a Redis URL is an error.

Exit status: 0 when the transcript was replayed (whatever the calls' outcomes), 1
when the store failed or the run could not be opened, 2 for a malformed transcript
or a bad option (one line on stderr, never a traceback).

Size: a transcript file over ``--max-transcript-bytes`` (default 32 MiB) is refused
before it is read or parsed; object arguments inside are measured against the
request limit while serialized (CIS-SIZE-2).

Size of this module: one command's options, its run and its two renderings (text and ``--json``) of
the same report; the renderings share the report's helpers.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from attrs import evolve, frozen

from .. import providers
from ..adapters import DEFAULT_PREFIX, InvocationStore, MemoryStore, StoreUnavailableError
from ..boundary import ToolBoundary
from ..kernel import (
    PREFLIGHT_ORDER,
    ErrorCode,
    Limits,
    ProgressReport,
    RunContext,
    ToolCallEnvelope,
    is_safe_id,
    load_document,
)
from ..tools import DEFAULT_SUMMARY_BYTES, default_registry
from ._common import (
    REDIS_URL_ENV,
    fail,
    positive_int,
    record_row,
    redis_url_from,
    table,
    ttl_text,
    unavailable,
)

__all__ = [
    "FORMATS",
    "TranscriptError",
    "detect_format",
    "extract_calls",
    "load_transcript",
    "register",
    "replay",
    "run",
]

#: Supported transcript formats, as ``--format`` spells them.
FORMATS = ("openai-chat", "openai-responses", "anthropic", "gemini")

#: Built-in defaults of the run options (the limits default to :class:`Limits`').
DEFAULTS: dict[str, int] = {
    "ttl_ms": 3_600_000,
    "deadline_ms": 300_000,
    "tool_budget": 100,
    "byte_budget": 64 * 1024 * 1024,
    "request_limit": Limits().request_bytes,
    "raw_limit": Limits().raw_bytes,
    "result_limit": Limits().agent_result_bytes,
    "record_limit": Limits().record_bytes,
}

#: Largest transcript file read, in bytes (``--max-transcript-bytes``): checked before the
#: file is read or parsed, so a huge transcript costs a ``stat`` and one bounded read. The
#: API's limit (``TranscriptFormat.envelopes_from_transcript``) is the same.
DEFAULT_MAX_TRANSCRIPT_BYTES = providers.DEFAULT_MAX_TRANSCRIPT_BYTES

#: Default data folder when neither ``--data-dir`` nor the transcript names one.
DEFAULT_DATA_DIR = Path("examples") / "data"

_META = "x_invocation_store"
_RUN_NOTE = "x_run_id"
_META_KEYS = {"run_id", "description", "data_dir", "options"}
_PROG = "invocation-store replay"

_NO_RECORD = frozenset({*PREFLIGHT_ORDER, ErrorCode.STORE_UNAVAILABLE, None})


class TranscriptError(Exception):
    """The transcript cannot be replayed; the message is one safe line (exit 2)."""


@frozen(kw_only=True)
class Call:
    """One tool call found in a transcript: its 1-based position and its envelope."""

    index: int
    envelope: ToolCallEnvelope


@frozen(kw_only=True)
class Transcript:
    """A loaded transcript: its format, its calls and its ``x_invocation_store`` settings."""

    path: Path
    format: str
    run_id: str
    data_dir: Path | None
    options: Mapping[str, int]
    calls: tuple[Call, ...]


# -- loading ----------------------------------------------------------------------------------


def detect_format(document: Mapping[str, Any]) -> str | None:
    """The transcript's format name by its shape, or None (the rules of :data:`providers.FORMATS`)."""
    found = providers.detect_format(document)
    return None if found is None else found.name


def _note(item: object, fallback: str) -> object:
    """The item's ``x_run_id`` annotation (for Gemini also inside ``functionCall``), or ``fallback``."""
    if not isinstance(item, dict):
        return fallback
    if _RUN_NOTE in item:
        return item[_RUN_NOTE]
    call = item.get("functionCall")
    if isinstance(call, dict) and _RUN_NOTE in call:
        return call[_RUN_NOTE]
    return fallback


def extract_calls(
    document: Mapping[str, Any], fmt: str, run_id: str, *, request_bytes: int | None = None
) -> tuple[Call, ...]:
    """Every tool call of ``document`` as an envelope, in transcript order (CIS-PRE-7).

    Envelopes carry ``run_id`` unless the item has an ``x_run_id`` annotation. A
    malformed call item is kept (the boundary answers it with a code); a malformed
    structure raises :class:`TranscriptError`. Object arguments are measured against
    ``request_bytes`` (the run's request limit) while serialized (CIS-SIZE-2).
    """
    transcript_format = providers.transcript_format(fmt)
    calls: list[Call] = []
    try:
        found = list(transcript_format.call_items(document))
    except providers.TranscriptShapeError as exc:
        raise TranscriptError(str(exc)) from None
    for item in found:
        note = _note(item, run_id)
        try:
            envelope = transcript_format.envelope(item, run_id, request_bytes)
        except ValueError as exc:  # an unfinished streamed call: said in one safe line
            raise TranscriptError(f"call {len(calls) + 1}: {exc}") from None
        if note != run_id:
            envelope = evolve(envelope, run_id=note if isinstance(note, str) else None)
        calls.append(Call(index=len(calls) + 1, envelope=envelope))
    return tuple(calls)


def _meta(document: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = document.get(_META, {})
    if not isinstance(meta, dict):
        raise TranscriptError(f"'{_META}' must be an object")
    unknown = set(meta) - _META_KEYS
    if unknown:
        raise TranscriptError(f"'{_META}' has unknown keys: {', '.join(sorted(unknown))}")
    return meta


def _options(meta: Mapping[str, Any]) -> dict[str, int]:
    options = meta.get("options", {})
    if not isinstance(options, dict):
        raise TranscriptError(f"'{_META}.options' must be an object")
    checked: dict[str, int] = {}
    for key, value in options.items():
        if key not in DEFAULTS:
            raise TranscriptError(f"'{_META}.options' has an unknown key: {key}")
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise TranscriptError(f"'{_META}.options.{key}' must be a positive integer")
        checked[key] = value
    return checked


def _default_run_id(path: Path) -> str:
    stem = "".join(ch if ch.isascii() and (ch.isalnum() or ch in "_-.:") else "-" for ch in path.stem)
    return f"replay-{stem}"[:128]


def _read(path: Path, max_bytes: int) -> str:
    """The file's text, refused before it is read or parsed when over ``max_bytes``."""
    limit = f"the transcript limit of {max_bytes} bytes (--max-transcript-bytes)"
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise TranscriptError(f"{path}: {size} bytes, over {limit}")
        with path.open("rb") as handle:
            data = handle.read(max_bytes + 1)  # a file that grew, or a pipe: still bounded
        if len(data) > max_bytes:
            raise TranscriptError(f"{path}: over {limit}")
        return data.decode("utf-8")
    except FileNotFoundError:
        raise TranscriptError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise TranscriptError(f"{path}: is a directory, not a transcript file") from None
    except UnicodeDecodeError:
        raise TranscriptError(f"{path}: not UTF-8 text") from None
    except OSError as exc:
        raise TranscriptError(f"{path}: cannot be read ({type(exc).__name__})") from None


def load_transcript(
    path: Path,
    fmt: str = "auto",
    run_id: str | None = None,
    *,
    request_bytes: int | None = None,
    max_bytes: int = DEFAULT_MAX_TRANSCRIPT_BYTES,
) -> Transcript:
    """Read, detect and extract a transcript; :class:`TranscriptError` for anything malformed (CIS-ECO-2).

    ``fmt`` is ``"auto"`` or one of :data:`FORMATS`. The run id (which the envelopes
    carry, unless annotated otherwise) is ``run_id`` if given, else the transcript's
    ``x_invocation_store.run_id``, else ``replay-<file stem>``. A file over
    ``max_bytes`` (default :data:`DEFAULT_MAX_TRANSCRIPT_BYTES`) is refused before it is
    read. ``request_bytes``: the request limit object arguments are measured against
    (default: the transcript's ``request_limit`` option, else the kernel's).
    """
    text = _read(path, max_bytes)
    try:
        # The I-JSON document decoder: a duplicate member name, NaN or an unrepresentable
        # number inside a call's arguments makes that call INVALID_ARGUMENTS.
        document = load_document(text)
    except json.JSONDecodeError as exc:
        raise TranscriptError(
            f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
        ) from None
    except (ValueError, RecursionError):
        raise TranscriptError(f"{path}: not valid JSON (nested too deeply)") from None
    if not isinstance(document, dict):
        raise TranscriptError(f"{path}: a transcript is a JSON object, not a {type(document).__name__}")
    meta = _meta(document)
    if fmt == "auto":
        detected = detect_format(document)
        if detected is None:
            raise TranscriptError(
                f"{path}: cannot detect the transcript format (no tool calls in a known shape); "
                f"use --format {{{','.join(FORMATS)}}}"
            )
        fmt = detected
    meta_run_id = meta.get("run_id", _default_run_id(path))
    if not isinstance(meta_run_id, str):
        raise TranscriptError(f"'{_META}.run_id' must be a string")
    if run_id is None:
        run_id = meta_run_id
    data_dir = meta.get("data_dir")
    if data_dir is not None and not isinstance(data_dir, str):
        raise TranscriptError(f"'{_META}.data_dir' must be a string")
    options = _options(meta)
    if request_bytes is None:
        request_bytes = options.get("request_limit", DEFAULTS["request_limit"])
    try:
        calls = extract_calls(document, fmt, run_id, request_bytes=request_bytes)
    except RecursionError:
        raise TranscriptError(f"{path}: nested too deeply") from None
    return Transcript(
        path=path,
        format=fmt,
        run_id=run_id,
        data_dir=None if data_dir is None else (path.parent / data_dir),
        options=options,
        calls=calls,
    )


# -- replay -----------------------------------------------------------------------------------


@frozen(kw_only=True)
class Settings:
    """The resolved run options (ms, counts and UTF-8 bytes)."""

    run_id: str
    data_dir: Path
    ttl_ms: int
    deadline_ms: int
    tool_budget: int
    byte_budget: int
    limits: Limits


def _resolve(args: argparse.Namespace, transcript: Transcript) -> Settings:
    values = {key: transcript.options.get(key, default) for key, default in DEFAULTS.items()}
    for key in DEFAULTS:
        given = getattr(args, key, None)
        if given is not None:
            values[key] = given
    if args.data_dir is not None:
        data_dir = Path(args.data_dir)
    elif transcript.data_dir is not None:
        data_dir = transcript.data_dir
    else:
        data_dir = DEFAULT_DATA_DIR
    if not data_dir.is_dir():
        raise TranscriptError(f"data folder {data_dir} does not exist (use --data-dir)")
    run_id = transcript.run_id
    if not is_safe_id(run_id):
        raise TranscriptError("the run id is not a safe id (1-128 of A-Z a-z 0-9 _ - . :)")
    limits = Limits(
        request_bytes=values["request_limit"],
        raw_bytes=values["raw_limit"],
        agent_result_bytes=values["result_limit"],
        record_bytes=values["record_limit"],
    )
    return Settings(
        run_id=run_id,
        data_dir=data_dir,
        ttl_ms=values["ttl_ms"],
        deadline_ms=values["deadline_ms"],
        tool_budget=values["tool_budget"],
        byte_budget=values["byte_budget"],
        limits=limits,
    )


class ReplayError(Exception):
    """The replay could not run (store unavailable, run not opened): exit 1, one safe line."""


def _id_note(envelope: ToolCallEnvelope) -> str:
    value = envelope.tool_call_id
    if value is None or (isinstance(value, str) and value.strip() == ""):
        return "(missing)"
    return "(unsafe)"


def _tool_label(name: object) -> str | None:
    if not isinstance(name, str):
        return None
    if is_safe_id(name):
        return name
    return "(unprintable name)"


def _progress(report: ProgressReport) -> dict[str, Any]:
    return {
        "facts": [
            {
                "tool_call_id": fact.tool_call_id,
                "tool": fact.tool_name,
                "sequence": fact.sequence,
                "evidence_status": fact.evidence_status.value,
                "negative": fact.negative,
                "content": fact.content,
                "scope": fact.scope,
            }
            for fact in report.facts
        ],
        "excluded": {reason.value: count for reason, count in sorted(report.excluded.items())},
        "omitted": report.omitted,
    }


def replay(
    transcript: Transcript, settings: Settings, store: InvocationStore, *, store_kind: str
) -> dict[str, Any]:
    """Replay ``transcript`` into ``store``; returns the JSON-ready report (CIS-FAIL-5, CIS-ERR-1, CIS-PRE-1).

    Opens the run, invokes every call through a :class:`ToolBoundary` with the
    example tools, projects the run's progress, closes the run, then reads the run's
    records (sizes and remaining TTL only: no raw response or request text is put in
    the report, CIS-BND-4). Raises :class:`ReplayError` when the run cannot be opened
    and :class:`~invocation_store.adapters.StoreUnavailableError` when the store fails.
    """
    registry = default_registry(
        settings.data_dir, summary_bytes=min(DEFAULT_SUMMARY_BYTES, settings.limits.agent_result_bytes)
    )
    boundary = ToolBoundary(store, registry, limits=settings.limits)
    opened = boundary.open_run(
        settings.run_id,
        deadline_ms=boundary.now_ms() + settings.deadline_ms,
        ttl_ms=settings.ttl_ms,
        tool_call_budget=settings.tool_budget,
        byte_budget=settings.byte_budget,
    )
    if opened is ErrorCode.STORE_UNAVAILABLE:
        # The boundary keeps the failure's cause to its log. A write failed: the server
        # check names a refused server (an evicting policy, an old version, a missing
        # replica, a user who may not write), which a read never meets; else one read
        # names the failure's type.
        check_server = getattr(store, "check_server", None)
        if callable(check_server):
            check_server()
        store.get_run(settings.run_id)
        raise StoreUnavailableError()
    if isinstance(opened, ErrorCode):
        raise ReplayError(
            f"cannot open run {settings.run_id}: {opened.value} "
            "(a live run with this id already exists; choose another --run-id)"
        )
    context: RunContext = opened
    calls: list[dict[str, Any]] = []
    rejected: list[dict[str, Any]] = []
    for call in transcript.calls:
        result = boundary.invoke(context, call.envelope)
        code = None if result.code is None else result.code.value
        shown = result.tool_call_id  # echoed only when safe
        # Preflight codes leave no record; after STORE_UNAVAILABLE it is unknown,
        # so such a call is listed with the rejected ones (the records table reads the store).
        has_record = result.ok or result.code not in _NO_RECORD
        entry = {
            "index": call.index,
            "tool_call_id": shown,
            "tool": _tool_label(call.envelope.tool_name),
            "ok": result.ok,
            "evidence_status": None if result.evidence_status is None else result.evidence_status.value,
            "code": code,
            "record": has_record,
        }
        calls.append(entry)
        if not has_record:
            rejected.append(
                {
                    "index": call.index,
                    "tool_call_id": shown,
                    "id_note": None if shown is not None else _id_note(call.envelope),
                    "tool": entry["tool"],
                    "code": code,
                }
            )
    report = boundary.project_progress(context)
    closed = boundary.close_run(context)
    ids = store.calls(settings.run_id)
    records = store.get_many(settings.run_id, ids)
    rows = []
    for tool_call_id in ids:
        record = records.get(tool_call_id)
        if record is not None:
            rows.append(record_row(record, store.ttl_remaining_ms(settings.run_id, tool_call_id)))
    run_state = store.get_run(settings.run_id)
    return {
        "run": {
            "run_id": settings.run_id,
            "transcript": str(transcript.path),
            "format": transcript.format,
            "store": store_kind,
            "status": None if isinstance(closed, ErrorCode) else closed.status.value,
            "ttl_ms": settings.ttl_ms,
            "deadline_ms": settings.deadline_ms,
            "tool_call_budget": settings.tool_budget,
            "byte_budget": settings.byte_budget,
            "tool_calls_used": None if run_state is None else run_state.tool_calls_used,
            "bytes_used": None if run_state is None else run_state.bytes_used,
            "limits": {
                "request_bytes": settings.limits.request_bytes,
                "raw_bytes": settings.limits.raw_bytes,
                "agent_result_bytes": settings.limits.agent_result_bytes,
                "record_bytes": settings.limits.record_bytes,
            },
        },
        "calls": calls,
        "records": rows,
        "rejected": rejected,
        "progress": _progress(report),
    }


# -- output -----------------------------------------------------------------------------------


def _first_line(text: str) -> str:
    lines = text.splitlines() or [""]
    more = len(lines) - 1
    return lines[0] + (f"  (+{more} more line{'s' if more > 1 else ''})" if more else "")


def render_text(result: Mapping[str, Any]) -> str:
    """The human-readable report: header, records table, rejected calls, progress facts."""
    run = result["run"]
    records = result["records"]
    rejected = result["rejected"]
    ready = sum(1 for row in records if row["status"] == "READY")
    errors = sum(1 for row in records if row["status"] == "ERROR")
    out = [
        f"run {run['run_id']}  ({run['format']} transcript {run['transcript']}, {run['store']} store, "
        f"run {run['status'] or 'not closed'})",
        f"{len(result['calls'])} tool calls: {len(records)} records ({ready} READY, {errors} ERROR), "
        f"{len(rejected)} rejected before any record was written",
        "",
        "Canonical records (admission order; sizes in UTF-8 bytes, '-' = nothing stored; "
        "raw responses are never printed)",
        table(
            [
                "seq",
                "tool_call_id",
                "tool",
                "status",
                "evidence",
                "request",
                "raw",
                "result",
                "ttl left",
                "error",
            ],
            [
                [
                    row["sequence"],
                    row["tool_call_id"],
                    row["tool"],
                    row["status"],
                    row["evidence_status"],
                    row["request_bytes"],
                    row["raw_bytes"],
                    row["agent_result_bytes"],
                    ttl_text(row["ttl_remaining_ms"]),
                    row["error_code"],
                ]
                for row in records
            ],
            numeric={0, 5, 6, 7, 8},
        ),
    ]
    if rejected:
        out += [
            "",
            "Rejected calls (no record written, executor never ran)",
            table(
                ["call", "tool_call_id", "tool", "code"],
                [
                    [row["index"], row["tool_call_id"] or row["id_note"], row["tool"], row["code"]]
                    for row in rejected
                ],
                numeric={0},
            ),
        ]
    progress = result["progress"]
    excluded = ", ".join(f"{reason} {count}" for reason, count in progress["excluded"].items()) or "none"
    out += [
        "",
        f"Progress facts ({len(progress['facts'])} facts; excluded: {excluded}; "
        f"omitted: {progress['omitted']})",
    ]
    for number, fact in enumerate(progress["facts"], start=1):
        kind = "negative observation" if fact["negative"] else "evidence"
        out.append(f"{number:>3}. [{fact['sequence']}] {fact['tool_call_id']} {fact['tool']}: {kind}")
        out.append(f"     {_first_line(fact['content'])}")
        out.append(f"     scope: {fact['scope']}")
    usage = (
        f"{run['tool_calls_used']}/{run['tool_call_budget']} calls, "
        f"{run['bytes_used']}/{run['byte_budget']} bytes"
    )
    out += ["", f"run budget used: {usage}"]
    return "\n".join(out)


# -- argparse ---------------------------------------------------------------------------------


def register(subparsers: Any) -> None:
    """Add the ``replay`` subcommand and its options (all documented in ``--help``)."""
    parser = subparsers.add_parser(
        "replay",
        help="replay a provider transcript's tool calls through the ToolBoundary",
        description=(
            "Run every tool call of an agent transcript (OpenAI Chat Completions, OpenAI Responses, "
            "Anthropic Messages or Gemini JSON) through the ToolBoundary with the example read-only tools "
            "(search_logs, query_db, search_runbooks, runbook_outline; restart_service is declared "
            "writable and read_vault_secret unauthorized, so both are refused), then print the run's "
            "canonical records (sizes only, never raw responses), the calls rejected before any record, "
            "and the run's progress facts. Option defaults can also come from the transcript's "
            "'x_invocation_store.options' object; a command-line option wins. "
            "Exit 0 after a replay, 1 if the store fails or the run cannot be opened, "
            "2 for a malformed transcript or option."
        ),
    )
    parser.add_argument("transcript", metavar="TRANSCRIPT", type=Path, help="transcript JSON file")
    parser.add_argument(
        "--format",
        choices=("auto", *FORMATS),
        default="auto",
        help="transcript format; 'auto' (the default) detects it from the document's shape",
    )
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    parser.add_argument(
        "--max-transcript-bytes",
        metavar="N",
        type=positive_int,
        default=DEFAULT_MAX_TRANSCRIPT_BYTES,
        help=(
            "largest transcript file read, in bytes; a larger one is refused before it is read "
            f"(default: {DEFAULT_MAX_TRANSCRIPT_BYTES})"
        ),
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="also log the boundary's warnings (exception types and codes only) on stderr",
    )
    parser.add_argument(
        "--redis-url",
        metavar="URL",
        help=(
            "use the Redis store at URL (e.g. redis://127.0.0.1:6379/0) instead of the in-memory store; "
            f"default: the {REDIS_URL_ENV} environment variable, so Redis is used whenever it is set "
            "(prefer it for a URL with a password: it stays out of ps and the shell history)"
        ),
    )
    parser.add_argument(
        "--store",
        metavar="KIND",
        default=None,
        help=(
            "the store: 'memory' (the default), 'sqlite:PATH' (a durable SQLite file, created if missing) "
            f"or 'postgres' (the database whose libpq connection string is in {POSTGRES_DSN_ENV}); "
            "a Redis store is chosen with --redis-url"
        ),
    )
    parser.add_argument(
        "--prefix",
        metavar="P",
        default=None,
        help=(
            f"key prefix in Redis (default: {DEFAULT_PREFIX}); only with a Redis URL (--redis-url or "
            f"{REDIS_URL_ENV}), an error otherwise"
        ),
    )
    parser.add_argument(
        "--run-id",
        metavar="ID",
        help="the run's id (default: the transcript's x_invocation_store.run_id, else replay-<file stem>)",
    )
    parser.add_argument(
        "--data-dir",
        metavar="DIR",
        help=(
            "folder with logs/*.log, incidents.db and runbooks/*.md (default: the transcript's "
            f"x_invocation_store.data_dir, relative to the transcript, else {DEFAULT_DATA_DIR})"
        ),
    )
    number_help = {
        "ttl_ms": ("--ttl-ms", "TTL of every record in ms, set once at creation"),
        "deadline_ms": ("--deadline-ms", "run deadline, in ms after the run opens"),
        "tool_budget": ("--tool-budget", "most tool calls admitted in the run"),
        "byte_budget": ("--byte-budget", "run byte budget: request + stored bytes, UTF-8"),
        "request_limit": ("--request-limit", "largest arguments text, in UTF-8 bytes"),
        "raw_limit": ("--raw-limit", "largest raw tool response stored, in UTF-8 bytes"),
        "result_limit": ("--result-limit", "largest agent result (content + scope), in UTF-8 bytes"),
        "record_limit": ("--record-limit", "largest whole record, in UTF-8 bytes"),
    }
    for key, (flag, text) in number_help.items():
        parser.add_argument(
            flag,
            dest=key,
            metavar="N",
            type=positive_int,
            default=None,
            help=f"{text} (default: {DEFAULTS[key]}, or the transcript's '{key}' option)",
        )
    parser.set_defaults(func=run)


#: Environment variable holding the libpq connection string of ``--store postgres``
#: (an environment variable keeps a password out of ``ps`` and the shell history).
POSTGRES_DSN_ENV = "INVOCATION_STORE_POSTGRES_DSN"


class _StoreChoiceError(Exception):
    """``--store`` names no store this command can open (exit 2, the message says why)."""


def _open_store(args: argparse.Namespace, url: str | None) -> tuple[InvocationStore, str]:
    choice = args.store
    if choice is not None and url is not None:
        raise _StoreChoiceError("--store and a Redis URL exclude each other")
    if url is None and choice in (None, "memory"):
        return MemoryStore(), "memory"
    if url is None and choice.startswith("sqlite:") and choice != "sqlite:":
        from ..adapters.sqlite import SqliteStore  # noqa: PLC0415 - only when asked for

        return SqliteStore(choice.removeprefix("sqlite:")), "sqlite"
    if url is None and choice == "postgres":
        dsn = os.environ.get(POSTGRES_DSN_ENV)
        if not dsn:
            raise _StoreChoiceError(f"--store postgres needs {POSTGRES_DSN_ENV}")
        from ..adapters.postgres import PostgresStore  # noqa: PLC0415 - the postgres extra

        return PostgresStore.from_dsn(dsn), "postgres"
    if url is None:
        raise _StoreChoiceError("--store is memory, sqlite:PATH or postgres")
    from ..adapters.redis import RedisStore  # noqa: PLC0415 - redis only when asked for

    return RedisStore.from_url(url, prefix=args.prefix or DEFAULT_PREFIX), "redis"


def run(args: argparse.Namespace) -> int:
    """Replay ``args.transcript`` and print the report; returns the exit status (0, 1 or 2)."""
    if args.verbose:
        logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    else:
        # The report already shows every code; keep Python's last-resort handler quiet.
        package_logger = logging.getLogger("invocation_store")
        if not any(isinstance(handler, logging.NullHandler) for handler in package_logger.handlers):
            package_logger.addHandler(logging.NullHandler())
    # --store names the store; the Redis URL's environment variable applies only without it.
    url = args.redis_url if args.store is not None else redis_url_from(args)
    if args.prefix is not None and url is None:
        return fail(_PROG, f"--prefix needs a Redis store: pass --redis-url or set {REDIS_URL_ENV}", 2)
    try:
        transcript = load_transcript(
            args.transcript,
            args.format,
            args.run_id,
            request_bytes=args.request_limit,
            max_bytes=args.max_transcript_bytes,
        )
        settings = _resolve(args, transcript)
    except TranscriptError as exc:
        return fail(_PROG, str(exc), 2)
    try:
        store, kind = _open_store(args, url)
    except StoreUnavailableError as exc:
        return fail(_PROG, unavailable(exc), 1)
    except _StoreChoiceError as exc:
        return fail(_PROG, str(exc), 2)
    except ImportError:
        return fail(
            _PROG,
            "--store postgres needs the postgres extra (pip install 'canonical-invocation-store[postgres]')",
            2,
        )
    except Exception as exc:  # noqa: BLE001 - a bad URL must not print a traceback or the URL
        return fail(_PROG, f"cannot use the Redis URL ({type(exc).__name__})", 2)
    try:
        result = replay(transcript, settings, store, store_kind=kind)
    except ReplayError as exc:
        return fail(_PROG, str(exc), 1)
    except StoreUnavailableError as exc:
        message = unavailable(exc) if kind == "redis" else f"the {kind} store failed ({exc.cause})"
        return fail(_PROG, message, 1)
    finally:
        store.close()
    if args.json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
    else:
        print(render_text(result))
    return 0
