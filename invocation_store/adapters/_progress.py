"""Progress reads, both flavours: the asyncio source (``_async/progress.py``) and its generated twin."""

from ._async.progress import AsyncProgressReader, async_progress_reader, async_read_progress
from ._sync.progress import ProgressReader, Views, progress_reader, read_progress

__all__ = [
    "AsyncProgressReader",
    "ProgressReader",
    "Views",
    "async_progress_reader",
    "async_read_progress",
    "progress_reader",
    "read_progress",
]
