"""The synchronous boundary generated from ``../_async`` by scripts/unasync.py: do not edit by hand."""
