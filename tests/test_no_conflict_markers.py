"""No tracked text file carries an unresolved merge (a merge that kept both sides is a defect)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_MARKER = re.compile(r"^(<{7} |={7}$|>{7} )", re.MULTILINE)


def test_no_tracked_file_has_merge_conflict_markers() -> None:
    """Every tracked text file is free of ``<<<<<<<``/``=======``/``>>>>>>>`` lines."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    marked = []
    for name in filter(None, listed):
        path = ROOT / name.decode()
        if not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        if _MARKER.search(text):
            marked.append(str(path.relative_to(ROOT)))
    assert marked == [], f"unresolved merge conflict markers in {marked}"
