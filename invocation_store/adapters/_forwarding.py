"""Stores that forward every operation to another: the base for store wrappers, both flavours.

:class:`AsyncForwardingStore` is written once (``_async/forwarding.py``);
:class:`ForwardingStore` is generated from it by ``scripts/unasync.py``.
"""

from ._async.forwarding import AsyncForwardingStore
from ._sync.forwarding import ForwardingStore

__all__ = ["AsyncForwardingStore", "ForwardingStore"]
