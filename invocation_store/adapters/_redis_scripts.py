"""The Lua scripts of the Redis store, each a mirror of one kernel decision.

Theory of operation
-------------------
Every write of :class:`~invocation_store.adapters.RedisStore` is one of the scripts
below, so every write is atomic and costs one round trip. A script never invents a
rule: it repeats, check for check and in the same order, what the kernel function
named in its contract decides, and writes the kernel's result. The Python side then
re-runs the kernel on the state the script saw (returned in the reply) to build the
value it hands back, so the two can never silently disagree.

Storage layout (all keys of a run share the hash tag ``{run_id}``, so each script
touches one Redis Cluster slot, CIS-KEY-2):

- ``<prefix>:{<run>}:run``: HASH of the run state, one field per
  :class:`~invocation_store.kernel.RunState` attribute (:data:`RUN_FIELDS` order),
  lapsing at its ``expires_at_ms``, set once, when the run is opened.
- ``<prefix>:{<run>}:call:<tool_call_id>``: HASH of one record, one field per
  :class:`~invocation_store.kernel.CanonicalRecord` attribute except the raw
  response; a ``None`` attribute is an absent field; ints are decimal strings.
  It lapses at its ``expires_at_ms`` (the run's ``ttl_ms`` after its creation), set
  once, when the record is created; later writes are ``HSET``/``HDEL`` of fields,
  which keep the remaining TTL (CIS-TTL-1, CIS-TTL-3).
- ``<prefix>:{<run>}:raw:<tool_call_id>``: STRING holding the record's raw response
  (absent when it is None). It is created by a completion with the record's own
  expiry as an absolute time (``SET ... PXAT``, read inside the same script: both
  lapse at the same instant and the record's own TTL is never touched). Why a
  separate key: a large value passed to a script as an argument is copied into Lua
  and back (a no-op script with a 1 MiB argument costs several times a plain
  ``SET``); a large raw response is therefore written with a plain ``SET`` to a
  fresh, randomly named staging key in the same pipelined round trip, and the
  script ``RENAME`` s it into place only if the compare-and-set succeeds (O(1), no
  copy), deleting it otherwise.
- ``<prefix>:{<run>}:calls`` / ``:done``: LISTs of tool_call_ids in admission /
  completion order, their expiry set once, when the list is created, to the run's
  ``expires_at_ms``.

Expiries are absolute times on the server's clock whenever the scripts decide on it
(``PEXPIREAT``, ``SET ... PXAT``: the key lapses at exactly the ``expires_at_ms``
written beside it). Relative ones (``PTTL`` read, ``PX`` written) would drift: Redis
6.2 and 7.0 read the clock afresh at each command of a script, so a raw response
written with ``PX <the record's PTTL>`` could outlive its record by the milliseconds
the script took between the two commands. With a given clock a new key's expiry is
the time left on that clock (``PEXPIRE``), and a raw response takes its record's
absolute expiry from ``PEXPIRETIME`` (Redis 7.0+, Valkey), or on Redis 6.2 from
``TIME`` read before the record's ``PTTL`` (never later than the record's).

Times (CIS-STORE-10, one clock per deployment): every decision that compares times
is taken on the server's clock, inside the script, unless the store was given a clock
of its own (a test clock shared by every host, passed as ``now``). With no ``now``,
a script reads ``TIME``, except the completion, which learns the server's time from
the record's TTL it reads anyway: every expiry is set by a script from that same
clock, so a record key that exists is live and ``expires_at_ms - PTTL`` is the
server's time when the script runs, read without an extra command. The script
stamps what it writes (``created_at_ms``, ``updated_at_ms`` of a new record,
``opened_at_ms`` of a new run) with that time and reports it, so that the adapter
re-runs the kernel at the very instant the script decided. A key found alive well
after its stored expiry (:data:`EXPIRY_SLACK_MS`) has lost its TTL: ``CORRUPT NoTTL``.
Integers written by a script go through ``string.format('%d', ...)``; Lua numbers are
doubles, so the adapter refuses integers of 2**53 or more before calling a script.

Durability (CIS-DUR-2): in a waiting mode the adapter pipelines ``WAIT``/``WAITAOF``
behind the script on the same connection; they count that connection's writes. A
script that answers with a record or run it did not write now (a replay, an open of
an existing run) then rewrites one field of it with the value it holds (``touch``), so
that the connection's replication offset covers the record and the wait is about it,
also on a fresh connection after a resend (Valkey answers ``WAIT`` at once on a
connection that wrote nothing).

No partial writes (CIS-DUR-7): a Redis script that fails part-way keeps what it
wrote before the failure (there is no rollback). So every script makes every check
that can fail before its first write: it reads every key it will write (a foreign
type fails the read, or is answered ``CORRUPT ForeignKey``), checks every stored
integer it will compute with (``CORRUPT BadInteger``) and answers ``CORRUPT NoTTL``
for a record or run found without expiry (PTTL -1: removed from outside), which is
never completed, admitted into or reopened. Commands cannot fail after that: the
store refused, before the first script, any server that lacks one of them
(``_redis_server``), and a full memory (``maxmemory``, ``noeviction``) refuses only
a script's *first* write, the others being allowed once it has written. A
``CORRUPT`` reply writes nothing (a staging key aside, which is deleted).

TTL discipline (CIS-TTL-1..3): a record HASH, a run HASH and a LIST get their expiry
exactly once, in the script that creates them; no script ever issues an expire
command, ``PERSIST``, ``GETEX`` or ``SET`` on them afterwards. The raw STRING is
(re)written only together with its expiry, the record's own expiry read in the same
script (see above), so it never outlives the record.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "COMPLETE_SCRIPT",
    "CREATE_RUN_ORDER",
    "CREATE_SCRIPT",
    "END_RUN_SCRIPT",
    "EXPIRY_SLACK_MS",
    "OPEN_RUN_SCRIPT",
    "PROGRESS_SCRIPT",
    "RUN_FIELDS",
    "UNDO_OPEN_SCRIPT",
]

#: Field order of a run HASH as every script returns it (matches RunState).
RUN_FIELDS: Final = (
    "run_id",
    "status",
    "opened_at_ms",
    "deadline_ms",
    "ttl_ms",
    "expires_at_ms",
    "tool_call_budget",
    "byte_budget",
    "tool_calls_used",
    "bytes_used",
)

#: On the server's clock, a key still alive this many ms after its stored
#: ``expires_at_ms`` has lost its TTL (its expiry and the field are set by one script
#: from one clock and lapse within a millisecond of each other): ``CORRUPT NoTTL``.
EXPIRY_SLACK_MS: Final = 1_000

_HMGET_RUN: Final = "redis.call('HMGET', KEYS[1], " + ", ".join(f"'{name}'" for name in RUN_FIELDS) + ")"

# Lua: is a stored value a decimal integer (as every script writes them)?
_IS_INT: Final = """
local function is_int(v) return type(v) == 'string' and string.find(v, '^%-?%d+$') ~= nil end
"""

# Lua: the server's clock in integer ms (TIME: seconds, microseconds).
_SERVER_MS: Final = """
local function server_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
"""

# Lua: give a new key its expiry, once (CIS-TTL-1), lapsing at ``at`` (integer ms, a
# number) on the clock the script decides on. On the server's clock (``server``: no
# ``now`` given) the absolute time itself (PEXPIREAT), so that the key's expiry is
# exactly the ``expires_at_ms`` written beside it, on every server (Redis 6.2 and 7.0
# read the clock afresh at each command of a script, 7.2 and Valkey once per script);
# with a given clock the time left on it (PEXPIRE ``at - now``).
_EXPIRE_AT: Final = """
local function expire_at(key, at, now, server)
  if server then
    redis.call('PEXPIREAT', key, string.format('%d', at))
  else
    redis.call('PEXPIRE', key, string.format('%d', at - now))
  end
end
"""

# Lua: the first fallible write of a script, RPUSH to a LIST that may hold another type
# (put from outside). Run with pcall: a foreign type answers CORRUPT ForeignKey before
# anything is written; any other error (OOM) is raised as it is.
_PUSH: Final = """
local function push(key, value)
  local n = redis.pcall('RPUSH', key, value)
  if type(n) == 'table' and n.err then
    if string.sub(n.err, 1, 9) == 'WRONGTYPE' then return false end
    return redis.error_reply(n.err)
  end
  return n
end
"""

# Replies are one space-separated string ("<TAG> <values>...") whenever every value
# is an id, a decimal or an enum value (none contains a space): a single bulk reply
# parses much faster in redis-py than an array. A reply that carries a record (free
# text) is an array instead. Every reply of a decision carries the time it was taken at.

# Mirror of kernel ``open_run`` (CIS-RUN-1, CIS-RETRY-3).
# KEYS[1] - run HASH; KEYS[2] - done LIST; KEYS[3] - calls LIST
# ARGV[1] - now_ms, or "" to decide on the server's clock (TIME)
# ARGV[2] - "1" in a waiting durability mode: an existing run is touched (see the top)
# ARGV[3..12] - the fresh run's values in RUN_FIELDS order; opened_at_ms (ARGV[5]) is
#   replaced by the script's now
# return "FRESH <now>" when the fresh run was stored, lapsing at its expires_at_ms (any
#   lapsed run and its lists are deleted first; a run whose expiry is already past is
#   not stored); "EXISTING <now>
#   <10 run values>" for a live ACTIVE run opened with the same deadline, TTL and
#   budgets, at any time (nothing written but the touch); "ERR INVALID_TRANSITION <now>
#   <10 run values>" for any other live run (other parameters, or cancelled/closed): the
#   client re-runs the kernel on the run the script refused; "CORRUPT NoTTL" for a run
#   found without expiry (nothing written).
OPEN_RUN_SCRIPT: Final = f"""{_SERVER_MS}{_EXPIRE_AT}
local server = ARGV[1] == ''
local now = server and server_ms() or tonumber(ARGV[1])
local at = string.format('%d', now)
local cur = {_HMGET_RUN}
if cur[6] and redis.call('PTTL', KEYS[1]) == -1 then return 'CORRUPT NoTTL' end
if cur[6] and now < tonumber(cur[6]) then
  if cur[2] ~= 'ACTIVE' then
    return 'ERR INVALID_TRANSITION ' .. at .. ' ' .. table.concat(cur, ' ')
  end
  for _, i in ipairs({{1, 4, 5, 6, 7, 8}}) do
    if cur[i] ~= ARGV[2 + i] then
      return 'ERR INVALID_TRANSITION ' .. at .. ' ' .. table.concat(cur, ' ')
    end
  end
  if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], 'status', cur[2]) end
  return 'EXISTING ' .. at .. ' ' .. table.concat(cur, ' ')
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
local px = tonumber(ARGV[8]) - now
if px > 0 then
  redis.call('HSET', KEYS[1],
    'run_id', ARGV[3], 'status', ARGV[4], 'opened_at_ms', at, 'deadline_ms', ARGV[6],
    'ttl_ms', ARGV[7], 'expires_at_ms', ARGV[8], 'tool_call_budget', ARGV[9],
    'byte_budget', ARGV[10], 'tool_calls_used', ARGV[11], 'bytes_used', ARGV[12])
  expire_at(KEYS[1], tonumber(ARGV[8]), now, server)
end
return 'FRESH ' .. at
"""

# Undo of an OPEN_RUN_SCRIPT "FRESH" (the fresh run of kernel ``open_run``) whose
# durability wait failed (CIS-DUR-2, CIS-DUR-14): a refused open leaves nothing
# behind, so that opening the run again (with any parameters) works.
# KEYS[1] - run HASH; KEYS[2] - done LIST; KEYS[3] - calls LIST
# ARGV[1] - the opened_at_ms the FRESH reply reported; ARGV[2] - the run's expires_at_ms
# return "DELETED" when the run is still the one that open wrote, with no call admitted
#   (the three keys are deleted); "KEPT" otherwise (another open or a create used it).
UNDO_OPEN_SCRIPT: Final = """
local cur = redis.call('HMGET', KEYS[1], 'opened_at_ms', 'expires_at_ms', 'tool_calls_used')
if cur[1] == ARGV[1] and cur[2] == ARGV[2] and cur[3] == '0' then
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
  return 'DELETED'
end
return 'KEPT'
"""

# Mirror of kernel ``cancel_run`` / ``close_run`` (CIS-RUN-2).
# KEYS[1] - run HASH
# ARGV[1] - now_ms, or "" to decide on the server's clock (TIME)
# ARGV[2] - the target status (kernel RUN_TRANSITIONS[(ACTIVE, operation)])
# return "OK <now> <10 run values before the change>" after setting status (TTL kept);
#   "ERR RUN_INACTIVE <now>" for an absent run; "ERR RUN_INACTIVE <now> <10 run values>"
#   for a lapsed one; "ERR INVALID_TRANSITION <now> <10 run values>" for a run that is
#   neither ACTIVE nor already in the target status (a retried cancel or close answers
#   like the first). The client re-runs the kernel on the run values of a refusal.
#   "CORRUPT NoTTL" for a run without expiry, "CORRUPT BadInteger" for a run whose
#   expiry is not an integer.
END_RUN_SCRIPT: Final = f"""{_IS_INT}{_SERVER_MS}
local cur = {_HMGET_RUN}
local left = redis.call('PTTL', KEYS[1])
if cur[6] and left == -1 then return 'CORRUPT NoTTL' end
if cur[6] and not is_int(cur[6]) then return 'CORRUPT BadInteger' end
local now = ARGV[1] ~= '' and tonumber(ARGV[1]) or server_ms()
local at = string.format('%d', now)
if not cur[6] then
  return 'ERR RUN_INACTIVE ' .. at
end
if now >= tonumber(cur[6]) then
  return 'ERR RUN_INACTIVE ' .. at .. ' ' .. table.concat(cur, ' ')
end
if cur[2] ~= 'ACTIVE' and cur[2] ~= ARGV[2] then
  return 'ERR INVALID_TRANSITION ' .. at .. ' ' .. table.concat(cur, ' ')
end
redis.call('HSET', KEYS[1], 'status', ARGV[2])
return 'OK ' .. at .. ' ' .. table.concat(cur, ' ')
"""

# Arguments: everything that is an id, a decimal, a code, a status or a mask (none
# contains a space) travels in ONE space-separated header argument, an empty value
# being an empty field (two spaces in a row); free text (tokens, tool names, requests,
# results) travels as separate arguments. Each extra argument costs the client more
# (redis-py packs and encodes it) than the one ``string.match`` that splits the header.

#: Order in which CREATE_SCRIPT reads (and replies) a run HASH: the three fields an
#: admission changes first, then the seven that never change after the run is opened,
#: so that the client can decode the constant tail once per run (see ``_redis_create``).
CREATE_RUN_ORDER: Final = (
    "status",
    "tool_calls_used",
    "bytes_used",
    "run_id",
    "opened_at_ms",
    "deadline_ms",
    "ttl_ms",
    "expires_at_ms",
    "tool_call_budget",
    "byte_budget",
)

# Mirror of kernel ``admit`` (CIS-PRE-8, CIS-STORE-2, CIS-RETRY-2), same order:
# same-token replay -> RUN_INACTIVE -> RUN_DEADLINE_EXCEEDED -> the duplicate code
# (kernel ``duplicate_code``: DUPLICATE_TOOL_CALL, CALL_IN_PROGRESS or the record's
# STALE_PROJECTION / DURABILITY_NOT_REACHED) ->
# TOOL_BUDGET_EXHAUSTED -> INVALID_ARGUMENTS (request not UTF-8) -> RUN_BYTES_EXHAUSTED
# -> the code of the kernel's Begin transition (decided in Python: it does not depend
# on the run). A record or run whose expires_at_ms <= now is absent (CIS-TTL-4).
# KEYS[1] - run HASH; KEYS[2] - record HASH; KEYS[3] - calls LIST; KEYS[4] - raw STRING
# ARGV[1] - header "now size late tool_call_id run_id status touch":
#   now - now_ms, or empty: the server's clock (TIME, CIS-STORE-10); then a run or
#   record alive EXPIRY_SLACK_MS past its stored expiry has lost its TTL (NoTTL), with
#   a given now a run is checked with PTTL;
#   size - the request's UTF-8 bytes, empty if it has no UTF-8 form;
#   late - empty or the code the kernel's Begin gives for this request;
#   tool_call_id - empty if not a safe id (then no record can exist, KEYS[2] and
#   KEYS[4] are not read, and late is set); run_id, status - the kernel's Begin record
#   (sequence, times and expires_at_ms depend on the run and the clock: computed here),
#   empty when nothing can be written; touch - "1" in a waiting durability mode (a
#   replay rewrites the record's token with itself, see the top)
# ARGV[2] - invocation token ("" never replays); ARGV[3] - tool_name;
# ARGV[4] - request_json
# return "OK <now> <10 run values before admission, CREATE_RUN_ORDER>" after writing
#   the record with sequence = tool_calls_used + 1, created_at_ms = updated_at_ms =
#   now, expires_at_ms = now + ttl_ms, lapsing then (the record is new: its TTL is set
#   exactly once; a leftover that the clock already expired is deleted first, with its
#   raw response), counting the call and its bytes in the run, and appending the id to
#   the calls LIST (its first write: a foreign type there writes nothing);
#   {"REPLAY <now> <10 run values, CREATE_RUN_ORDER>", <"1" raw | "0">, <raw or "">,
#   <record field/value pairs>} when the live record carries this token and the run
#   is live (nothing written but the touch); "ERR <code> <now> <10 run values,
#   CREATE_RUN_ORDER>" otherwise, or "ERR RUN_INACTIVE <now>" when there is no run
#   (nothing written): the client re-runs the kernel on the run the script refused, at
#   the time it reports; "CORRUPT <why>" (nothing written) for a run or record without
#   expiry (NoTTL), a calls key that is not a LIST (ForeignKey) or a run whose counters
#   are not integers (BadInteger), checked before the first write.
# Hot path (a fresh record in a live run): 7 redis.call (TIME, HMGET run, HMGET record,
#   RPUSH, HSET record, PEXPIREAT record, HSET run; with a given now, PTTL of the run
#   instead of TIME and PEXPIRE instead of PEXPIREAT).
CREATE_SCRIPT: Final = f"""{_IS_INT}{_PUSH}{_SERVER_MS}{_EXPIRE_AT}
local now, size, late, tcid, rid, status, touch = string.match(ARGV[1],
  '^(%S*) (%S*) (%S*) (%S*) (%S*) (%S*) (%S*)$')
local server = now == ''
local run = redis.call('HMGET', KEYS[1], {", ".join(f"'{name}'" for name in CREATE_RUN_ORDER)})
if server then
  now = server_ms()
else
  now = tonumber(now)
  if run[8] and redis.call('PTTL', KEYS[1]) == -1 then return 'CORRUPT NoTTL' end
end
if run[8] and not is_int(run[8]) then return 'CORRUPT BadInteger' end
if server and run[8] and now >= tonumber(run[8]) + {EXPIRY_SLACK_MS} then return 'CORRUPT NoTTL' end
local at = string.format('%d', now)
if not run[8] then return 'ERR RUN_INACTIVE ' .. at end
local run_live = now < tonumber(run[8])
local live = false
local leftover = false
if tcid ~= '' then
  local found = redis.call('HMGET', KEYS[2], 'invocation_token', 'expires_at_ms', 'status', 'error_code')
  leftover = found[1] or found[2]
  if found[2] and not is_int(found[2]) then return 'CORRUPT BadInteger' end
  if server and found[2] and now >= tonumber(found[2]) + {EXPIRY_SLACK_MS} then return 'CORRUPT NoTTL' end
  if leftover and redis.call('PTTL', KEYS[2]) == -1 then return 'CORRUPT NoTTL' end
  if found[2] and now < tonumber(found[2]) then live = found end
end
if live and run_live and ARGV[2] ~= '' and live[1] == ARGV[2] then
  if touch ~= '' then redis.call('HSET', KEYS[2], 'invocation_token', live[1]) end
  local raw = redis.call('GET', KEYS[4])
  local reply = {{'REPLAY ' .. at .. ' ' .. table.concat(run, ' '), raw and '1' or '0', raw or ''}}
  local record = redis.call('HGETALL', KEYS[2])
  for i = 1, #record do reply[3 + i] = record[i] end
  return reply
end
local seen = ' ' .. at .. ' ' .. table.concat(run, ' ')
if not run_live or run[1] ~= 'ACTIVE' then return 'ERR RUN_INACTIVE' .. seen end
if now >= tonumber(run[6]) then return 'ERR RUN_DEADLINE_EXCEEDED' .. seen end
if live then
  -- kernel duplicate_code: the existing record's fate
  local dup = 'DUPLICATE_TOOL_CALL'
  if live[3] == 'PROJECTING' then dup = 'CALL_IN_PROGRESS'
  elseif live[3] == 'ERROR' and (live[4] == 'STALE_PROJECTION' or live[4] == 'DURABILITY_NOT_REACHED') then
    dup = live[4]
  end
  return 'ERR ' .. dup .. seen
end
local used = tonumber(run[2]) + 1
if used > tonumber(run[9]) then return 'ERR TOOL_BUDGET_EXHAUSTED' .. seen end
if size == '' then return 'ERR INVALID_ARGUMENTS' .. seen end
local bytes = tonumber(run[3]) + tonumber(size)
if bytes > tonumber(run[10]) then return 'ERR RUN_BYTES_EXHAUSTED' .. seen end
if late ~= '' or tcid == '' then return 'ERR ' .. late .. seen end
-- Last checks before the first write: nothing after the RPUSH can fail.
if not (is_int(run[2]) and is_int(run[3]) and is_int(run[7])) then
  return 'CORRUPT BadInteger'
end
local pushed = push(KEYS[3], tcid)
if not pushed then return 'CORRUPT ForeignKey' end
if type(pushed) == 'table' then return pushed end
if pushed == 1 then expire_at(KEYS[3], tonumber(run[8]), now, server) end
if leftover then redis.call('DEL', KEYS[2], KEYS[4]) end
local expires = now + tonumber(run[7])
local sequence = string.format('%d', used)
redis.call('HSET', KEYS[2], 'run_id', rid, 'tool_call_id', tcid, 'tool_name', ARGV[3],
  'invocation_token', ARGV[2], 'sequence', sequence, 'status', status,
  'request_json', ARGV[4], 'created_at_ms', at, 'updated_at_ms', at,
  'expires_at_ms', string.format('%d', expires))
expire_at(KEYS[2], expires, now, server)
redis.call('HSET', KEYS[1], 'tool_calls_used', sequence, 'bytes_used', string.format('%d', bytes))
return 'OK' .. seen
"""

# Mirror of kernel ``decide_complete`` plus the writes of a WRITE decision
# (CIS-STORE-3, CIS-TTL-3, CIS-RETRY-2, CIS-RUN-6).
# KEYS[1] - record HASH; KEYS[2] - run HASH; KEYS[3] - done LIST; KEYS[4] - raw STRING;
# KEYS[5] - staging STRING holding the new raw response (mask "T" only; absent otherwise)
# ARGV[1] - header "now status error_code updated charge done_id raw_size mask evidence
#   created expires sequence":
#   now - now_ms, or empty: the server's clock, read as expires_at_ms - PTTL of the
#   record (CIS-STORE-10), and a record key that exists is live (its TTL and its
#   expires_at_ms come from one script on one clock);
#   status, error_code, updated - after's (error_code may be empty);
#   charge - bytes to charge to the run (kernel run_usage_after);
#   done_id - the tool_call_id to append to the done LIST, empty unless after is
#   terminal; raw_size - with mask "K", the UTF-8 size of the raw response the store
#   must already hold (unchanged, so not resent), else empty;
#   mask - one letter per optional field in the order evidence_status, error_code,
#   raw_response, agent_result, scope: "S" set, "D" delete (after's value is None);
#   for raw_response also "T" take it from KEYS[5] and "K" keep the stored one;
#   evidence - after.evidence_status, or empty;
#   created, expires, sequence - before's created_at_ms, expires_at_ms and sequence:
#   the stored record must carry them too, or the caller's ``before`` is not the
#   record the kernel saw (kernel ``decide_complete`` compares the whole identity)
# ARGV[2] - before.invocation_token; ARGV[3] - raw response ("S"), ARGV[4] -
#   agent_result, ARGV[5] - scope ("" when not "S"); ARGV[6] - before.tool_name,
#   ARGV[7] - before.request_json (free text, so not in the header): with the
#   header's created/expires/sequence and the token, the whole identity of
#   ``before`` is compared with the stored record, as kernel ``decide_complete`` does
# return "WRITE" after HSET status/updated_at_ms and the "S" fields and HDEL of the
#   "D" fields present in KEYS[1] (its TTL is kept: no expire command touches it); the raw
#   STRING is written ("S": SET, "T": RENAME from KEYS[5]) lapsing with the record
#   (PXAT / PEXPIREAT its expiry, see the top), or deleted ("D"); the bytes are
#   charged and the id appended to the done LIST when the run is live (the LIST's
#   expiry is set once, at its creation, to the run's expires_at_ms; the append is
#   the first write, so a foreign type there writes nothing);
#   {"REPLAY", <"1" raw | "0">, <raw or "">, <record field/value pairs>} when the
#   stored record is already terminal with after's status, error code and update
#   time; "RESEND" when a kept raw response is missing or not of size raw_size, or
#   a staged one is missing (the caller sends it in full); otherwise (absent, lapsed,
#   another invocation, completed differently) "ERR INVALID_TRANSITION" when there is
#   no record, else {"ERR INVALID_TRANSITION", <record field/value pairs>}: the client
#   re-runs kernel ``decide_complete`` on the record the script refused against;
#   "CORRUPT <why>" for a PROJECTING record without expiry or a live run without
#   expiry (NoTTL), run counters that are not integers (BadInteger), a done key that
#   is not a LIST (ForeignKey), all checked before the first write. Nothing is written
#   but the WRITE, and KEYS[5] never survives the script.
# Hot path (a PROJECTING record completed with a small raw response): 7 redis.call
#   (HMGET record, PTTL record, HMGET run, RPUSH, HSET record, SET raw, HINCRBY run);
#   with a given now, PEXPIRETIME record too (TIME on Redis 6.2).
COMPLETE_SCRIPT: Final = f"""{_IS_INT}{_PUSH}{_SERVER_MS}{_EXPIRE_AT}
local now, status, code, updated, charge, done_id, raw_size, mask, evidence, b_created, b_expires, b_seq =
  string.match(ARGV[1], '^(%S*) (%S*) (%S*) (%S*) (%S*) (%S*) (%S*) (%S*) (%S*) (%S*) (%S*) (%S*)$')
local server = now == ''
now = tonumber(now)
local raw_op = string.sub(mask, 3, 3)
local s = redis.call('HMGET', KEYS[1], 'status', 'invocation_token', 'error_code',
  'updated_at_ms', 'expires_at_ms', 'evidence_status', 'agent_result', 'scope',
  'created_at_ms', 'sequence', 'tool_name', 'request_json')
if not s[5] or (not server and now >= tonumber(s[5])) or s[2] ~= ARGV[2]
    or s[5] ~= b_expires or s[9] ~= b_created or s[10] ~= b_seq
    or s[11] ~= ARGV[6] or s[12] ~= ARGV[7] then
  if raw_op == 'T' then redis.call('DEL', KEYS[5]) end
  if not s[5] then return 'ERR INVALID_TRANSITION' end
  local refused = {{'ERR INVALID_TRANSITION'}}
  local record = redis.call('HGETALL', KEYS[1])
  for i = 1, #record do refused[1 + i] = record[i] end
  return refused
end
if s[1] == 'PROJECTING' then
  -- Every check before the first write (RPUSH, then HDEL/HSET): nothing after them can fail.
  -- A raw response written below lapses with the record, never after it: at the record's
  -- expiry on the server's clock. On that clock it is expires_at_ms (the create set it so);
  -- with a given clock, PEXPIRETIME (Redis 7.0+), else TIME read before the PTTL plus it.
  local expiry, before_pttl = false, false
  if server then
    expiry = tonumber(s[5])
  elseif raw_op == 'S' or raw_op == 'T' then
    expiry = redis.pcall('PEXPIRETIME', KEYS[1])
    if type(expiry) ~= 'number' then expiry, before_pttl = false, server_ms() end
  end
  local left = redis.call('PTTL', KEYS[1])
  if before_pttl then expiry = before_pttl + left end
  local run = redis.call('HMGET', KEYS[2], 'expires_at_ms', 'bytes_used')
  local corrupt = false
  if left == -1 then
    corrupt = 'NoTTL'
  elseif run[1] and not (is_int(run[1]) and is_int(run[2])) then
    corrupt = 'BadInteger'
  end
  if server then now = tonumber(s[5]) - left end
  local run_live = not corrupt and run[1] and now < tonumber(run[1])
  if not corrupt and run[1] and not run_live then
    if server and now >= tonumber(run[1]) + {EXPIRY_SLACK_MS} then corrupt = 'NoTTL' end
  elseif run_live and not server and redis.call('PTTL', KEYS[2]) == -1 then
    corrupt = 'NoTTL'
  end
  if corrupt then
    if raw_op == 'T' then redis.call('DEL', KEYS[5]) end
    return 'CORRUPT ' .. corrupt
  end
  if raw_op == 'K' then
    local held = redis.call('STRLEN', KEYS[4])
    if held ~= tonumber(raw_size) or (held == 0 and redis.call('EXISTS', KEYS[4]) == 0) then
      return 'RESEND'
    end
  elseif raw_op == 'T' and redis.call('EXISTS', KEYS[5]) == 0 then
    return 'RESEND'
  end
  if run_live and done_id ~= '' then
    local pushed = push(KEYS[3], done_id)
    if not pushed then
      if raw_op == 'T' then redis.call('DEL', KEYS[5]) end
      return 'CORRUPT ForeignKey'
    end
    if type(pushed) == 'table' then return pushed end
    if pushed == 1 then expire_at(KEYS[3], tonumber(run[1]), now, server) end
  end
  -- after's optional fields, in mask order: "S" (byte 83) sets one, else a stored one is deleted
  local sets, n, dels = {{'status', status, 'updated_at_ms', updated}}, 4, {{}}
  if string.byte(mask, 1) == 83 then sets[n + 1], sets[n + 2], n = 'evidence_status', evidence, n + 2
  elseif s[6] then dels[#dels + 1] = 'evidence_status' end
  if string.byte(mask, 2) == 83 then sets[n + 1], sets[n + 2], n = 'error_code', code, n + 2
  elseif s[3] then dels[#dels + 1] = 'error_code' end
  if string.byte(mask, 4) == 83 then sets[n + 1], sets[n + 2], n = 'agent_result', ARGV[4], n + 2
  elseif s[7] then dels[#dels + 1] = 'agent_result' end
  if string.byte(mask, 5) == 83 then sets[n + 1], sets[n + 2], n = 'scope', ARGV[5], n + 2
  elseif s[8] then dels[#dels + 1] = 'scope' end
  if #dels > 0 then redis.call('HDEL', KEYS[1], unpack(dels)) end
  redis.call('HSET', KEYS[1], unpack(sets))
  if raw_op == 'S' then
    redis.call('SET', KEYS[4], ARGV[3], 'PXAT', string.format('%d', expiry))
  elseif raw_op == 'T' then
    redis.call('RENAME', KEYS[5], KEYS[4])
    redis.call('PEXPIREAT', KEYS[4], string.format('%d', expiry))
  elseif raw_op == 'D' then
    redis.call('DEL', KEYS[4])
  end
  if run_live and charge ~= '0' then redis.call('HINCRBY', KEYS[2], 'bytes_used', charge) end
  return 'WRITE'
end
if raw_op == 'T' then redis.call('DEL', KEYS[5]) end
if s[1] == status and (s[3] or '') == code and s[4] == updated then
  local raw = redis.call('GET', KEYS[4])
  local reply = {{'REPLAY', raw and '1' or '0', raw or ''}}
  local record = redis.call('HGETALL', KEYS[1])
  for i = 1, #record do reply[3 + i] = record[i] end
  return reply
end
local refused = {{'ERR INVALID_TRANSITION'}}
local record = redis.call('HGETALL', KEYS[1])
for i = 1, #record do refused[1 + i] = record[i] end
return refused
"""

# A read, mirroring no kernel function: the progress fields of several records of one
# run in one call (CIS-PERF-3, CIS-PROG-5). One command instead of one HMGET per record
# spares the client one command encoding and the server one command dispatch each.
# KEYS[1..n] - record HASHes of one run (one hash tag: one slot)
# ARGV[1..9] - the field names, kernel PROGRESS_FIELDS in order
# return an array of 9 * n values: KEYS[i]'s fields at 9 * (i - 1) + 1 .. 9 * i, in
#   ARGV order, nil where a field (or the whole record) is absent. Writes nothing,
#   never touches a TTL (CIS-TTL-5).
PROGRESS_SCRIPT: Final = """
local f1, f2, f3, f4, f5, f6, f7, f8, f9 = unpack(ARGV, 1, 9)
local out, n = {}, 0
for i = 1, #KEYS do
  local v = redis.call('HMGET', KEYS[i], f1, f2, f3, f4, f5, f6, f7, f8, f9)
  out[n + 1], out[n + 2], out[n + 3], out[n + 4], out[n + 5] = v[1], v[2], v[3], v[4], v[5]
  out[n + 6], out[n + 7], out[n + 8], out[n + 9] = v[6], v[7], v[8], v[9]
  n = n + 9
end
return out
"""
