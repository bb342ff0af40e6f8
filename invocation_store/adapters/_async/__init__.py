"""asyncio sources of the adapters; ``../_sync`` is generated from them by scripts/unasync.py."""
