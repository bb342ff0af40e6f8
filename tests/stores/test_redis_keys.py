"""The Redis key layout (CIS-KEY-1..3): one hash tag per run, a configurable prefix, injective keys.

The key strings belong to the Redis adapter (``adapters/_redis_keys.py``); the id rules
they rest on (a safe id holds no brace) belong to the kernel.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from redis.crc import key_slot

from invocation_store.adapters import call_key, done_key, run_key
from invocation_store.kernel import MAX_ID_LENGTH

RUN_ID = "run-1"
SAFE = re.compile(r"[A-Za-z0-9_.:\-]{1,128}")

#: Real framework ids (as tests/kernel/test_preflight.py accepts them), each keyed unchanged.
PROVIDER_IDS = [
    "call_abc123XYZ",  # OpenAI Chat Completions
    "call_9sKdLq2Vx0pN3mR7tY1uWz4e",
    "fc_67ca09c5efe0819096d0511c92b8c890096610f474011cc0",  # OpenAI Responses item id
    "toolu_01A09q90qw90lq917835lq9",  # Anthropic
    "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q",  # Bedrock Converse
    "D681PevKs",  # Mistral (9 characters)
    "chatcmpl-tool-3f1c7c3e0b3c4f5e9d2a8b7c6d5e4f3a",  # vLLM
    "functions.get_weather:0",  # Kimi-style
    "123e4567-e89b-12d3-a456-426614174000",  # UUID
    "a",
    "x" * MAX_ID_LENGTH,
]


def test_key_layout_and_configurable_prefix() -> None:
    """CIS-KEY-1: call, run and done keys are <prefix>:{<run_id>}:...; the prefix is configurable."""
    assert call_key("cis", "run-1", "call_1") == "cis:{run-1}:call:call_1"
    assert call_key("tenant-a:cis", "run-1", "call_1") == "tenant-a:cis:{run-1}:call:call_1"
    assert run_key("cis", "run-1") == "cis:{run-1}:run"
    assert done_key("cis", "run-1") == "cis:{run-1}:done"


@pytest.mark.parametrize(
    ("prefix", "run_id", "tool_call_id"),
    [("", "run-1", "c"), ("a{b", "run-1", "c"), ("a}", "run-1", "c"), ("p", "run 1", "c"), ("p", "r", "c d")],
)
def test_key_factory_refuses_unsafe_parts(prefix: str, run_id: str, tool_call_id: str) -> None:
    """CIS-KEY-1, CIS-KERN-2: an unsafe id or a braced prefix is a programming error (ValueError)."""
    with pytest.raises(ValueError):
        call_key(prefix, run_id, tool_call_id)


def test_all_keys_of_a_run_share_one_cluster_slot() -> None:
    """CIS-KEY-2: the hash tag is exactly {run_id}, so every key of a run maps to one Redis Cluster slot."""
    for run_id in ("run-1", "r", "functions.get_weather:0", "R" * 128):
        keys = [run_key("cis", run_id), done_key("cis", run_id)] + [
            call_key("cis", run_id, tool_call_id) for tool_call_id in PROVIDER_IDS
        ]
        slots = {key_slot(key.encode()) for key in keys}
        assert slots == {key_slot(run_id.encode())}


def test_keys_of_different_pairs_differ() -> None:
    """CIS-KEY-3: pairs that concatenate alike still give distinct keys (examples; see the property)."""
    pairs = [("a", "b:c"), ("a:b", "c"), ("a:call:b", "c"), ("a", "call:b:c"), ("a.b", "c"), ("a", "b.c")]
    keys = {call_key("p", run_id, tool_call_id) for run_id, tool_call_id in pairs}
    assert len(keys) == len(pairs)
    assert not keys & {run_key("p", run_id) for run_id, _ in pairs}


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: run_key("cis", "run 1"), "^run_id is not a safe id$"),
        (lambda: done_key("", RUN_ID), r"^key prefix must be non-empty and contain no '\{' or '\}'$"),
        (lambda: run_key("a{b", RUN_ID), r"^key prefix must be non-empty and contain no '\{' or '\}'$"),
        (lambda: call_key("cis", RUN_ID, "call 1"), "^tool_call_id is not a safe id$"),
    ],
)
def test_key_builders_refuse_unsafe_parts_with_a_plain_message(build: object, message: str) -> None:
    """CIS-KEY-1, CIS-KEY-3: an unsafe id or prefix is a ValueError naming the part, never echoing it."""
    with pytest.raises(ValueError, match=message):
        build()  # type: ignore[operator]


_key_ids = st.one_of(
    st.text(alphabet="ac:.-_", min_size=1, max_size=6),
    st.sampled_from(["call", ":call:", "call:", ":", "a:call:b", "run"]),
    st.from_regex(SAFE, fullmatch=True),
)


@settings(max_examples=200)
@given(pairs=st.lists(st.tuples(_key_ids, _key_ids), min_size=2, max_size=30, unique=True))
def test_key_construction_is_injective(pairs: list[tuple[str, str]]) -> None:
    """CIS-KEY-3, CIS-KEY-1: distinct (run id, tool_call_id) pairs give distinct keys, each decodable back."""
    keys = [call_key("cis", run_id, tool_call_id) for run_id, tool_call_id in pairs]
    assert len(set(keys)) == len(pairs)
    for (run_id, tool_call_id), key in zip(pairs, keys, strict=True):
        tag, rest = key.removeprefix("cis:{").split("}", 1)
        assert (tag, rest.removeprefix(":call:")) == (run_id, tool_call_id)
    run_level = {run_key("cis", run_id) for run_id, _ in pairs} | {
        done_key("cis", run_id) for run_id, _ in pairs
    }
    assert not run_level & set(keys)
