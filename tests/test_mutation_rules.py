"""The rule scripts/mutation.py judges surviving mutants equivalent by, held to its cases.

A rule that judged too much would inflate every mutation score in tests/README.md, so each
kind of literal it accepts, and the near misses it must not, are pinned here.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest


def _script() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "scripts" / "mutation.py"
    spec = importlib.util.spec_from_file_location("cis_mutation_script", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


MUTATION = _script()


@pytest.mark.parametrize(
    ("before", "after", "kind"),
    [
        ('    queue("EVALSHA", sha, *command)', '    queue("evalsha", sha, *command)', "Redis command"),
        (
            '    conn.send_command("INFO", "server")',
            '    conn.send_command("INFO", "SERVER")',
            "Redis command",
        ),
        ('    body = text.decode("utf-8", "replace")', '    body = text.decode("UTF-8", "replace")', "codec"),
        (
            '    conn.execute("PRAGMA journal_mode=WAL")',
            '    conn.execute("pragma journal_mode=wal")',
            "SQL text",
        ),
    ],
)
def test_case_changes_of_case_blind_literals_are_equivalent(before: str, after: str, kind: str) -> None:
    """A Redis command, option or INFO section, a codec name, or SQL without quoted parts."""
    reason = MUTATION._case_blind(before, after)
    assert reason is not None
    assert kind in reason


@pytest.mark.parametrize(
    ("before", "after"),
    [
        # a cause label or a message: the case is what an operator or a test reads
        ('    raise CorruptReplyError("UnexpectedReply")', '    raise CorruptReplyError("UNEXPECTEDREPLY")'),
        ('    logger.warning("redis store: %s", code)', '    logger.warning("REDIS STORE: %S", code)'),
        # SQL with a quoted value: 'READY' and 'ready' are different data
        (
            "    cur.execute(\"UPDATE t SET status = 'READY'\")",
            "    cur.execute(\"update t set status = 'ready'\")",
        ),
        # not only a case change
        ('    queue("EVALSHA", sha)', '    queue("XXEVALSHAXX", sha)'),
        ('    queue("EVALSHA", sha)', "    queue(None, sha)"),
        # a dictionary key is not case-blind, even if it spells a Redis word
        ('    kwargs.get("protocol")', '    kwargs.get("PROTOCOL")'),
        ('    options.get("count")', '    options.get("COUNT")'),
        ('    fields["server"]', '    fields["SERVER"]'),
        # one blind literal and one that is not, changed together
        ('    f("GET", "Label")', '    f("get", "label")'),
        ("    same", "    same"),
    ],
)
def test_other_changes_are_not_judged(before: str, after: str) -> None:
    """Anything else stays a survivor to kill or judge by hand."""
    assert MUTATION._case_blind(before, after) is None
