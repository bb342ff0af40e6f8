"""Benchmark: size first for provider object arguments and transcripts (CIS-SIZE-2).

Cases, each in a fresh subprocess so that its peak resident set size (``ru_maxrss``)
is the case's alone; the input is built before the clock starts and its RSS before
the parse is subtracted:

- ``--mb`` MB (default 137) of object arguments as Anthropic ``input``, Gemini
  ``args`` and an OpenAI Responses ``shell_call`` action (rows of about 100 bytes),
  parsed by the provider's ``envelopes_from_*`` and checked by preflight under the
  default 256 KiB limit; ``--baseline`` adds a plain ``json.dumps`` of the same object
  (what round 2's parsers cost at least);
- a list of 10^6 zeros as Anthropic ``input``;
- a 250 KB object, admitted (the whole walk under the limit), beside ``json.dumps``;
- ``invocation-store replay`` of a ``--transcript-mb`` MB (default 153) Anthropic
  transcript, refused by the default transcript limit.

Before issue 21: 137 MB took 47 s (Anthropic) and 75 s (Gemini) and 525 MB more
memory; 10^6 zeros 4.2 s; the 153 MB replay 11 s and 2.2 GB.
Run: ``.venv/bin/python benchmarks/bench_providers.py [--mb 137] [--baseline]``.
Prints ``FIGURE`` lines. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, resource, sys, time
from invocation_store import (Limits, RunContext, envelopes_from_anthropic, envelopes_from_gemini,
                              envelopes_from_openai_responses)
from invocation_store.kernel import ToolPolicy, check_envelope

case, size = sys.argv[1], int(sys.argv[2])
if case == "zeros":
    value = {"xs": [0] * 1_000_000}
else:
    row = "y" * 80
    value = {"rows": [{"id": i, "text": row} for i in range(size // 100)]}
if case in ("anthropic", "zeros", "within"):
    turn = {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "q", "input": value}]}
    parse, name = envelopes_from_anthropic, "q"
elif case == "gemini":
    turn = {"role": "model", "parts": [{"functionCall": {"id": "g1", "name": "q", "args": value}}]}
    parse, name = envelopes_from_gemini, "q"
elif case == "responses":
    turn = [{"type": "shell_call", "call_id": "s1", "action": value}]
    parse, name = envelopes_from_openai_responses, "shell_call"
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
cpu = time.process_time()
if case in ("dumps", "within-dumps"):
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    code = f"{len(text)} characters"
else:
    (envelope,) = parse(turn, "run-1")
    policy = ToolPolicy(name=name, authorized=True, read_only=True)
    code = str(check_envelope(RunContext(run_id="run-1"), envelope, policy, Limits()))
elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"code": code, "seconds": elapsed, "cpu": cpu, "growth_kib": after - before}))
"""

REPLAY = r"""
import json, resource, sys, time
from invocation_store.cli import main
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
status = main(["replay", sys.argv[1]])
elapsed = time.perf_counter() - start
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"code": f"exit {status}", "seconds": elapsed, "growth_kib": after - before}))
"""


def _child(script: str, *args: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _report(label: str, figure: str, found: dict[str, object]) -> None:
    seconds, growth = float(found["seconds"]), int(found["growth_kib"]) / 1024  # type: ignore[arg-type, call-overload]
    print(f"{label}: {found['code']} in {seconds * 1000:.1f} ms wall, peak RSS grew {growth:.0f} MiB")
    print(f"FIGURE {figure}_ms {seconds * 1000:.1f}")
    print(f"FIGURE {figure}_rss_growth_mib {growth:.0f}")


def main() -> int:
    """Run each case and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=137)
    parser.add_argument("--transcript-mb", type=int, default=153)
    parser.add_argument("--baseline", action="store_true", help="also time a plain json.dumps")
    args = parser.parse_args()
    size = args.mb * 1000 * 1000
    cases = ["anthropic", "gemini", "responses", *(["dumps"] if args.baseline else [])]
    for case in cases:
        _report(f"{args.mb} MB object, {case}", f"object_{case}_{args.mb}mb", _child(CHILD, case, str(size)))
    _report("10^6 zeros, anthropic", "object_zeros_1e6", _child(CHILD, "zeros", "0"))
    # Just under the default limit: the measured writer does all the work (a plain
    # json.dumps of the same object beside it, for the cost of writing in Python).
    _report("250 KB object (admitted), anthropic", "object_within_250kb", _child(CHILD, "within", "250000"))
    _report("250 KB object, json.dumps", "object_within_250kb_dumps", _child(CHILD, "within-dumps", "250000"))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "big.json"
        block = {"type": "tool_use", "id": "toolu_1", "name": "search_logs", "input": {"q": "y" * 1000}}
        count = args.transcript_mb * 1000 * 1000 // 1100
        with path.open("w", encoding="utf-8") as handle:
            handle.write('{"messages": [{"role": "assistant", "content": [')
            handle.write(", ".join(json.dumps({**block, "id": f"toolu_{i}"}) for i in range(count)))
            handle.write("]}]}")
        megabytes = path.stat().st_size / 1e6
        _report(f"replay of a {megabytes:.0f} MB transcript", "replay_transcript", _child(REPLAY, str(path)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
