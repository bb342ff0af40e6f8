"""The I/O-free half of the Redis store, shared by the sync and async adapters: an index.

One module per operation, each building its script call (keys and arguments) from
kernel values and turning the script's reply back into kernel values, with the
kernel re-run on the state the script saw; none does I/O, reads a clock or imports
another of them but the shared decoders and keys:

- ``_redis_keys``: the key layout and :class:`RunKeys` (every key of a run, cached,
  pre-encoded);
- ``_redis_decode``: the strict decoders every operation shares
  (:class:`CorruptReplyError`, records, runs, progress views, id lists, TTL reads);
- ``_redis_runs``: open, cancel, close (and undoing an open that missed its durability);
- ``_redis_create``: create (kernel ``admit``);
- ``_redis_complete``: complete (kernel ``decide_completion``), staging of large raw
  responses;
- ``_redis_clock``: the store's lower bound of the server's clock;
- ``_redis_scripts``: the Lua scripts with their contracts.

This module re-exports their names so that the adapters (``core.<name>``) and
tests read one namespace; it defines nothing.
"""

from __future__ import annotations

from ._redis_complete import (
    STAGE_ABOVE_BYTES,
    STAGE_TTL_MS,
    CompleteCall,
    CompletePlan,
    finish_complete,
    plan_complete,
)
from ._redis_create import CreatePlan, finish_create, plan_create, undurable
from ._redis_decode import (
    MAX_EXACT_INT,
    MIN_VERSION,
    CorruptReplyError,
    decode_ids,
    decode_progress,
    decode_progress_reply,
    decode_record,
    decode_run,
    decode_text,
    finish_ttl,
    parse_version,
    refuse_corrupt,
)
from ._redis_keys import RunKeys, calls_key, check_prefix, raw_key, run_keys
from ._redis_runs import (
    EndPlan,
    OpenPlan,
    finish_end_run,
    finish_open,
    plan_end_run,
    plan_open,
    plan_undo_open,
    takes_back,
)

__all__ = [
    "MAX_EXACT_INT",
    "MIN_VERSION",
    "STAGE_ABOVE_BYTES",
    "STAGE_TTL_MS",
    "CompleteCall",
    "CompletePlan",
    "CorruptReplyError",
    "CreatePlan",
    "EndPlan",
    "OpenPlan",
    "RunKeys",
    "calls_key",
    "check_prefix",
    "decode_ids",
    "decode_progress",
    "decode_progress_reply",
    "decode_record",
    "decode_run",
    "decode_text",
    "finish_complete",
    "finish_create",
    "finish_end_run",
    "finish_open",
    "finish_ttl",
    "parse_version",
    "plan_complete",
    "plan_create",
    "plan_end_run",
    "plan_open",
    "plan_undo_open",
    "raw_key",
    "refuse_corrupt",
    "run_keys",
    "takes_back",
    "undurable",
]
