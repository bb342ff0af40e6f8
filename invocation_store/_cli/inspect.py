"""`invocation-store inspect --redis-url URL --run RUN`: list a run's records in Redis, read-only.

The URL may instead come from the ``INVOCATION_STORE_REDIS_URL`` environment variable
(``--redis-url`` wins), which keeps a password out of ``ps`` and the shell history.

Reads the run's state, its admission-ordered call list, its records (in one batched
read, without raw responses unless ``--raw-sizes``) and each record's remaining TTL
(``PTTL``). Nothing is written: no command of the EXPIRE family (``EXPIRE``,
``PEXPIRE``, ``PERSIST``, ``GETEX``...) and no write is sent, so inspecting never
extends or changes a TTL (CIS-TTL-2, CIS-TTL-5). Raw responses and request texts are
never printed, only their sizes (with ``--raw-sizes``, from ``STRLEN``: the payload is
never read). Only commands of Redis' ``@read`` ACL category are sent, no script and
no ``INFO``, so a user granted ``+@read`` alone can inspect (CIS-DUR-9); the store's
first read also sends ``HELLO``, which needs no rights, to refuse a server older than
6.2 by name (CIS-STORE-7).

Corrupt records (a key whose TTL was removed from outside, a foreign type or value)
are listed by tool_call_id and cause, never their content, and the rest of the run is
listed as usual (CIS-DUR-7).

Exit status: 0 when the run or any of its records was found (corrupt ones included),
1 when neither was (or the store failed), 2 for a bad option.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..adapters import DEFAULT_PREFIX, CorruptRecordError, StoreUnavailableError
from ..kernel import is_safe_id
from ._common import REDIS_URL_ENV, fail, record_row, redis_url_from, table, ttl_text, unavailable

__all__ = ["inspect_run", "register", "run"]

_PROG = "invocation-store inspect"


def register(subparsers: Any) -> None:
    """Add the ``inspect`` subcommand."""
    parser = subparsers.add_parser(
        "inspect",
        help="list a run's records and their remaining TTLs from Redis, read-only",
        description=(
            "List a run's canonical records in Redis (admission order): tool_call_id, tool, status, "
            "evidence, request/result sizes in UTF-8 bytes, remaining TTL (PTTL) and error code, plus the "
            "run's state. Read-only: never sends a write or an EXPIRE-family command, so no TTL changes. "
            "Raw responses and requests are never printed. Exit 0 if the run or a record was found, "
            "1 if not (or the store failed), 2 for a bad option."
        ),
    )
    parser.add_argument(
        "--redis-url",
        metavar="URL",
        help=(
            f"Redis URL, e.g. redis://host:6379/0; default: the {REDIS_URL_ENV} environment variable "
            "(prefer it for a URL with a password: it stays out of ps and the shell history); one of "
            "the two is required"
        ),
    )
    parser.add_argument("--run", metavar="RUN", required=True, help="the run id to list")
    parser.add_argument(
        "--prefix",
        metavar="P",
        default=DEFAULT_PREFIX,
        help=f"key prefix the run was written with (default: {DEFAULT_PREFIX})",
    )
    parser.add_argument(
        "--raw-sizes",
        action="store_true",
        help="also read the raw responses to report their sizes (they are never printed)",
    )
    parser.add_argument("--json", action="store_true", help="print the listing as one JSON object")
    parser.set_defaults(func=run)


def inspect_run(store: Any, run_id: str, *, raw_sizes: bool = False) -> dict[str, Any]:
    """The JSON-ready listing of ``run_id`` in ``store`` (read-only, CIS-TTL-5).

    ``store`` is an :class:`~invocation_store.adapters.InvocationStore`. Each record
    row carries ``ttl_remaining_ms`` from :meth:`ttl_remaining_ms` (Redis ``PTTL``);
    ``raw_bytes`` is None unless ``raw_sizes``. A corrupt record (no TTL, a foreign
    type or value: :class:`~invocation_store.adapters.CorruptRecordError`) is listed
    under ``corrupt`` by tool_call_id and cause code, never its content, and the rest
    of the run is listed as usual (CIS-DUR-7). Raises
    :class:`~invocation_store.adapters.StoreUnavailableError` if the store fails.
    """
    state = store.get_run(run_id)
    ids = store.calls(run_id)
    # A store that can size raw responses without reading them (RedisStore.raw_sizes,
    # read-only commands) is asked for sizes only: no payload travels.
    sizer = getattr(store, "raw_sizes", None) if raw_sizes else None
    corrupt: dict[str, str] = {}
    try:
        records = store.get_many(run_id, ids, include_raw=raw_sizes and sizer is None) if ids else {}
    except CorruptRecordError as exc:  # report them, carry on with the rest
        corrupt.update(exc.corrupt)
        records = exc.readable
    sizes = sizer(run_id, ids) if sizer is not None and ids else {}
    rows = []
    for tool_call_id in ids:
        record = records.get(tool_call_id)
        if record is None:
            continue
        try:
            ttl = store.ttl_remaining_ms(run_id, tool_call_id)
        except CorruptRecordError as exc:
            corrupt.update(exc.corrupt)
            continue
        row = record_row(record, ttl)
        if not raw_sizes:
            row["raw_bytes"] = None
        elif sizer is not None:
            row["raw_bytes"] = sizes.get(tool_call_id)
        rows.append(row)
    run: dict[str, Any] | None = None
    if state is not None:
        run = {
            "status": state.status.value,
            "opened_at_ms": state.opened_at_ms,
            "deadline_ms": state.deadline_ms,
            "expires_at_ms": state.expires_at_ms,
            "ttl_ms": state.ttl_ms,
            "tool_call_budget": state.tool_call_budget,
            "tool_calls_used": state.tool_calls_used,
            "byte_budget": state.byte_budget,
            "bytes_used": state.bytes_used,
        }
    listed = {row["tool_call_id"] for row in rows} | corrupt.keys()
    return {
        "run_id": run_id,
        "run": run,
        "calls": len(ids),
        "records": rows,
        "corrupt": [{"tool_call_id": tcid, "code": code} for tcid, code in sorted(corrupt.items())],
        "expired_or_missing": len([tcid for tcid in ids if tcid not in listed]),
    }


def render_text(listing: dict[str, Any], *, raw_sizes: bool) -> str:
    """The human-readable listing: run line, then the records table."""
    run = listing["run"]
    if run is None:
        head = f"run {listing['run_id']}: run state absent (expired or unknown)"
    else:
        head = (
            f"run {listing['run_id']}: {run['status']}, {run['tool_calls_used']}/{run['tool_call_budget']} "
            f"calls, {run['bytes_used']}/{run['byte_budget']} bytes"
        )
    lines = [
        head,
        f"{len(listing['records'])} live records of {listing['calls']} admitted calls "
        f"({listing['expired_or_missing']} expired or missing); TTLs read with PTTL, never changed",
        "",
    ]
    headers = ["seq", "tool_call_id", "tool", "status", "evidence", "request"]
    numeric = {0, 5, 6, 7}
    if raw_sizes:
        headers.append("raw")
        numeric = {0, 5, 6, 7, 8}
    headers += ["result", "ttl left", "error"]
    rows = []
    for row in listing["records"]:
        cells = [
            row["sequence"],
            row["tool_call_id"],
            row["tool"],
            row["status"],
            row["evidence_status"],
            row["request_bytes"],
        ]
        if raw_sizes:
            cells.append(row["raw_bytes"])
        cells += [row["agent_result_bytes"], ttl_text(row["ttl_remaining_ms"]), row["error_code"]]
        rows.append(cells)
    lines.append(table(headers, rows, numeric=numeric))
    for entry in listing["corrupt"]:
        lines.append(
            f"corrupt record {entry['tool_call_id']} ({entry['code']}): not served, never completed; "
            "see docs/durability.md, 'A corrupt record is isolated'"
        )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """List the run; returns the exit status (0 found, 1 not found or store failure, 2 bad option)."""
    url = redis_url_from(args)
    if url is None:
        return fail(_PROG, f"needs a Redis URL: pass --redis-url or set {REDIS_URL_ENV}", 2)
    if not is_safe_id(args.run):
        return fail(_PROG, "the run id is not a safe id (1-128 of A-Z a-z 0-9 _ - . :)", 2)
    from ..adapters.redis import RedisStore  # noqa: PLC0415 - redis only when asked for

    try:
        store = RedisStore.from_url(url, prefix=args.prefix)
    except StoreUnavailableError as exc:
        return fail(_PROG, unavailable(exc), 1)
    except Exception as exc:  # noqa: BLE001 - a bad URL must not print a traceback or the URL
        return fail(_PROG, f"cannot use the Redis URL or prefix ({type(exc).__name__})", 2)
    try:
        listing = inspect_run(store, args.run, raw_sizes=args.raw_sizes)
    except StoreUnavailableError as exc:
        return fail(_PROG, unavailable(exc), 1)
    finally:
        store.close()
    if listing["run"] is None and not listing["records"] and not listing["corrupt"]:
        # Nothing found: the error alone, no empty listing on stdout.
        return fail(_PROG, f"no run {args.run} under this prefix (unknown or expired)", 1)
    if args.json:
        print(json.dumps(listing, indent=2, ensure_ascii=False))
    else:
        print(render_text(listing, raw_sizes=args.raw_sizes))
    return 0
