"""Generate the synchronous twins from their asyncio sources (httpcore's unasync approach).

Usage::

    .venv/bin/python scripts/unasync.py           # (re)write every generated file
    .venv/bin/python scripts/unasync.py --check   # exit 1 if a generated file is stale

Async code is written once, in ``_async/`` folders; the sync code in the sibling
``_sync/`` folders is produced from it by the line substitutions in :data:`SUBS`
(``async def`` -> ``def``, ``await x`` -> ``x``, ``AsyncFoo`` -> ``Foo``, the
asyncio client -> the blocking one, ...). Only what truly differs between the two
flavours (running a tool with a timeout on a task vs on a worker thread) is written
per flavour, outside these folders. ``tests/test_unasync.py`` fails when a generated
file differs from what this script produces.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: (async source, generated sync file), relative to the repository root.
PAIRS: tuple[tuple[str, str], ...] = (
    ("invocation_store/adapters/_async/protocol.py", "invocation_store/adapters/_sync/protocol.py"),
    ("invocation_store/boundary/_async/boundary.py", "invocation_store/boundary/_sync/boundary.py"),
    ("invocation_store/boundary/_async/pipeline.py", "invocation_store/boundary/_sync/pipeline.py"),
    ("invocation_store/adapters/_async/redis.py", "invocation_store/adapters/_sync/redis.py"),
    ("invocation_store/adapters/_async/forwarding.py", "invocation_store/adapters/_sync/forwarding.py"),
    ("invocation_store/adapters/_async/progress.py", "invocation_store/adapters/_sync/progress.py"),
    ("invocation_store/adapters/_async/postgres.py", "invocation_store/adapters/_sync/postgres.py"),
)

#: Ordered (pattern, replacement) substitutions applied to every line.
SUBS: tuple[tuple[str, str], ...] = (
    (r"\basync def\b", "def"),
    (r"\basync with\b", "with"),
    (r"\basync for\b", "for"),
    (r"\bawait ", ""),
    (r"\b__aenter__\b", "__enter__"),
    (r"\b__aexit__\b", "__exit__"),
    (r"\b__aiter__\b", "__iter__"),
    (r"\b__anext__\b", "__next__"),
    (r"\bStopAsyncIteration\b", "StopIteration"),
    (r"\basyncio\.sleep\(", "time.sleep("),
    # -- Redis store (adapters/_async/redis.py): redis-py's asyncio clients close with
    # aclose(); the per-flavour helpers (AsyncRedisFlavour, AsyncSend, AsyncCommand)
    # and AsyncScript go by the Async prefix rule below.
    # -- progress reads (adapters/_async/progress.py): a reader returns the views themselves.
    (r"\bAwaitable\[(\w+)\]", r"\1"),
    (r"\bfrom collections\.abc import Awaitable, ", "from collections.abc import "),
    (r"\baclose\(\)", "close()"),
    (r"\bredis\.asyncio\.cluster\b", "redis.cluster"),
    (r"\bredis\.asyncio\b", "redis"),
    (r"\bAsync([A-Z]\w*)", r"\1"),
    (r"\basyncio twin of\b", "synchronous twin of"),
    (r"\b_async\b", "_sync"),
    # -- the boundary (invocation_store/boundary/_async/: boundary.py, pipeline.py) ---
    # A per-flavour helper's async spelling -> its sync one: ``async_<name>`` ->
    # ``<name>`` (boundary/_runner.py's async_run_tool, async_check_tool, async_pause;
    # adapters/_progress.py's async_progress_reader), and _telemetry's decorator.
    (r"\basync_(?=[a-z])", ""),
    (r"\bobserved_ainvoke\b", "observed_invoke"),
    # -- end of the boundary's substitutions ------------------------------------------
)
_COMPILED = tuple((re.compile(pattern), replacement) for pattern, replacement in SUBS)


def generated_text(source: str, source_name: str) -> str:
    """The sync module generated from the async module text ``source`` (named ``source_name``)."""
    lines = []
    for original in source.splitlines(keepends=True):
        line = original
        for pattern, replacement in _COMPILED:
            line = pattern.sub(replacement, line)
        lines.append(line)
    banner = f"# Generated from {source_name} by scripts/unasync.py: do not edit by hand.\n"
    return banner + "".join(lines)


def expected_files(root: Path = ROOT) -> dict[Path, str]:
    """Every generated file's path and the exact text the script would write."""
    return {
        root / target: generated_text((root / source).read_text(encoding="utf-8"), source)
        for source, target in PAIRS
    }


def main(argv: list[str] | None = None, root: Path = ROOT) -> int:
    """Write (or with ``--check`` compare) the generated files; returns the exit code (0, 1 if stale)."""
    parser = argparse.ArgumentParser(description="Generate the sync twins from their asyncio sources.")
    parser.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 if stale")
    args = parser.parse_args(argv)
    stale = []
    for path, text in expected_files(root).items():
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        stale.append(str(path.relative_to(root)))
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    if args.check and stale:
        print("stale generated files (run scripts/unasync.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    for name in stale:
        print(f"wrote {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
