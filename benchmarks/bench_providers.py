"""Benchmark: size first for provider object arguments, typed objects, JSON text and transcripts (CIS-SIZE-2).

Cases, each in a fresh subprocess; the input is built before the clock starts, then
the peak resident set size is reset (Linux ``/proc/self/clear_refs``), so the growth
reported is the peak during the parse over the RSS before it (Linux only):

- ``--mb`` MB (default 137) of object arguments (rows of about 100 bytes), parsed by
  the provider's ``envelopes_from_*`` and checked by preflight under the default
  256 KiB limit, for each provider (Chat: a 137 MB ``arguments`` string) in three
  forms: ``dict`` (the decoded turn), ``typed`` (the SDK's own object: an Anthropic
  ``Message``, a Gemini ``GenerateContentResponse``, a Responses ``Response`` holding
  a ``shell_call``, a ``ChatCompletion``) and ``text`` (the turn's JSON text);
  ``--baseline`` adds a plain ``json.dumps`` of the same object;
- a list of 10^6 zeros as Anthropic ``input``;
- a 250 KB object, admitted (the whole walk under the limit), beside ``json.dumps``;
- ``invocation-store replay`` of a ``--transcript-mb`` MB (default 153) Anthropic
  transcript, refused by the default transcript limit, and the same transcript's text
  through the API (``TranscriptFormat.envelopes_from_transcript``).

Before issue 21: 137 MB took 47 s (Anthropic) and 75 s (Gemini) and 525 MB more
memory; 10^6 zeros 4.2 s; the 153 MB replay 11 s and 2.2 GB.
Run: ``.venv/bin/python benchmarks/bench_providers.py [--mb 137] [--baseline] [--only typed,text]``.
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
import gc, json, sys, time
from invocation_store import (Limits, RunContext, envelopes_from_anthropic, envelopes_from_gemini,
                              envelopes_from_openai_chat, envelopes_from_openai_responses)
from invocation_store.kernel import ToolPolicy, check_envelope

def rss(field):
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field + ":"))

provider, form, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
row = "y" * 80
if provider == "zeros":
    value = {"xs": [0] * 1_000_000}
    provider = "anthropic"
elif form == "text":
    value = "__VALUE__"  # the text is written without building the object (see below)
else:
    value = {"rows": [{"id": i, "text": row} for i in range(size // 100)]}
if provider == "anthropic":
    turn = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "stop_reason": "tool_use",
            "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1},
            "content": [{"type": "tool_use", "id": "t1", "name": "q", "input": value}]}
    parse, name = envelopes_from_anthropic, "q"
elif provider == "gemini":
    turn = {"candidates": [{"content": {"role": "model", "parts": [
        {"functionCall": {"id": "g1", "name": "q", "args": value}}]}, "finishReason": "STOP", "index": 0}]}
    parse, name = envelopes_from_gemini, "q"
elif provider == "responses":
    action = {"commands": ["ls"], "rows": value if form == "text" else value["rows"]}
    turn = {"id": "r", "object": "response", "created_at": 1, "status": "completed", "model": "m",
            "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "output": [{"type": "shell_call", "id": "sh_1", "call_id": "s1", "status": "completed",
                        "action": action}]}
    parse, name = envelopes_from_openai_responses, "shell_call"
else:
    arguments = value if form == "text" else json.dumps(value)
    turn = {"id": "c", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant",
            "content": None, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "q", "arguments": arguments}}]}}]}
    parse, name = envelopes_from_openai_chat, "q"
if form == "typed":
    if provider == "anthropic":
        import anthropic
        subject = anthropic.types.Message.model_validate(turn)
    elif provider == "gemini":
        from google.genai import types
        subject = types.GenerateContentResponse.model_validate(turn)
    elif provider == "responses":
        import openai
        subject = openai.types.responses.Response.model_validate(turn)
    else:
        import openai
        subject = openai.types.chat.ChatCompletion.model_validate(turn)
    del turn, value
elif form == "text":
    rows = ", ".join(f'{{"id": {i}, "text": "{row}"}}' for i in range(size // 100))
    body = "[" + rows + "]" if provider == "responses" else '{"rows": [' + rows + "]}"
    del rows
    if provider == "chat":
        body = json.dumps(body)
    subject = json.dumps(turn).replace('"__VALUE__"', body)
    del turn, value, body
else:
    subject = turn
gc.collect()
# The peak resident set is reset here (Linux clear_refs), so the growth is the parse's own.
with open("/proc/self/clear_refs", "w") as refs:
    refs.write("5")
before = rss("VmRSS")
start = time.perf_counter()
cpu = time.process_time()
if form == "dumps":
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    code = f"{len(text)} characters"
else:
    try:
        (envelope,) = parse(subject, "run-1")
        policy = ToolPolicy(name=name, authorized=True, read_only=True)
        code = str(check_envelope(RunContext(run_id="run-1"), envelope, policy, Limits()))
    except ValueError as exc:
        code = "ValueError (text limit)" if "max_text_bytes" in str(exc) else "ValueError (other)"
elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
print(json.dumps({"code": code, "seconds": elapsed, "cpu": cpu, "growth_kib": rss("VmHWM") - before,
                  "input_mb": len(subject) / 1e6 if isinstance(subject, str) else None}))
"""

PEAK = r"""
def rss(field):
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field + ":"))

def reset_peak():
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")
    return rss("VmRSS")
"""

REPLAY = (
    PEAK
    + r"""
import json, sys, time
from invocation_store.cli import main
before = reset_peak()
start = time.perf_counter()
status = main(["replay", sys.argv[1]])
elapsed = time.perf_counter() - start
print(json.dumps({"code": f"exit {status}", "seconds": elapsed, "growth_kib": rss("VmHWM") - before}))
"""
)

TRANSCRIPT_API = (
    PEAK
    + r"""
import json, sys, time
from pathlib import Path
from invocation_store.providers import transcript_format
text = Path(sys.argv[1]).read_text(encoding="utf-8")
before = reset_peak()
start = time.perf_counter()
try:
    found = transcript_format("anthropic").envelopes_from_transcript(text, "run-1")
    code = f"{len(found)} envelopes"
except ValueError as exc:
    code = "ValueError (text limit)" if "max_text_bytes" in str(exc) else "ValueError (other)"
elapsed = time.perf_counter() - start
print(json.dumps({"code": code, "seconds": elapsed, "growth_kib": rss("VmHWM") - before}))
"""
)

PROVIDERS = ("anthropic", "gemini", "responses", "chat")
FORMS = ("dict", "typed", "text")


def _child(script: str, *args: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _report(label: str, figure: str, found: dict[str, object]) -> None:
    seconds, growth = float(found["seconds"]), int(found["growth_kib"]) / 1024  # type: ignore[arg-type, call-overload]
    if found.get("input_mb"):
        label += f" ({found['input_mb']:.0f} MB of text)"
    print(f"{label}: {found['code']} in {seconds * 1000:.1f} ms wall, peak RSS grew {growth:.0f} MiB")
    print(f"FIGURE {figure}_ms {seconds * 1000:.1f}")
    print(f"FIGURE {figure}_rss_growth_mib {growth:.0f}")


def main() -> int:
    """Run each case and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=137)
    parser.add_argument("--transcript-mb", type=int, default=153)
    parser.add_argument("--baseline", action="store_true", help="also time a plain json.dumps")
    parser.add_argument("--only", default=",".join(FORMS), help="forms to run (dict,typed,text)")
    args = parser.parse_args()
    size = args.mb * 1000 * 1000
    forms = [f for f in args.only.split(",") if f in FORMS]
    for form in forms:
        for provider in PROVIDERS:
            found = _child(CHILD, provider, form, str(size))
            _report(f"{args.mb} MB {form} turn, {provider}", f"{form}_{provider}_{args.mb}mb", found)
    if args.baseline:
        _report(
            f"{args.mb} MB object, json.dumps",
            f"dumps_{args.mb}mb",
            _child(CHILD, "anthropic", "dumps", str(size)),
        )
    _report("10^6 zeros, anthropic", "object_zeros_1e6", _child(CHILD, "zeros", "dict", "0"))
    # Just under the default limit: the measured writer does all the work (a plain
    # json.dumps of the same object beside it, for the cost of writing in Python).
    _report(
        "250 KB object (admitted), anthropic",
        "object_within_250kb",
        _child(CHILD, "anthropic", "dict", "250000"),
    )
    _report(
        "250 KB object, json.dumps",
        "object_within_250kb_dumps",
        _child(CHILD, "anthropic", "dumps", "250000"),
    )
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
        _report(
            f"envelopes_from_transcript of the {megabytes:.0f} MB text",
            "transcript_api",
            _child(TRANSCRIPT_API, str(path)),
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
