"""Benchmark: preflight of oversized arguments, refused by size before parsing (CIS-SIZE-2, CIS-PRE-2).

Builds arguments of ``--mb`` MB (default 137: a JSON object holding one long string,
ASCII, then the same with two-byte characters) and times ``check_envelope`` under
the default 256 KiB request limit, in a fresh subprocess per case so that its peak
resident set size (``ru_maxrss``) is the case's alone. Before size was checked
first, 137 MB of arguments were parsed in full (23.8 s, 1.8 GB) before being refused.
Run: ``.venv/bin/python benchmarks/bench_preflight_size.py [--mb 137]``. Prints
``FIGURE`` lines. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time
from invocation_store.kernel import Limits, RunContext, ToolCallEnvelope, ToolPolicy, check_envelope

size, char = int(sys.argv[1]), sys.argv[2]
text = '{"q":"' + char * (size // len(char.encode("utf-8"))) + '"}'
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
envelope = ToolCallEnvelope(run_id="run-1", tool_call_id="call_1", tool_name="search", arguments=text)
policy = ToolPolicy(name="search", authorized=True, read_only=True)
start = time.perf_counter()
code = check_envelope(RunContext(run_id="run-1"), envelope, policy, Limits())
elapsed = time.perf_counter() - start
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"code": str(code), "seconds": elapsed, "rss_before_kib": before, "rss_after_kib": after}))
"""


def main() -> int:
    """Run each case and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=137)
    args = parser.parse_args()
    size = args.mb * 1000 * 1000
    for label, char in (("ascii", "x"), ("two-byte", "\u00e9")):
        result = subprocess.run(
            [sys.executable, "-c", CHILD, str(size), char], capture_output=True, text=True, check=True
        )
        figures = json.loads(result.stdout)
        growth = (figures["rss_after_kib"] - figures["rss_before_kib"]) / 1024
        print(
            f"{args.mb} MB of {label} arguments: {figures['code']} in {figures['seconds'] * 1000:.1f} ms, "
            f"peak RSS grew {growth:.0f} MiB during the check"
        )
        print(f"FIGURE preflight_{label}_{args.mb}mb_ms {figures['seconds'] * 1000:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
