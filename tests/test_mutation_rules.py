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


def test_the_generator_check_claims_exactly_the_generated_modules() -> None:
    """A mutant counts as caught by the generator check only in a file scripts/unasync.py writes."""
    generated = MUTATION._generated_modules()
    assert "invocation_store.adapters._sync.redis" in generated
    assert "invocation_store.boundary._sync.pipeline" in generated
    assert not any("._async." in module for module in generated)
    sep = "\u01c1"
    assert MUTATION._in_generated(
        f"invocation_store.adapters._sync.redis.x{sep}RedisStore{sep}get_progress__mutmut_3", generated
    )
    assert MUTATION._in_generated("invocation_store.adapters._sync.progress.x_read__mutmut_1", generated)
    for source in (
        f"invocation_store.adapters._async.redis.x{sep}AsyncRedisStore{sep}get_progress__mutmut_3",
        "invocation_store.adapters._redis_decode.x_decode_run__mutmut_1",
        "invocation_store.adapters.redis.x_from_url__mutmut_1",
    ):
        assert not MUTATION._in_generated(source, generated)


def test_a_generated_file_changed_by_hand_fails_the_generator_check(tmp_path: Path) -> None:
    """The ground for the filter: any edit of a ``_sync`` file, as a mutant makes, fails
    tests/test_unasync.py's comparison with what the generator makes of the ``_async`` source."""
    path = MUTATION.ROOT / "scripts" / "unasync.py"
    spec = importlib.util.spec_from_file_location("cis_unasync_for_rules", path)
    assert spec is not None
    assert spec.loader is not None
    unasync = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(unasync)
    for source, target in unasync.PAIRS:
        for name in (source, target):
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name).write_text((MUTATION.ROOT / name).read_text(encoding="utf-8"), encoding="utf-8")
    assert unasync.main(["--check"], root=tmp_path) == 0
    target = tmp_path / "invocation_store/adapters/_sync/redis.py"
    text = target.read_text(encoding="utf-8")
    assert "range(MAX_ATTEMPTS)" in text
    target.write_text(text.replace("range(MAX_ATTEMPTS)", "range(MAX_ATTEMPTS + 1)", 1), encoding="utf-8")
    assert unasync.main(["--check"], root=tmp_path) != 0


def test_a_names_file_selects_exact_names_and_trailing_star_prefixes() -> None:
    """``--names``: a line is a mutant's name, or a prefix ending in ``*`` (every mutant of a function)."""
    names = ["m.x_f__mutmut_1", "m.x_f__mutmut_2", "m.x_fg__mutmut_1", "m.x_g__mutmut_1"]
    assert MUTATION._named(names, ["m.x_g__mutmut_1"]) == ["m.x_g__mutmut_1"]
    assert MUTATION._named(names, ["m.x_f__mutmut_*"]) == ["m.x_f__mutmut_1", "m.x_f__mutmut_2"]
    assert MUTATION._named(names, ["m.x_f*", "m.x_g__mutmut_1"]) == names
    assert MUTATION._named(names, []) == []
    assert MUTATION._named(names, ["m.x_f__mutmut_1*"]) == ["m.x_f__mutmut_1"]
