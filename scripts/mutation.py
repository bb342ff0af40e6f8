"""Mutation analysis of the kernel, the boundary and the adapters, on demand (mutmut; not part of CI).

Usage::

    .venv/bin/pip install -e '.[dev,mutation]'
    .venv/bin/python scripts/mutation.py kernel                 # every kernel mutant
    .venv/bin/python scripts/mutation.py boundary --all --max-children 4   # every boundary mutant
    .venv/bin/python scripts/mutation.py adapters --sample 200  # a seeded sample of adapter mutants
    .venv/bin/python scripts/mutation.py adapters --all --file invocation_store/adapters/memory.py
    .venv/bin/python scripts/mutation.py adapters --keep /tmp/cis-mutants   # keep it for mutmut show
    .venv/bin/python scripts/mutation.py adapters --tests tests/ --names survivors.txt  # a second pass

``kernel`` runs mutmut with the ``[tool.mutmut]`` table of ``pyproject.toml`` (the kernel's
modules, each mutant checked by the fast kernel tests, ``tests/kernel``). ``boundary`` and
``adapters`` (:data:`TARGETS`) run it in a scratch copy of the tracked files whose table
mutates every module of ``invocation_store/boundary/`` (checked by ``tests/boundary`` and
``tests/adversarial``) or of ``invocation_store/adapters/`` (checked by ``tests/stores``,
``tests/boundary``, ``tests/adversarial`` and the lazy-import test, on a Redis server, a
Redis Cluster and a PostgreSQL server the script starts once for the whole run:
:func:`_shared_servers`). There, every mutant is first type-checked (``mypy --strict``, as
CI runs it: a mutant it rejects counts as caught; a mutant of a generated ``_sync`` file
counts as caught by the generator check, see :func:`_generated_modules`),
each mutant's tests run fastest first, and every functools cache of the package is
emptied before each test (see :data:`SCRATCH_CONFTEST`). Each run prints one line::

    <target>: <total> mutants, <killed> killed (<n> by mypy), <survived> survived
        (<n> with no test, <equivalent> equivalent), score <s>%

where the score is killed / (total - equivalent). Surviving mutants judged equivalent
(no observable behaviour differs) are listed in :data:`EQUIVALENT` with the reason;
every other survivor is printed by name, to be killed by a new test or judged. Mutant
names are mutmut's (``<module>.x_<function>__mutmut_<n>``) and change when the code
changes: rerun and review after edits. ``--max-children`` (default 1) is the number of
mutants run at once.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import difflib
import importlib.util
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Final

ROOT = Path(__file__).resolve().parent.parent

#: Kernel mutants that survive and change no observable behaviour, with the reason.
EQUIVALENT: dict[str, str] = {
    **{
        f"invocation_store.kernel._ijson.x__constant__mutmut_{n}": (
            "the text of an internal rejection, caught and answered with INVALID_ARGUMENTS; never seen"
        )
        for n in (1, 2, 3, 4)
    },
    **{
        f"invocation_store.kernel._ijson.x__float__mutmut_{n}": (
            "the text of an internal rejection, caught and answered with INVALID_ARGUMENTS; never seen"
        )
        for n in (5, 6, 7)
    },
    "invocation_store.kernel._models.x__positive__mutmut_9": (
        "getattr's default for a missing 'name': attrs always passes an Attribute that has one"
    ),
    "invocation_store.kernel._models.x__positive__mutmut_12": (
        "getattr without a default for 'name': attrs always passes an Attribute that has one"
    ),
    "invocation_store.kernel._models.x__positive__mutmut_15": (
        "getattr's default for a missing 'name': attrs always passes an Attribute that has one"
    ),
    "invocation_store.kernel._preflight.x_preflight__mutmut_25": (
        "None instead of the (empty) token: preflight returns only the code, and admit treats every "
        "falsy token alike (it never replays)"
    ),
    "invocation_store.kernel._refs.x_project_progress__mutmut_7": (
        "the 'list is full' flag starts as None instead of False: only its truth is read"
    ),
    "invocation_store.kernel._admission.x_run_usage_after__mutmut_5": (
        "a zero charge builds an equal RunState instead of returning the same one: equal values"
    ),
    "invocation_store.kernel._ijson.x__valid_unicode__mutmut_4": (
        "'UTF-8' for 'utf-8': codec names are case-insensitive, the same codec"
    ),
    **{
        f"invocation_store.kernel._sizes.x_text_exceeds__mutmut_{n}": (
            "a narrower 'surely within' shortcut (5 * length, or < for <=): the texts it no longer "
            "short-cuts are measured and get the same answer; only the cost differs"
        )
        for n in (6, 7)
    },
    "invocation_store.kernel._admission.x_check_begin__mutmut_10": (
        "the probe record's token becomes None: no Begin check and not record_bytes reads the token, "
        "and check_begin returns only the code"
    ),
    **{
        f"invocation_store.kernel._admission.x_check_begin__mutmut_{n}": (
            "the probe record's sequence (None or 2 for 1): no Begin check and not record_bytes reads it, "
            "and check_begin returns only the code"
        )
        for n in (11, 22)
    },
    "invocation_store.kernel._admission.x_check_begin__mutmut_23": (
        "the probe's ttl_ms 2 for 1: Begin checks only that it is a positive int, and the expiry it "
        "gives is discarded with the probe record"
    ),
}

#: Adapter mutants met in samples that change no observable behaviour, with the reason.
#: (mutmut names methods ``x<sep><Class><sep><method>``; the separator is U+01C1.)
_SEP = "\u01c1"
EQUIVALENT.update(
    {
        "invocation_store.adapters._redis_keys.x_check_prefix__mutmut_6": (
            "the prefix is validated with another safe probe run id ('X' for 'x')"
        ),
        # Judged before _redis_core.py was split per operation; plan_open moved to
        # _redis_runs.py (its mutant numbers are to be judged again on the next sample).
        "invocation_store.adapters._redis_runs.x_plan_open__mutmut_8": (
            "deadline_ms left out of the 2**53 check: deadline + ttl is checked (ttl >= 1) and the "
            "kernel refuses a negative deadline, so the same ValueError is raised"
        ),
        f"invocation_store.adapters._sync.redis.x{_SEP}RedisStore{_SEP}__init____mutmut_8": (
            "the 'scripts loaded' flag starts as None instead of False: only its truth is read"
        ),
        f"invocation_store.adapters._sync.redis.x{_SEP}RedisStore{_SEP}_send_complete__mutmut_1": (
            "a CompleteCall's staged text and staging key are set together or not at all"
        ),
        f"invocation_store.adapters._async.redis.x{_SEP}AsyncRedisStore{_SEP}_send_complete__mutmut_22": (
            "SET NX on a staging key named with a fresh random nonce: it never exists before"
        ),
        f"invocation_store.adapters.memory.x{_SEP}MemoryStore{_SEP}close_run__mutmut_2": (
            "cancel=None instead of False: only its truth is read"
        ),
        f"invocation_store.adapters._async.postgres.x{_SEP}AsyncPostgresStore{_SEP}_answer__mutmut_24": (
            "prepare=None instead of True: psycopg prepares after its threshold instead of at once, "
            "a difference of speed only"
        ),
        f"invocation_store.adapters._async.postgres.x{_SEP}AsyncPostgresStore{_SEP}_run_steps__mutmut_8": (
            "SYNCHRONOUS_COMMIT for synchronous_commit: SQL names are case-insensitive"
        ),
        f"invocation_store.adapters._async.redis.x{_SEP}AsyncRedisStore{_SEP}check_server__mutmut_8": (
            "'time' for 'TIME': Redis command names are case-insensitive"
        ),
        f"invocation_store.adapters._async.redis.x{_SEP}AsyncRedisStore{_SEP}_send_complete__mutmut_46": (
            "SET NX on a staging key named with a fresh random nonce: it never exists before"
        ),
        f"invocation_store.adapters._async.redis.x{_SEP}AsyncRedisStore{_SEP}_io__mutmut_3": (
            "the text of the deadline's TimeoutError: only its type is ever reported (the cause label)"
        ),
        "invocation_store.adapters._redis_complete.x_plan_complete__mutmut_22": (
            "the fast-path range guard made to fail: the exact check_int behind it then runs on every "
            "value and gives the same answer"
        ),
        "invocation_store.adapters._redis_complete.x_plan_complete__mutmut_80": (
            "'XXXX' for an absent evidence status in the header tail: its mask letter is then D, and "
            "the script deletes the field without reading that text"
        ),
        "invocation_store.adapters._redis_runs.x_plan_open__mutmut_14": (
            "deadline_ms left out of the 2**53 check: deadline + ttl is checked (ttl >= 1) and the "
            "kernel refuses a negative deadline, so the same ValueError is raised"
        ),
        **{
            f"invocation_store.adapters._sync.redis.x{_SEP}RedisStore{_SEP}{name}": (
                "pipeline(transaction=None) for False: redis-py reads only its truth"
            )
            for name in ("_list__mutmut_4", "_send_waited__mutmut_11")
        },
        "invocation_store.adapters._redis_create.x_plan_create__mutmut_49": (
            "the late-check field 'None' where no Begin check refused: that branch is taken only for "
            "arguments with no UTF-8 size, which the script answers INVALID_ARGUMENTS before it reads it"
        ),
        **{
            f"invocation_store.boundary._{flavour}.boundary.x{_SEP}{cls}{_SEP}finish_pending__mutmut_4": (
                "every run's held keys instead of this run's: each is then looked up under this run "
                "(completions.get(context.run_id, ...)), so another run's key finds nothing, and this "
                "run's are finished once either way"
            )
            for flavour, cls in (("sync", "ToolBoundary"), ("async", "AsyncToolBoundary"))
        },
        **{
            f"invocation_store.boundary._telemetry.x{_SEP}_Observation{_SEP}current__mutmut_{n}": (
                "a use_span flag None for False, or left to its default (end_on_exit False; "
                "set_status_on_exception True, which the invoke wrapper's final status overwrites): "
                "the same span is exported"
            )
            for n in (2, 3, 4, 6, 8)
        },
        **{
            f"invocation_store.boundary._telemetry.x{_SEP}_Observation{_SEP}finish__mutmut_{n}": (
                "nanoseconds divided by 1000000001 instead of 1e9: a relative change of 1e-9, below "
                "the resolution of any clock that times a call"
            )
            for n in (4, 49, 83)
        },
        f"invocation_store.boundary._telemetry.x{_SEP}_Observation{_SEP}stop__mutmut_8": (
            "a phase starts from 1 ns instead of 0: below the resolution of the clock that times it"
        ),
        **{
            f"invocation_store.boundary._core.x_{name}": (
                "getattr without its default: StoreUnavailableError.__init__ always sets cause and "
                "code, so the default is never read"
            )
            for name in ("_cause__mutmut_18", "code_of__mutmut_6")
        },
        **{
            f"invocation_store.boundary._core.x_new_token__mutmut_{n}": (
                "a token of another length (17 bytes, or the default 32): only its uniqueness is "
                "relied on, and no check reads its length"
            )
            for n in (1, 2)
        },
        f"invocation_store.boundary._telemetry.x{_SEP}_Observation{_SEP}current__mutmut_11": (
            "set_status_on_exception=True: the invoke wrapper's handler then sets the span's final status "
            "(ERROR, no description) over it, so the exported span is the same"
        ),
    }
)

#: Adapter mutants judged equivalent, with the reason (names of the whole adapter runs at a1b5702
#: and 75f7e85; those of functions changed since are the second pass's, at 003ce3d).
_ASYNC_REDIS = f"invocation_store.adapters._async.redis.x{_SEP}AsyncRedisStore{_SEP}"
_SYNC_REDIS = f"invocation_store.adapters._sync.redis.x{_SEP}RedisStore{_SEP}"
_FLAVOUR = f"invocation_store.adapters._redis_flavour.x{_SEP}AsyncRedisFlavour{_SEP}"
EQUIVALENT.update(
    {
        **{
            f"{_ASYNC_REDIS}now_ms__mutmut_{n}": (
                "unreachable in the asyncio flavour: AsyncRedisFlavour.time_reading answers None (a "
                "synchronous now_ms cannot wait for the loop), so the wall clock is answered before "
                "these lines (the generated sync store runs them)"
            )
            for n in (4, *range(11, 23))
        },
        **{
            f"invocation_store.adapters._redis_decode.x_finish_ttl__mutmut_{n}": (
                "a PTTL of 0 answers None either way: the remaining time min(0, ...) is not positive"
            )
            for n in (39, 40)
        },
        **{
            f"invocation_store.adapters._redis_runs.x__refusal__mutmut_{n}": (
                "a refusal of two items is refused a step later with the same cause: every caller "
                "reads the decision time at index 2 next (UnexpectedReply)"
            )
            for n in (1, 2)
        },
        **dict.fromkeys(
            (
                f"invocation_store.adapters._async.postgres.x{_SEP}AsyncPostgresStore{_SEP}_sweep_if_due__mutmut_2",
                f"invocation_store.adapters._sync.postgres.x{_SEP}PostgresStore{_SEP}_sweep_if_due__mutmut_2",
                f"invocation_store.adapters.sqlite.x{_SEP}SqliteStore{_SEP}_do__mutmut_35",
            ),
            "a sweep due at exactly the interval's end: two time.monotonic() readings' difference "
            "never equals the interval in practice, and the next write sweeps anyway",
        ),
        **{
            f"invocation_store.adapters._sql.x__record_from__mutmut_{n}": (
                "the text of an identity check no row can fail: the SELECT asks for the run_id and "
                "tool_call_id by exact equality (binary comparison in SQLite and PostgreSQL)"
            )
            for n in (23, 24, 25)
        },
        **{
            f"invocation_store.adapters._sql.x__record_from__mutmut_{n}": (
                "zip without strict=True over a row of the SELECT's own column list: of one length"
            )
            for n in (9, 10)
        },
        **{
            f"invocation_store.adapters._redis_runs.x_plan_end_run__mutmut_{n}": (
                "a time argument that is not a number (None, XXXX) where an empty one is sent: "
                "END_RUN_SCRIPT reads both as 'decide on the server's clock' (tonumber(...) or TIME)"
            )
            for n in (14, 16)
        },
        **{
            f"{_FLAVOUR}node_client__mutmut_{n}": (
                "the text of a refusal never reached: AsyncRedisStore refuses a waiting mode on an "
                "asyncio cluster client when it is built, with its own text"
            )
            for n in (1, 2, 3)
        },
        **{
            f"invocation_store.adapters._redis_send.x__hiredis_packer__mutmut_{n}": (
                "without hiredis the store lets redis-py pack its commands, the bytes hiredis' "
                "packer writes under the UTF-8 encoder it is used with: only slower"
            )
            for n in (3, 4)
        },
        **{
            f"invocation_store.adapters._redis_common.x_nonce__mutmut_{n}": (
                "a staging key's random part of another length (9 or 32 bytes): only its "
                "uniqueness is relied on"
            )
            for n in (1, 2)
        },
        **dict.fromkeys(
            (
                f"invocation_store.adapters._async.protocol.x{_SEP}AsyncInvocationStore{_SEP}get_many__mutmut_1",
                f"invocation_store.adapters._sync.protocol.x{_SEP}InvocationStore{_SEP}get_many__mutmut_1",
            ),
            "the default of a Protocol method, which is never called: it documents the "
            "interface (the stores' own defaults are tested; mutmut's trampoline hides it "
            "from the signature test)",
        ),
        **dict.fromkeys(
            (
                f"invocation_store.adapters._async.postgres.x{_SEP}AsyncPostgresStore{_SEP}sweep_lapsed__mutmut_5",
                f"invocation_store.adapters._sync.postgres.x{_SEP}PostgresStore{_SEP}sweep_lapsed__mutmut_5",
                f"invocation_store.adapters.sqlite.x{_SEP}SqliteStore{_SEP}sweep_lapsed__mutmut_11",
            ),
            "a sweep with a limit of 0 sent to the database instead of answered 0 at once: LIMIT 0 "
            "deletes nothing either",
        ),
        **dict.fromkeys(
            (
                f"{_ASYNC_REDIS}_end_run__mutmut_22",
                f"{_ASYNC_REDIS}_end_run__mutmut_25",
                f"{_SYNC_REDIS}_end_run__mutmut_22",
                f"{_SYNC_REDIS}_end_run__mutmut_25",
            ),
            "a registered script called with client=None (or none): redis-py's Script then runs "
            "on the client it was registered on, which is the store's own client",
        ),
        **dict.fromkeys(
            (
                f"invocation_store.adapters._async.postgres.x{_SEP}AsyncPostgresStore{_SEP}_do__mutmut_33",
                f"invocation_store.adapters._async.postgres.x{_SEP}AsyncPostgresStore{_SEP}_transaction__mutmut_11",
            ),
            "ms turned into seconds by 1001 for 1000: a pause or a pool wait 0.1% shorter, which no "
            "answer depends on and no timing can tell from scheduling jitter",
        ),
        f"{_ASYNC_REDIS}_failure__mutmut_1": (
            "the default run id is read only with a tool_call_id, and every caller that passes a "
            "tool_call_id passes its run id"
        ),
        **{
            f"{_ASYNC_REDIS}_send_complete__mutmut_{n}": (
                "the staging SET without NX (or nx=False): the staging key's name carries a nonce "
                "drawn for this one completion plan, so only the plan's own resend writes it again, "
                "with the same value; at most its PX restarts"
            )
            for n in (15, 17, 44)
        },
        **{
            f"invocation_store.adapters._redis_common.x_resp2_connection__mutmut_{n}": (
                "the maintenance-notification settings left in the RESP2 probe's connection: "
                "redis-py 8 ignores them on RESP2 (checked with enabled=True against the old-server "
                "fake); the pop is kept for the older redis-py releases the project allows"
            )
            for n in (9, 10, 11, 12, 13, 15)
        },
        **{
            f"invocation_store.adapters._redis_server.x__fields__mutmut_{n}": (
                "zip without strict=True over the even and odd items of a list of even length "
                "(checked on the line before): of one length"
            )
            for n in (15, 19)
        },
        **dict.fromkeys(
            (
                *(f"invocation_store.adapters._sql.x__column_type__mutmut_{n}" for n in (15, 27)),
                *(f"invocation_store.adapters._sql.x__ddl__mutmut_{n}" for n in (16, 17, 19, 20)),
                f"invocation_store.adapters._sql.x{_SEP}Statements{_SEP}__init____mutmut_35",
            ),
            "only the case of SQL text with no quoted part (a type, a constraint, a clause, unquoted "
            "column names): SQLite and PostgreSQL read keywords and unquoted identifiers without regard "
            "to case",
        ),
        **dict.fromkeys(
            (*(f"invocation_store.adapters._sql.x__column_type__mutmut_{n}" for n in (16, 17, 28)),),
            "the branch taken for a type hint with no column type, or the text of its TypeError: "
            "every field of RunState and CanonicalRecord takes the same branch either way (the "
            "columns' types and NOT NULL are pinned by a test), so no hint reaches it",
        ),
        **{
            f"invocation_store.adapters._sql.x__run_from__mutmut_{n}": (
                "the key or text of an identity check no row can fail: the SELECT asks for the run_id "
                "by exact equality"
            )
            for n in (24, 25, 26, 27)
        },
        **{
            f"invocation_store.adapters._sql.x__run_from__mutmut_{n}": (
                "zip without strict=True over a row of the SELECT's own column list: of one length"
            )
            for n in (9, 10)
        },
        **{
            f"invocation_store.adapters._sql.x{_SEP}Statements{_SEP}_found__mutmut_{n}": (
                "an identity check no row can fail: the SELECT asks for the wanted ids by exact "
                "equality under the (run_id, tool_call_id) primary key, so no row is unwanted or seen "
                "twice"
            )
            for n in (16, 23, 24, 25, 26)
        },
        f"{_ASYNC_REDIS}_evalsha__mutmut_1": (
            "a registered script called with client=None on the cluster path: redis-py's Script then "
            "runs on the client it was registered on, the store's own"
        ),
        **{
            f"invocation_store.adapters._redis_create.x__refused_create__mutmut_{n}": (
                "admit without the plan's measured request_bytes: the kernel measures the same "
                "request itself (the same UTF-8 byte count); only the cost differs"
            )
            for n in (31, 37)
        },
        "invocation_store.adapters._redis_decode.x_decode_run__mutmut_15": (
            "a str value sent through decode_text instead of kept: decode_text answers a str as it is"
        ),
        **{
            f"invocation_store.adapters._redis_server.x__online_replicas__mutmut_{n}": (
                "a replica line's parts split at every '=' or from the right: no part of the lines "
                "INFO writes (ip, port, state, offset, lag) holds a second '='"
            )
            for n in (28, 29, 31)
        },
        **{
            f"{_ASYNC_REDIS}synced_now_ms__mutmut_{n}": (
                "the text of a raise no path reaches ('pragma: no cover'): a reading whose local "
                "instants are in order is always kept, so a reading just taken is there"
            )
            for n in (34, 35, 36)
        },
        f"invocation_store.adapters._redis_clock.x{_SEP}ServerClock{_SEP}now_ms__mutmut_9": (
            "<= for < against the last answer: when equal, the value and the last are the same number"
        ),
        **{
            f"invocation_store.adapters._redis_reads.x__same__mutmut_{n}": (
                "zip without strict=True over the check fields and a check of their length (checked "
                "on the line before): of one length"
            )
            for n in (16, 17)
        },
        **{
            f"invocation_store.adapters._redis_complete.x_plan_complete__mutmut_{n}": (
                "the fast path that skips check_int moved at its edges (never taken, or not at "
                "-2**53 itself): check_int, run instead, accepts the same times; for updated_at_ms, "
                "a kernel record's times are in [0, 2**53 - 1] anyway"
            )
            for n in (19, 20, 23)
        },
        **{
            f"invocation_store.adapters._redis_complete.x_plan_complete__mutmut_{n}": (
                "a mask letter other than 'S' where 'D' is sent (d, XXDXX): COMPLETE_SCRIPT sets a "
                "field only on 'S' and deletes it otherwise, and the five-letter XXDXX is sent only "
                "where the letters after it are not 'S' either (a record without a result has no "
                "scope: CIS-EVID-1)"
            )
            for n in (41, 48, 56, 57, 63, 64)
        },
        **{
            f"invocation_store.adapters._redis_complete.x_plan_complete__mutmut_{n}": (
                "updated_at_ms checked at 2**53 itself, or not at all: a kernel record's times are in "
                "[0, 2**53 - 1] (is_well_formed), so no completion carries one past it"
            )
            for n in (24, 28)
        },
        **{
            f"invocation_store.adapters._redis_complete.x_plan_complete__mutmut_{n}": (
                "the raw-response argument sent as XXXX where it is sent empty: COMPLETE_SCRIPT reads "
                "it only when the mask's third letter is S (sent inline), and these calls say D, T or K"
            )
            for n in (97, 112, 138)
        },
        "invocation_store.adapters._redis_complete.x_plan_complete__mutmut_122": (
            "a raw response equal to the stored one but not the same object is resent whole "
            "instead of kept: the script stores the same text; only the bytes sent differ"
        ),
        **{
            f"invocation_store.adapters._redis_create.x_finish_create__mutmut_{n}": (
                "admit without the plan's measured request_bytes: the kernel measures the same "
                "request itself (the same UTF-8 byte count); only the cost differs"
            )
            for n in (21, 27)
        },
        "invocation_store.adapters._redis_reads.x_decide_snapshot__mutmut_14": (
            "the check replies sliced off without raw responses too: they are read only with raw responses"
        ),
        "invocation_store.adapters._redis_server.x__online_replicas__mutmut_22": (
            "an empty replica line read as 'XXXX' for '': neither holds a state= part"
        ),
        "invocation_store.adapters._redis_server.x__online_replicas__mutmut_4": (
            "'slave' or digits for 'slave' and digits: of the fields INFO replication writes, only the "
            "slave<N> lines hold a state= part, so no other field is ever counted"
        ),
        f"{_ASYNC_REDIS}complete__mutmut_18": (
            "plan_complete without server_clock: the script decides on the store's lower bound of "
            "the server's clock instead of TIME; a record lapsed on the server is gone (its key "
            "expires at expires_at_ms) and one live at TIME is live at a lower bound of it"
        ),
        f"invocation_store.adapters._async.postgres.x{_SEP}AsyncPostgresStore{_SEP}_transaction__mutmut_10": (
            "the budget times 1000 where no step deadline bounds the wait: inside _do's operation "
            "deadline there is always one, unless the budget is 0, where 0 * 1000 is 0 / 1000"
        ),
        **dict.fromkeys(
            (
                f"invocation_store.adapters.sqlite.x{_SEP}SqliteStore{_SEP}_bound_lock_wait__mutmut_20",
                *(
                    f"invocation_store.adapters.sqlite.x{_SEP}SqliteStore{_SEP}_connection__mutmut_{n}"
                    for n in (25, 27, 28)
                ),
            ),
            "the busy timeout a connection is believed to hold forgotten or misremembered: the next "
            "operation sets it again (one PRAGMA more), to the same value",
        ),
        f"{_ASYNC_REDIS}_old_server__mutmut_7": (
            "INFO with no section for INFO server: the default sections include server, the only "
            "field read (redis_version); only the reply is longer"
        ),
        f"invocation_store.adapters.sqlite.x{_SEP}SqliteStore{_SEP}_do__mutmut_11": (
            "the schema transaction begun deferred: its first statement (CREATE TABLE IF NOT "
            "EXISTS) takes the write lock on a fresh file, and on a current one nothing is written; "
            "a read-then-write upgrade happens only in a migration, and MIGRATIONS is empty"
        ),
        f"{_ASYNC_REDIS}_send_waited__mutmut_7": (
            "the cluster branch of the asyncio store's waited send never runs: the store refuses a "
            "waiting mode on an asyncio cluster client when it is built"
        ),
        **dict.fromkeys(
            (f"{_ASYNC_REDIS}get_progress__mutmut_12", f"{_SYNC_REDIS}get_progress__mutmut_12"),
            "ids listed for an unsafe run id are never read: the next line returns when the run has no keys",
        ),
        f"invocation_store.adapters._redis_server.x{_SEP}UnsafeServerError{_SEP}__init____mutmut_4": (
            "StoreUnavailableError's code defaults to STORE_UNAVAILABLE, the code passed"
        ),
        "invocation_store.adapters._redis_complete.x__refused_complete__mutmut_9": (
            "decode_record of no items is None, as the guarded branch answers"
        ),
        **dict.fromkeys(
            (
                f"{_SYNC_REDIS}raw_sizes__mutmut_12",
                f"{_SYNC_REDIS}_hmget_progress__mutmut_2",
                f"{_SYNC_REDIS}ttl_remaining_ms__mutmut_13",
            ),
            "pipeline(transaction=None) for False: redis-py reads only the flag's truth",
        ),
        **{
            f"{prefix}{name}": (
                "zip without strict=True over two sequences of one length by construction (the "
                "decoder answers one view per id asked; one reply per node of the same list)"
            )
            for prefix in (_ASYNC_REDIS, _SYNC_REDIS)
            for name in (
                "get_progress__mutmut_55",
                "get_progress__mutmut_56",
                "_check_version__mutmut_14",
                "_check_version__mutmut_15",
            )
        },
    }
)

#: What each scratch-copy target mutates, the tests that check its mutants, and tests left out.
TARGETS: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    # Every module of the stores (memory, Redis, SQL) and their reply checks, checked by the store
    # tests, the boundary's and the adversarial ones (which drive the stores through the boundary)
    # and the lazy-import test (the package's __dir__). The tests that
    # compare the store Protocol's attribute names with a class's see mutmut's trampolines
    # there, so they are left out of this run (they check a shape, not a behaviour).
    "adapters": (
        ("invocation_store/adapters/*",),
        ("tests/stores/", "tests/boundary/", "tests/adversarial/", "tests/test_lazy_import.py"),
        (
            "test_forwarding_store_names_every_operation",
            "test_async_forwarding_store_and_the_async_face_name_every_operation",
            "test_document_store_is_a_store",
        ),
    ),
    # Every module of the boundary (pipeline, runner, registry, results, telemetry).
    "boundary": (("invocation_store/boundary/*",), ("tests/boundary/", "tests/adversarial/"), ()),
}

#: The ``[tool.mutmut]`` table of a scratch-copy run; ``{also}``, ``{only}``, ``{tests}``, ``{skip}``
#: are filled in. Each test gets 60 s (pytest-timeout; the suite's own limit is 600 s, and its
#: slowest test takes about 15): mutmut's own limit counts CPU seconds, so a mutant that makes a
#: test wait for ever (a retry loop that sleeps, a reply never read) held a worker for 600 s.
SCRATCH_TABLE = """[tool.mutmut]
source_paths = ["invocation_store/"]
only_mutate = [{only}]
also_copy = [{also}]
pytest_add_cli_args = ["-p", "no:xdist", "-p", "no:cacheprovider", "-q", "-x", "-o", "timeout=60"{skip}]
pytest_add_cli_args_test_selection = [{tests}]
"""

#: Appended to the scratch copy's conftest.py. (1) A mutant's tests run fastest first
#: (mutmut passes them in no particular order and stops at the first failure), so that a
#: mutant a quick test kills does not wait for the slow ones. (2) Every functools cache of
#: the package is emptied before each test: mutmut maps a function to the tests that
#: called it while it recorded them, and a function run once per process behind a cache
#: (the telemetry instruments, a run's keys) was mapped to whichever test ran first only.
SCRATCH_CONFTEST = """

import inspect as _inspect


def _cis_chain(before, **arguments):  # call the conftest's own hook of that name, if it had one
    if before is not None:
        wanted = _inspect.signature(before).parameters
        before(**{name: value for name, value in arguments.items() if name in wanted})


_cis_modifyitems = globals().get("pytest_collection_modifyitems")
_cis_setup = globals().get("pytest_runtest_setup")


def pytest_collection_modifyitems(session, config, items):  # added by scripts/mutation.py
    import json as _json
    import os as _os

    _cis_chain(_cis_modifyitems, session=session, config=config, items=items)
    if "__mutmut_" not in _os.environ.get("MUTANT_UNDER_TEST", ""):
        return
    try:
        with open("mutmut-stats.json", encoding="utf-8") as _stats:
            _took = _json.load(_stats)["duration_by_test"]
    except (OSError, ValueError, KeyError):
        return
    items.sort(key=lambda item: _took.get(item.nodeid, 0.0))


def pytest_runtest_setup(item):  # added by scripts/mutation.py
    import sys as _sys

    _cis_chain(_cis_setup, item=item)
    for _name, _module in list(_sys.modules.items()):
        if _name.startswith("invocation_store") and _module is not None:
            for _value in list(vars(_module).values()):
                if callable(getattr(_value, "cache_clear", None)) and hasattr(_value, "cache_info"):
                    _value.cache_clear()
"""


#: Appended to the scratch copy's conftest.py and tests/stores/conftest.py: the session's
#: PostgreSQL server and Redis Cluster are the ones :func:`_shared_servers` started for the
#: whole run (named by environment variables), not one per mutant. Each mutant's tests
#: run in a forked pytest session, which would otherwise start both again (initdb, three
#: cluster nodes: seconds per mutant). The tests keep their data apart by key and table
#: prefixes, as they do when the suite runs on several workers.
SHARED_POSTGRES = """

if __import__("os").environ.get("CIS_MUTATION_POSTGRES_DSN"):

    @pytest.fixture(scope="session")
    def postgres_dsn():  # added by scripts/mutation.py: one server for every mutant
        return __import__("os").environ["CIS_MUTATION_POSTGRES_DSN"]
"""
SHARED_CLUSTER = """

if __import__("os").environ.get("CIS_MUTATION_CLUSTER_URLS"):

    @pytest.fixture(scope="session")
    def store_cluster_urls():  # added by scripts/mutation.py: one cluster for every mutant
        return __import__("os").environ["CIS_MUTATION_CLUSTER_URLS"].split()
"""


@contextlib.contextmanager
def _shared_servers() -> Iterator[dict[str, str]]:
    """A Redis server, a Redis Cluster and a PostgreSQL server for a whole run, stopped after it;
    yields the environment that points the tests at them (see :data:`SHARED_POSTGRES`)."""
    from invocation_store.testing.postgres_server import PostgresServer  # noqa: PLC0415
    from invocation_store.testing.redis_server import redis_cluster, redis_server  # noqa: PLC0415

    with contextlib.ExitStack() as stack:
        url = stack.enter_context(redis_server())
        cluster = stack.enter_context(redis_cluster(3))
        postgres = stack.enter_context(PostgresServer())
        yield {
            "REDIS_URL": url,
            "CIS_MUTATION_CLUSTER_URLS": " ".join(cluster),
            "CIS_MUTATION_POSTGRES_DSN": postgres.dsn,
        }


def _mutmut(workdir: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - our own interpreter, fixed arguments
        [sys.executable, "-m", "mutmut", *args],
        cwd=workdir,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
    )


def _statuses(workdir: Path) -> dict[str, str]:
    """Mutant name -> mutmut status (killed, survived, ...), from ``mutmut results --all``."""
    listing = _mutmut(workdir, "results", "--all", "true").stdout
    found = {}
    for line in listing.splitlines():
        name, sep, status = line.strip().rpartition(": ")
        if sep and name:
            found[name] = status.strip()
    return found


#: mutmut statuses that count as caught: a test failed, ran over its time, mypy --strict
#: (which CI runs) rejected the mutated code, or the mutant is in a generated file
#: (:func:`_generated_modules`), which ``tests/test_unasync.py`` rejects unless it equals what
#: ``scripts/unasync.py`` makes of its unmutated source.
CAUGHT: Final = frozenset({"killed", "timeout", "caught by type check", "caught by generator check"})
#: Statuses of a mutant nothing caught: its tests passed, or no test reaches its function.
UNCAUGHT: Final = frozenset({"survived", "no tests"})


#: Redis commands, command options and INFO sections the stores send as literals. Redis
#: reads all of them without regard to case.
REDIS_WORDS: Final = frozenset(
    [
        "EVAL",
        "EVALSHA",
        "SCRIPT",
        "LOAD",
        "EXISTS",
        "FLUSH",
        "INFO",
        "SERVER",
        "MEMORY",
        "PERSISTENCE",
        "REPLICATION",
        "COMMAND",
        "GET",
        "SET",
        "NX",
        "XX",
        "PX",
        "EX",
        "KEEPTTL",
        "HGETALL",
        "HMGET",
        "HGET",
        "HSET",
        "PTTL",
        "PEXPIRE",
        "PEXPIREAT",
        "PEXPIRETIME",
        "STRLEN",
        "DEL",
        "UNLINK",
        "SCAN",
        "MATCH",
        "COUNT",
        "TIME",
        "WAIT",
        "WAITAOF",
        "HELLO",
        "PING",
        "MULTI",
        "EXEC",
        "LRANGE",
        "LLEN",
        "ZRANGE",
        "CONFIG",
        "CLUSTER",
        "SLOTS",
        "SHARDS",
        "READONLY",
    ]
)
#: The INFO sections the server checks ask for.
INFO_SECTIONS: Final = frozenset({"SERVER", "MEMORY", "PERSISTENCE", "REPLICATION"})
#: Codec names, which Python looks up without regard to case.
CODECS: Final = frozenset({"utf-8", "utf8", "ascii", "latin-1"})
_SQL_STATEMENT: Final = re.compile(
    r"^\s*(PRAGMA|SELECT|INSERT|UPDATE|DELETE|CREATE|BEGIN|SET|SHOW|ALTER|DROP|WITH|COMMIT|ROLLBACK)\b",
    re.IGNORECASE,
)
_LITERAL: Final = re.compile(r"\"([^\"\\]*)\"|'([^'\\]*)'")


def _case_blind(before: str, after: str) -> str | None:
    """Why a one-line mutation that only changes the case of string literals changes nothing:
    every changed literal is read without regard to case (a Redis command, option or INFO
    section; a codec name; SQL text with no quoted part). None otherwise."""
    if before == after or before.lower() != after.lower():
        return None
    old = [a or b for a, b in _LITERAL.findall(before)]
    new = [a or b for a, b in _LITERAL.findall(after)]
    if len(old) != len(new):
        return None
    kinds = set()
    for was, now in zip(old, new, strict=True):
        if was == now:
            continue
        if (was in REDIS_WORDS) or (was.upper() in INFO_SECTIONS and '"INFO"' in before):
            # spelled as the stores spell them: commands and options in capitals, and an INFO
            # section as the argument of an INFO (a lower-case key that spells a command is data)
            kinds.add("a Redis command, option or INFO section name")
        elif was.lower() in CODECS:
            kinds.add("a codec name")
        elif _SQL_STATEMENT.match(was) and not any(quote in was for quote in "'\"`"):
            kinds.add("SQL text without quoted parts")
        else:
            return None
    return f"only the case of {' and '.join(sorted(kinds))} changes, which is read without regard to case"


def _mutant_lines(workdir: Path, names: list[str]) -> dict[str, tuple[list[str], list[str]]]:
    """Mutant name -> (its function's lines it removes, the lines it adds), from the mutants tree."""
    mutants = workdir / "mutants"
    functions: dict[Path, dict[str, list[str]]] = {}
    found = {}
    for name in names:
        parts = name.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            base = mutants.joinpath(*parts[:cut])
            path = base.with_suffix(".py") if base.with_suffix(".py").exists() else base / "__init__.py"
            if path.exists():
                break
        else:
            continue
        if path not in functions:
            text = path.read_text(encoding="utf-8")
            lines = text.splitlines()
            functions[path] = {
                node.name: lines[node.lineno : node.end_lineno]
                for node in ast.walk(ast.parse(text))
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and "__mutmut_" in node.name
            }
        function = ".".join(parts[cut:])
        original = functions[path].get(function.rsplit("__mutmut_", 1)[0] + "__mutmut_orig")
        mutated = functions[path].get(function)
        if original is None or mutated is None:
            continue
        diff = list(difflib.unified_diff(original, mutated, lineterm="", n=0))[2:]
        found[name] = (
            [line[1:] for line in diff if line.startswith("-")],
            [line[1:] for line in diff if line.startswith("+")],
        )
    return found


def _by_rule(workdir: Path, names: list[str]) -> dict[str, str]:
    """Survivors judged equivalent by a rule (:func:`_case_blind`), with the rule's reason."""
    judged = {}
    for name, (removed, added) in _mutant_lines(workdir, names).items():
        if len(removed) == len(added) == 1:
            reason = _case_blind(removed[0], added[0])
            if reason is not None:
                judged[name] = reason
    return judged


def _report(target: str, statuses: dict[str, str], ruled: dict[str, str] | None = None) -> int:
    total = len(statuses)
    killed = sum(status in CAUGHT for status in statuses.values())
    typed = sum(status == "caught by type check" for status in statuses.values())
    generated = sum(status == "caught by generator check" for status in statuses.values())
    survivors = sorted(name for name, status in statuses.items() if status in UNCAUGHT)
    untested = sum(statuses[name] == "no tests" for name in survivors)
    judged_equivalent = {**(ruled or {}), **EQUIVALENT}
    equivalent = [name for name in survivors if name in judged_equivalent]
    unexplained = [name for name in survivors if name not in judged_equivalent]
    by_rule = sum(name in (ruled or {}) and name not in EQUIVALENT for name in survivors)
    other = total - killed - len(survivors)
    judged = total - len(equivalent)
    score = 100.0 * killed / judged if judged else 100.0
    print(
        f"{target}: {total} mutants, {killed} killed ({typed} by mypy, {generated} by the generator check), "
        f"{len(survivors)} survived "
        f"({untested} with no test, {len(equivalent)} equivalent, {by_rule} of them by a rule), "
        f"score {score:.1f}%" + (f", {other} not run" if other else "")
    )
    for name in unexplained:
        print(f"  {statuses[name]}, not judged equivalent: {name}")
    return 0


def run_kernel(max_children: int) -> int:
    """Every kernel mutant, in the repository (mutmut writes ``mutants/``, git-ignored)."""
    done = _mutmut(ROOT, "run", "--max-children", str(max_children))
    if done.returncode != 0:
        print(done.stdout[-2000:], done.stderr[-2000:], sep="\n")
        return done.returncode
    return _report("kernel", _statuses(ROOT))


def _scratch_copy(
    destination: Path, only: tuple[str, ...], tests: tuple[str, ...], skip: tuple[str, ...]
) -> None:
    files = subprocess.run(
        ["git", "ls-files", "-z"],  # noqa: S607 - git from PATH, as a developer runs it
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    tracked = [raw.decode() for raw in files if raw]
    for name in tracked:
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    pyproject = destination / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8")
    table = re.compile(r"^\[tool\.mutmut\]\n(?:(?!^\[).*\n?)*", re.MULTILINE)
    # Everything tracked beside the package goes with the tests (they read docs, spec, .ci ...).
    beside = sorted({name.split("/")[0] for name in tracked} - {"invocation_store", "tests"})
    filled = SCRATCH_TABLE.format(
        also=", ".join(f'"{name}"' for name in beside),
        only=", ".join(f'"{path}"' for path in only),
        tests=", ".join(f'"{path}"' for path in tests),
        skip=f', "-k", "{" and ".join(f"not {name}" for name in skip)}"' if skip else "",
    )
    pyproject.write_text(table.sub(filled + "\n", text), encoding="utf-8")
    with (destination / "conftest.py").open("a", encoding="utf-8") as conftest:
        conftest.write(SCRATCH_CONFTEST + SHARED_POSTGRES)
    with (destination / "tests" / "stores" / "conftest.py").open("a", encoding="utf-8") as conftest:
        conftest.write(SHARED_CLUSTER)


_MUTANT_DEF: Final = re.compile(r"__mutmut_\d+$")


def _caught_by_mypy(workdir: Path) -> set[str]:
    """Mutants ``mypy --strict`` rejects, run once over every generated mutant.

    CI runs mypy on every change, so such a mutant never lands: it counts as caught. Each
    error is charged to the mutant function whose lines hold it; errors outside every
    mutant function are the trampolines' own (mutmut's scaffolding) and are ignored.
    (mutmut's own ``type_check_command`` stops at the first such error instead.)
    """
    mutants = workdir / "mutants"
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "invocation_store", "--no-warn-unused-ignores", "--output", "json"],
        cwd=mutants,
        capture_output=True,
        text=True,
        check=False,
    )
    lines_by_file: dict[str, set[int]] = {}
    for line in done.stdout.splitlines():
        if line.strip():
            error = json.loads(line)
            lines_by_file.setdefault(error["file"], set()).add(int(error["line"]))
    caught = set()
    for name, lines in lines_by_file.items():
        path = mutants / name
        module = ".".join(path.relative_to(mutants).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _MUTANT_DEF.search(node.name):
                end = node.end_lineno or node.lineno
                if any(node.lineno <= line <= end for line in lines):
                    caught.add(f"{module}.{node.name}")
    return caught


def _generated_modules(root: Path = ROOT) -> frozenset[str]:
    """The modules ``scripts/unasync.py`` generates (its ``PAIRS``' targets), as dotted names.

    A mutant of one changes that file's text and not the ``_async`` source it is generated
    from, so ``tests/test_unasync.py::test_generated_files_are_up_to_date`` (which CI runs)
    fails on it: it can never land, as a mutant mypy rejects cannot. It counts as caught
    ("by the generator check"); its twin in the ``_async`` source is run through the tests.
    """
    spec = importlib.util.spec_from_file_location("unasync_pairs", root / "scripts" / "unasync.py")
    if spec is None or spec.loader is None:
        raise RuntimeError("scripts/unasync.py cannot be loaded")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return frozenset(".".join(Path(target).with_suffix("").parts) for _source, target in module.PAIRS)


def _in_generated(name: str, generated: frozenset[str]) -> bool:
    """Whether the mutant ``name`` (``<module>.x_<function>__mutmut_<n>``) is in a generated module."""
    return any(name.startswith(f"{module}.x") for module in generated)


def _named(names: list[str], listed: list[str]) -> list[str]:
    """The mutants of ``names`` that ``listed`` names: exactly, or by a prefix with a trailing ``*``."""
    exact = {name for name in listed if not name.endswith("*")}
    prefixes = tuple(name[:-1] for name in listed if name.endswith("*"))
    return [name for name in names if name in exact or (prefixes and name.startswith(prefixes))]


def run_scratch(
    target: str,
    sample: int | None,
    *,
    seed: int,
    max_children: int,
    keep: Path | None = None,
    files: tuple[str, ...] = (),
    tests: tuple[str, ...] = (),
    skip: tuple[str, ...] = (),
    names_file: Path | None = None,
) -> int:
    """The mutants of ``target`` (a key of :data:`TARGETS`), in a scratch copy of the tracked files.

    ``sample``: a seeded sample of that many mutants, or None for every mutant. ``files``
    narrows the modules mutated (paths or ``dir/*`` patterns; default: the target's).
    ``keep`` names a directory to hold the copy (kept afterwards, for ``mutmut show`` and
    for ``mutmut run <names>`` after new tests); by default a temporary one is removed.
    ``tests`` replaces the target's test paths and ``skip`` adds test names to leave out
    (e.g. ``tests/`` for a second pass of a fast run's survivors against the whole suite);
    ``names_file`` runs only the mutants it names, one per line, instead of a sample (a line
    ending in ``*`` names every mutant whose name starts with the rest: all of a function's).
    """
    only, target_tests, target_skip = TARGETS[target]
    tests = tests or target_tests
    skip = (*target_skip, *skip)
    with tempfile.TemporaryDirectory(prefix="cis-mutation-") as scratch, _shared_servers() as env:
        workdir = Path(scratch) if keep is None else keep
        if keep is not None and keep.exists():
            shutil.rmtree(keep)
        _scratch_copy(workdir, files or only, tests, skip)
        # A first run with a name matching nothing generates every mutant and the test map.
        first = _mutmut(workdir, "run", "--max-children", str(max_children), "no-such-mutant", env=env)
        if "failed to collect stats" in first.stdout + first.stderr:
            # The unmutated tests failed in the copy (a file they read was not copied?).
            print(f"{target}: the tests fail on the unmutated copy", first.stdout[-2000:], sep="\n")
            return 1
        names = sorted(_statuses(workdir))
        if not names:
            print(f"{target}: mutmut generated no mutants", first.stdout[-2000:], first.stderr[-2000:])
            return 1
        typed = _caught_by_mypy(workdir) & set(names)
        generated = {name for name in names if _in_generated(name, _generated_modules())} - typed
        if names_file is not None:
            chosen = _named(names, names_file.read_text(encoding="utf-8").split())
            label = f"{target} ({len(chosen)} named in {names_file.name}, tests {' '.join(tests)})"
        elif sample is None:
            chosen, label = names, f"{target} (every mutant)"
        else:
            draw = random.Random(seed)  # noqa: S311 - a reproducible sample, not a secret
            chosen = sorted(draw.sample(names, min(sample, len(names))))
            label = f"{target} (sample of {len(chosen)} of {len(names)}, seed {seed})"
        tested = [name for name in chosen if name not in typed and name not in generated]
        done = _mutmut(workdir, "run", "--max-children", str(max_children), *tested, env=env)
        if done.returncode != 0:
            print(done.stdout[-2000:], done.stderr[-2000:], sep="\n")
        statuses = {
            **_statuses(workdir),
            **dict.fromkeys(generated, "caught by generator check"),
            **dict.fromkeys(typed, "caught by type check"),
        }
        survivors = [name for name in chosen if statuses.get(name) in UNCAUGHT]
        return _report(
            label, {name: statuses.get(name, "not run") for name in chosen}, _by_rule(workdir, survivors)
        )


def main(argv: list[str] | None = None) -> int:
    """Parse arguments and run; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("target", choices=("kernel", *TARGETS))
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--sample", type=int, default=60, help="mutants to run (default 60)")
    size.add_argument("--all", action="store_true", help="every mutant of the target, not a sample")
    parser.add_argument("--seed", type=int, default=16, help="seed of the sample (default 16)")
    parser.add_argument("--max-children", type=int, default=1, help="parallel mutants (default 1)")
    parser.add_argument("--keep", type=Path, help="keep the scratch copy here (emptied first)")
    parser.add_argument("--file", action="append", default=[], help="mutate only this module (repeatable)")
    parser.add_argument("--tests", action="append", default=[], help="test path instead of the target's")
    parser.add_argument("--skip", action="append", default=[], help="a test name to leave out (repeatable)")
    parser.add_argument(
        "--names", type=Path, help="run only the mutants named in this file (a trailing * matches a prefix)"
    )
    args = parser.parse_args(argv)
    if args.target == "kernel":
        return run_kernel(args.max_children)
    sample = None if args.all else args.sample
    return run_scratch(
        args.target,
        sample,
        seed=args.seed,
        max_children=args.max_children,
        keep=args.keep,
        files=tuple(args.file),
        tests=tuple(args.tests),
        skip=tuple(args.skip),
        names_file=args.names,
    )


if __name__ == "__main__":
    sys.exit(main())
