"""What a store's caller reads when it builds one wrongly: the exact type and text (no server needed).

A harness author or operator searches for these texts, so each is pinned whole, like the
boundary's (tests/boundary/test_misuse_messages.py).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from invocation_store.adapters import Durability, RedisStore
from invocation_store.adapters.sqlite import SqliteStore

ROWS: list[tuple[str, Callable[[], Any], type[Exception], str]] = [
    (
        "durability-negative",
        lambda: Durability(replicas=-1),
        ValueError,
        "Durability counts and timeouts are non-negative ints",
    ),
    (
        "durability-waits-forever",
        lambda: Durability(replicas=1, timeout_ms=0),
        ValueError,
        "a durability mode needs timeout_ms > 0 (0 would wait forever)",
    ),
    ("durability-aof-not-bool", lambda: Durability(aof=1), TypeError, "Durability.aof is a bool"),  # type: ignore[arg-type]
    (
        "redis-prefix-braces",
        lambda: RedisStore.from_url("redis://127.0.0.1:1/0", prefix="cis{x}"),
        ValueError,
        "key prefix must be non-empty and contain no '{' or '}'",
    ),
    (
        "sql-prefix-characters",
        lambda: SqliteStore(Path(tempfile.mkdtemp()) / "store.db", prefix="cis-"),
        ValueError,
        "the table prefix is letters, digits and _",
    ),
    (
        "sql-prefix-first-character",
        lambda: SqliteStore(Path(tempfile.mkdtemp()) / "store.db", prefix="9cis_"),
        ValueError,
        "the table prefix starts with a letter or _",
    ),
]


@pytest.mark.parametrize(
    ("build", "kind", "message"), [row[1:] for row in ROWS], ids=[row[0] for row in ROWS]
)
def test_each_wrong_build_raises_its_exact_message(
    build: Callable[[], Any], kind: type[Exception], message: str
) -> None:
    """The exception's exact type and its whole text."""
    with pytest.raises(Exception) as caught:
        build()
    assert type(caught.value) is kind
    assert str(caught.value) == message
