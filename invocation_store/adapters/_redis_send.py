"""How the Redis stores put their two hot scripts on the wire: the command packed in one call.

Shared by both flavours (``_async/redis.py`` and its generated twin), I/O-free: the
held connection that carries the packed command is the store's (``HeldConnection``
in ``_async/redis.py``). redis-py's own ``Connection.pack_command`` re-checks every
argument's type and encodes it through the client's ``Encoder`` before handing the
tuple to hiredis' packer; the store's arguments are already ``bytes`` or ``str``, so
when hiredis is installed and the client encodes text as strict UTF-8 (redis-py's
default) the tuple goes to hiredis' packer directly, which encodes ``str`` as UTF-8
itself. Any other client (another encoding, no hiredis) packs through redis-py.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, Final

__all__ = ["HOLD_MIN_POOL", "pack"]


def _hiredis_packer() -> Callable[[tuple[bytes | str, ...]], bytes] | None:
    """hiredis' packer (``bytes``/``str`` arguments, ``str`` packed as UTF-8), None without hiredis."""
    try:  # hiredis is optional (extra ``hiredis``); redis-py packs without it
        hiredis = importlib.import_module("hiredis")
    except ImportError:  # pragma: no cover - the dev environment installs hiredis
        return None
    packer: Callable[[tuple[bytes | str, ...]], bytes] = hiredis.pack_command
    return packer


_hiredis_pack: Final = _hiredis_packer()

#: Encoder settings under which hiredis' packer writes the very bytes redis-py would.
_UTF8: Final = frozenset({("utf-8", "strict"), ("utf8", "strict"), ("UTF-8", "strict")})

#: A store holds one pool connection between its calls only on a pool that allows at
#: least this many connections: on a smaller one (a ``BlockingConnectionPool`` of 2,
#: say) the held connection would starve the store's other commands.
HOLD_MIN_POOL: Final = 8


def pack(connection: Any, args: tuple[bytes | str, ...]) -> list[bytes]:
    """The wire form of one command (``args``: ``bytes``/``str`` only) for ``connection``.

    hiredis' packer when installed and the connection's encoder is strict UTF-8;
    ``connection.pack_command`` otherwise. Raises ``UnicodeEncodeError`` (a
    ``ValueError``) for text without a UTF-8 form, as redis-py's encoder does.
    """
    encoder = connection.encoder
    if _hiredis_pack is not None and (encoder.encoding, encoder.encoding_errors) in _UTF8:
        return [_hiredis_pack(args)]
    command: list[bytes] = connection.pack_command(*args)
    return command
