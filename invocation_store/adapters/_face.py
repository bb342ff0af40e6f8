"""The asyncio face of a synchronous store, written once (CIS-STORE-1).

:class:`AsyncFace` is an :class:`~invocation_store.adapters.AsyncForwardingStore`
whose inner store is a synchronous one with each operation made awaitable by an
*offload* function: run inline for a store that never blocks on I/O (memory), on a
worker thread for one that does (SQLite). No operation is restated per flavour:
the forwarding store (generated both ways from one source) names every method once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, cast

from ._async.forwarding import AsyncForwardingStore
from ._async.protocol import AsyncInvocationStore
from ._sync.protocol import InvocationStore

__all__ = ["AsyncFace", "Offload", "inline", "on_thread"]

#: Runs ``method(*args, **kwargs)`` of a sync store and returns its result, awaitably.
Offload = Callable[..., Awaitable[Any]]


async def inline(method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call ``method`` in the event loop's thread: for stores whose operations never block on I/O."""
    return method(*args, **kwargs)


async def on_thread(method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call ``method`` on a worker thread (``asyncio.to_thread``): for stores that block on I/O."""
    return await asyncio.to_thread(method, *args, **kwargs)


class _Awaitable:
    """A sync store whose operations (all but the synchronous ``now_ms``) return awaitables."""

    def __init__(self, store: InvocationStore, offload: Offload) -> None:
        self._store = store
        self._offload = offload

    def now_ms(self) -> int:
        return self._store.now_ms()

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        method = getattr(self._store, name)

        def call(*args: Any, **kwargs: Any) -> Awaitable[Any]:
            return self._offload(method, *args, **kwargs)

        return call


class AsyncFace(AsyncForwardingStore):
    """An :class:`AsyncInvocationStore` over the synchronous store ``sync`` (kept as ``self.sync``).

    ``offload`` decides where each operation runs (:func:`inline` or :func:`on_thread`).
    Every operation keeps ``sync``'s contract exactly, including its thread safety:
    the face adds no state of its own.
    """

    def __init__(self, sync: InvocationStore, offload: Offload = inline) -> None:
        super().__init__(cast(AsyncInvocationStore, _Awaitable(sync, offload)))
        self.sync = sync
