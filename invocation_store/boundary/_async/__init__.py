"""The boundary written once, as asyncio code; ``../_sync`` is generated from it by scripts/unasync.py."""
