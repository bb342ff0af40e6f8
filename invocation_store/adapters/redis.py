"""Redis stores: :class:`RedisStore` (``redis.Redis``) and :class:`AsyncRedisStore` (``redis.asyncio``).

Both apply what the kernel decides and hold no lifecycle rule of their own
(CIS-LIFE-4): every write is one Lua script from ``_redis_scripts.py`` that mirrors a
kernel function, and the value returned is the kernel's answer on the state the
script saw (``_redis_core.py``). One successful invocation costs two round trips,
``create`` and ``complete`` (CIS-STORE-9); a raw response over 16 KiB rides in the
same round trip as ``complete``, as a plain ``SET`` to a staging key that the script
renames into place (see ``_redis_scripts.py`` for the layout and why). Reads are
plain ``HGETALL``/``GET``/``HMGET``/``LRANGE``/``PTTL`` (a record with its raw
response checked by a double collect in one pipeline, ``_redis_reads``), one round
trip each, never an expire command (CIS-TTL-5).

Scripts are registered once through redis-py ``Script`` objects (CIS-STORE-5). The
two hot scripts (create, complete) are sent as ``EVALSHA`` straight through the
client's ``execute_command`` with pre-encoded keys and header, which spares redis-py's
``Script`` wrapper its argument copies; after ``NOSCRIPT`` (``SCRIPT FLUSH``, a
restarted server) the server is checked again, the scripts loaded and the call
retried once. A cluster client goes through the ``Script`` object, which routes by the
keys. The first write checks the server (``_redis_server``: version >= 6.2, an
eviction policy that cannot evict the store's keys, every command the scripts use,
what the durability mode needs; CIS-STORE-7, CIS-DUR-3, CIS-DUR-6) and loads the
scripts, in one pipelined round trip per primary. Reads need neither ``INFO`` nor
scripts, so a user with ``+@read`` rights alone can read (CIS-DUR-9); the first read of
a store that has not written asks the version with ``HELLO`` (which needs no rights,
one extra round trip, once) so that a server below 6.2 is refused on reads too
(CIS-STORE-7, CIS-DUR-8).

Durability (CIS-DUR-2): in a waiting mode the run open and the create are pipelined
with ``WAIT``/``WAITAOF`` on the connection that wrote them (on a cluster, the client
of the node owning the run's slot); a create that misses the mode is refused before
its executor can run. redis-py's asyncio cluster client has no pipeline on one node's
connection, so :class:`AsyncRedisStore` refuses a waiting mode on it (``ValueError``
when built); the blocking cluster client supports it.

Failures: transient ones (connection loss, timeouts, TRYAGAIN, MOVED/ASK,
CLUSTERDOWN, READONLY) are resent within ``retry_policy`` (``_redis_retry``,
CIS-DUR-4). Then every redis-py, connection, timeout, encoding or decoding failure, and
every reply that is not what the store wrote (a record of another run or call,
CIS-STORE-6), raises :class:`~invocation_store.adapters.StoreUnavailableError`
without chaining the original exception; only exception *type* names are logged
(CIS-FAIL-5, CIS-ERR-2). Keys, URLs, passwords and payloads never appear in an
exception or a log line.

Clocks (CIS-STORE-10): every decision that compares times is taken by a script on the
server's clock (``TIME``, or for a completion the record's own TTL), which stamps what
it writes and reports the time it decided at; ``now_ms()`` is a lower bound of server
``TIME`` (``_redis_clock``), so hosts whose clocks differ decide alike. Before its first
reading of ``TIME`` a store's ``now_ms()`` may answer the host's wall clock (the asyncio
store cannot wait for one there): that answer is for arithmetic only, and every
decision the store or the boundary takes on a time comes from ``synced_now_ms()``,
which reads ``TIME`` first (a read with no reading judges a key Redis returned as
live). A store given a clock (``clock=``) decides at that clock instead and passes it
to every script, so an injected fake clock behaves exactly as with
:class:`~invocation_store.adapters.MemoryStore`; Redis' own TTL (real time) removes the
data. Integers must stay below 2**53 (Lua numbers).

Layout: :class:`AsyncRedisStore` is written once, in ``_async/redis.py``;
:class:`RedisStore` in ``_sync/redis.py`` is generated from it by
``scripts/unasync.py`` (``tests/test_unasync.py`` fails when it is stale). What the
two flavours do differently (reaching every cluster primary, ``WAIT`` on a cluster,
sleeping between retries) is in ``_redis_flavour.py``; the key layout is in
``_redis_keys.py``; the I/O-free planning and decoding, one module per operation, are
indexed by ``_redis_core.py``.
"""

from __future__ import annotations

from ._async.redis import AsyncRedisStore
from ._redis_common import DEFAULT_PREFIX, DEFAULT_TIMEOUT_S
from ._redis_retry import RetryPolicy
from ._redis_server import Durability, UnsafeServerError, UnsupportedRedisError
from ._sync.redis import RedisStore

__all__ = [
    "DEFAULT_PREFIX",
    "DEFAULT_TIMEOUT_S",
    "AsyncRedisStore",
    "Durability",
    "RedisStore",
    "RetryPolicy",
    "UnsafeServerError",
    "UnsupportedRedisError",
]
