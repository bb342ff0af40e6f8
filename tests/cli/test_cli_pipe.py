"""The CLI behaves like a Unix tool when its reader goes away."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_closed_stdout_is_not_a_traceback() -> None:
    """CIS-ERR-1: '... | head' ends quietly, never with a BrokenPipeError traceback."""
    command = (
        f"{sys.executable} -m invocation_store.cli replay "
        f"{ROOT / 'examples' / 'transcripts' / 'openai_chat.json'} --json | true"
    )
    result = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=120, check=False)
    assert "Traceback" not in result.stderr
    assert "BrokenPipeError" not in result.stderr
