"""Boundary vectors: both sides of every decision rule of the kernel (CIS-SPEC-3).

Theory of operation
-------------------
:mod:`._vectors` covers the *shape* of the kernel: every table row, every illegal
pair, every pair of preflight checks. This module covers its *numbers*: for each
rule that compares a quantity with a limit it writes the vector just inside, at,
and just outside the limit (limit - 1, limit, limit + 1; an age equal to the sweep
threshold; a budget reached exactly), each I-JSON rule (CIS-JSON-1..6) on both
sides, each character class of an id, and for each rival reading of a rule that an
implementer could pick (counting characters instead of UTF-8 bytes, ages from the
last update instead of creation, a content-only agent result, ...) a vector that
the rival reading fails. The description of a vector names the reading it rules
out where there is one.

Documents (file name -> vector kinds):

- ``ids.json`` (``preflight``): every id character class, the blank code points;
- ``arguments.json`` (``preflight``): the request size and every I-JSON rule;
- ``admission.json`` (``preflight``): budgets, deadline, expiries, replays;
- ``limits.json`` (``transition``): record, raw and agent-result limits, blank
  scopes, sweep ages, record expiry;
- ``completion.json`` (``complete``): the compare-and-set and the byte charge;
- ``references.json`` (``cite``, ``progress``): citations and progress facts;
- ``run_lifecycle.json`` (``run``): open, re-open, cancel and close at their edges.

Every expected outcome is computed by the kernel; the recipes only choose inputs.

Size: data. One builder per decision rule, each writing out both sides of every
boundary of that rule; its length is the number of boundaries the spec pins down.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from attrs import evolve

from ..adapters._redis_keys import call_key, done_key, run_key
from ..kernel import (
    CanonicalRecord,
    ErrorCode,
    EvidenceStatus,
    Failed,
    InvocationStatus,
    Limits,
    Projection,
    ProjectionReceived,
    RawReceived,
    RunState,
    RunStatus,
    SweptStale,
    check_arguments,
    cite,
    decide_completion,
    is_well_formed,
    project_progress,
    transition,
)
from ._vectors import (
    _CALL,
    _LIMITS,
    _NOW,
    _REQUEST,
    _RUN,
    _TTL,
    _begin,
    _document,
    _limits_from_json,
    _run,
    _run_vector,
    _scenario,
    _transition_vector,
    event_json,
    preflight_outcome,
    record_from_json,
    record_json,
    run_from_json,
    run_json,
    run_vector,
)
from ._views import limits_view, progress_view

__all__ = ["RUNNERS", "rule_documents"]

#: Limits roomy enough that only the rule under test can fail.
_ROOMY: Final = evolve(_LIMITS, request_bytes=16_384, record_bytes=65_536)
_ADMIT_NOW: Final = _NOW + 1000


# ---------------------------------------------------------------------------
# Preflight-kind vectors


def _preflight(
    vector_id: str,
    requirements: list[str],
    description: str,
    *,
    envelope: dict[str, Any] | None = None,
    limits: Limits | None = None,
    run: RunState | str | None = "default",
    existing: CanonicalRecord | None = None,
    now_ms: int | None = None,
    token: str = "tok-new",  # noqa: S107 - a retry token, not a credential
) -> dict[str, Any]:
    inputs = _scenario(frozenset())
    if envelope:
        inputs["envelope"] = {**inputs["envelope"], **envelope}
    if limits is not None:
        inputs["limits"] = limits_view(limits)
    if run != "default":
        assert not isinstance(run, str)
        inputs["run"] = run_json(run)
    inputs["existing"] = record_json(existing)
    if now_ms is not None:
        inputs["now_ms"] = now_ms
    inputs["token"] = token
    return {
        "id": vector_id,
        "kind": "preflight",
        "requirements": requirements,
        "description": description,
        **inputs,
        "expect": preflight_outcome(inputs),
    }


def _ids_document() -> dict[str, Any]:
    vectors = []

    def add(label: str, value: Any, description: str, requirements: list[str]) -> None:
        vectors.append(_preflight(f"id/{label}", requirements, description, envelope={"tool_call_id": value}))

    safe = ["CIS-ID-1", "CIS-ID-4"]
    for label, value in [
        ("upper", "A"),
        ("lower", "z"),
        ("digit", "0"),
        ("underscore", "_"),
        ("hyphen", "-"),
        ("dot", "."),
        ("colon", ":"),
        ("every-class", "AZaz09_-.:"),
        ("openai", "call_abc123XYZ"),
        ("anthropic", "toolu_01A09q90qw90lq917835lq9"),
        ("bedrock", "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q"),
        ("mistral", "D681PevKs"),
        ("vllm", "chatcmpl-tool-0123abcd"),
        ("kimi", "functions.get_weather:0"),
        ("uuid", "123e4567-e89b-12d3-a456-426614174000"),
        ("length-127", "c" * 127),
        ("length-128", "c" * 128),
    ]:
        add(label, value, "a safe id: admitted, kept exactly", safe)
    add("length-129", "c" * 129, "129 characters: one over the 128 limit", ["CIS-ID-3"])
    missing = ["CIS-ID-2"]
    not_text: list[tuple[str, Any]] = [
        ("null", None),
        ("number", 7),
        ("true", True),
        ("list", ["call_1"]),
        ("empty", ""),
    ]
    for label, other in not_text:
        add(f"missing/{label}", other, "no id string at all", missing)
    blank = {
        "tab": "\t",
        "lf": "\n",
        "vt": "\x0b",
        "ff": "\x0c",
        "cr": "\r",
        "space": " ",
    }
    for label, value in blank.items():
        add(
            f"blank/{label}",
            value,
            f"only U+{ord(value):04X}, a blank code point: missing",
            missing,
        )
    add("blank/all-six", "\t\n\x0b\x0c\r ", "only the six blank code points: missing", missing)
    # Code points some languages call whitespace: not blank here, so unsafe.
    for value, why in [
        ("\u00a0", "NO-BREAK SPACE (Python str.isspace says whitespace)"),
        ("\u3000", "IDEOGRAPHIC SPACE (Java isWhitespace says whitespace)"),
        ("\u2003", "EM SPACE"),
        ("\u0085", "NEXT LINE"),
        ("\u1680", "OGHAM SPACE MARK"),
        ("\u2028", "LINE SEPARATOR"),
        ("\u200b", "ZERO WIDTH SPACE"),
        ("\ufeff", "BYTE ORDER MARK"),
        ("\x1c", "FILE SEPARATOR (Java isWhitespace and Python isspace say whitespace)"),
        ("\x1f", "UNIT SEPARATOR"),
    ]:
        add(
            f"not-blank/U+{ord(value):04X}",
            value,
            f"only U+{ord(value):04X} {why}: not a blank code point here, so unsafe, not missing",
            ["CIS-ID-2", "CIS-ID-3"],
        )
    unsafe = ["CIS-ID-3"]
    for label, value in [
        ("space-padded", " call_1"),
        ("trailing-space", "call_1 "),
        ("tab-padded", "\tcall_1"),
        ("trailing-lf", "call_1\n"),
        ("inner-space", "call 1"),
        ("nul", "call\x001"),
        ("del", "call\x7f"),
        ("latin-letter", "call_\u00e9"),
        ("fullwidth", "\uff43\uff41\uff4c\uff4c"),
        ("emoji", "call_\U0001f600"),
        ("lone-surrogate", "call_\ud800"),
    ]:
        add(f"unsafe/{label}", value, "outside A-Z a-z 0-9 _ - . :", unsafe)
    for char in "!\"#$%&'()*+,/;<=>?@[\\]^`{|}~":
        add(
            f"unsafe/U+{ord(char):04X}",
            f"call{char}1",
            f"ASCII {char!r} (U+{ord(char):04X}) is not in the safe set",
            unsafe,
        )
    return _document(
        "Identifier classes: a preflight vector per character class of a tool_call_id (safe: "
        "A-Z a-z 0-9 _ - . : and 1-128 characters; blank: only U+0009, U+000A, U+000B, U+000C, "
        "U+000D, U+0020, or empty). Run as preflight_order.json.",
        ["CIS-ID-1", "CIS-ID-2", "CIS-ID-3", "CIS-ID-4", "CIS-SPEC-3"],
        {"vectors": vectors},
    )


def _arguments_document() -> dict[str, Any]:
    vectors: list[dict[str, Any]] = []
    roomy_run = _run(byte_budget=1_000_000)

    def add(
        label: str, text: Any, description: str, requirements: list[str], limits: Limits = _ROOMY
    ) -> None:
        vectors.append(
            _preflight(
                f"arguments/{label}",
                requirements,
                description,
                envelope={"arguments": text},
                limits=limits,
                run=roomy_run,
            )
        )

    # Request size (CIS-SIZE-2), limit 64 bytes, decided before parsing (CIS-PRE-2).
    size = ["CIS-SIZE-1", "CIS-SIZE-2", "CIS-PRE-2"]
    for length in (63, 64, 65):
        text = '{"q":"' + "x" * (length - 8) + '"}'
        add(f"size/ascii-{length}", text, f"{length} bytes against a 64-byte limit", size, _LIMITS)
    add(
        "size/two-byte-64",
        '{"q":"' + "\u00e9" * 28 + '"}',
        "36 characters, 64 UTF-8 bytes (U+00E9 is 2 bytes): at the limit",
        size,
        _LIMITS,
    )
    add(
        "size/two-byte-66",
        '{"q":"' + "\u00e9" * 29 + '"}',
        "37 characters, 66 UTF-8 bytes: over the limit (a reading counting characters admits it)",
        size,
        _LIMITS,
    )
    add(
        "size/four-byte-68",
        '{"q":"' + "\U0001f600" * 15 + '"}',
        "15 supplementary characters (4 bytes each, 2 UTF-16 units): 68 bytes, over",
        size,
        _LIMITS,
    )
    add(
        "size/escape-counts-as-written",
        '{"q":"' + "\\u00e9" * 10 + '"}',
        "the text is measured as written: each \\u00e9 escape is 6 bytes, 68 in all, over",
        size,
        _LIMITS,
    )
    add(
        "size/lone-surrogates-3-bytes",
        '{"q":"' + "\ud800" * 20 + '"}',
        "20 raw lone surrogates count 3 bytes each: 68 bytes, REQUEST_TOO_LARGE before the "
        "I-JSON check (a reading counting UTF-16 units or a replacement byte says INVALID_ARGUMENTS)",
        size,
        _LIMITS,
    )
    add(
        "size/before-parsing",
        "[" * 65,
        "65 bytes of unbalanced brackets: too large, decided before any parsing",
        size,
        _LIMITS,
    )
    add("size/invalid-at-limit", "[" * 64, "64 bytes, not JSON: invalid arguments", size, _LIMITS)
    # CIS-JSON-1: exactly one JSON value, an object.
    one = ["CIS-JSON-1"]
    for label, text, description in [
        ("empty-object", "{}", "the smallest object"),
        ("json-whitespace", " \t\n\r{} \t\n\r", "JSON whitespace (U+0020, U+0009, U+000A, U+000D) around it"),
        ("vt-before", "\x0b{}", "U+000B is not JSON whitespace"),
        ("ff-before", "\x0c{}", "U+000C is not JSON whitespace"),
        ("nbsp-before", "\u00a0{}", "U+00A0 is not JSON whitespace"),
        ("bom", "\ufeff{}", "a leading byte order mark"),
        ("empty", "", "no value"),
        ("blank", "   ", "only whitespace"),
        ("array", "[]", "an array"),
        ("string", '"{}"', "a string"),
        ("number", "1", "a number"),
        ("null-text", "null", "the literal null"),
        ("true", "true", "the literal true"),
        ("two-objects", "{}{}", "two values"),
        ("trailing-data", "{} x", "trailing data"),
        ("unterminated", '{"a":1', "unterminated"),
        ("trailing-comma", '{"a":1,}', "a trailing comma"),
        ("single-quotes", "{'a':1}", "single-quoted names"),
        ("bare-name", "{a:1}", "an unquoted name"),
        ("comment", '{"a":1 /* c */}', "a comment"),
        ("raw-control", '{"a":"\x01"}', "a raw control character in a string"),
        ("escaped-control", '{"a":"\\u0001\\u0000"}', "escaped control characters are valid"),
    ]:
        add(f"object/{label}", text, description, one)
    add("object/not-a-string", {"q": 1}, "arguments that are not text at all", one)
    add("object/null", None, "no arguments", one)
    # CIS-JSON-2: no duplicate member names (after unescaping, per object).
    dup = ["CIS-JSON-2"]
    for label, text, description in [
        ("duplicate", '{"a":1,"a":1}', "the same name twice, even with the same value"),
        ("duplicate-escaped", '{"a":1,"\\u0061":2}', '"\\u0061" is "a": a duplicate after unescaping'),
        ("duplicate-nested", '{"x":{"b":1,"b":2}}', "a duplicate inside a nested object"),
        ("same-name-other-objects", '{"a":{"a":1},"b":[{"a":1},{"a":2}]}', "one name in several objects"),
        ("case-differs", '{"A":1,"a":2}', "names are compared exactly: A and a differ"),
        (
            "not-normalized",
            '{"\u00e9":1,"e\u0301":2}',
            "no Unicode normalization: U+00E9 and e + U+0301 differ",
        ),
    ]:
        add(f"names/{label}", text, description, dup)
    # CIS-JSON-3: numbers.
    num = ["CIS-JSON-3"]
    for label, text, description in [
        ("nan", '{"a":NaN}', "NaN is not JSON"),
        ("infinity", '{"a":Infinity}', "Infinity is not JSON"),
        ("minus-infinity", '{"a":-Infinity}', "-Infinity is not JSON"),
        ("nan-string", '{"a":"NaN"}', "the string NaN is fine"),
        ("max-double", '{"a":1.7976931348623157e308}', "the largest finite double"),
        ("rounds-to-max", '{"a":1.7976931348623158e308}', "rounds to the largest finite double"),
        ("rounds-to-infinity", '{"a":1.7976931348623159e308}', "rounds to infinity: overflow"),
        ("exponent-308", '{"a":1e308}', "finite"),
        ("exponent-309", '{"a":1e309}', "overflows a double"),
        ("negative-overflow", '{"a":-1e309}', "overflows a double"),
        ("underflow", '{"a":1e-400}', "underflows to zero: accepted"),
        ("fraction-overflow", '{"a":' + "9" * 400 + ".0}", "a 400-digit number with a fraction overflows"),
        ("long-fraction", '{"a":0.' + "1" * 5000 + "}", "5000 fraction digits: finite, accepted"),
        ("minus-zero", '{"a":-0}', "-0 is a number"),
        ("exponent-forms", '{"a":[1E2,1e+2,1e-2,-1.5E-3]}', "exponent forms"),
        ("leading-zero", '{"a":01}', "a leading zero is not JSON"),
        ("leading-dot", '{"a":.5}', "a leading dot is not JSON"),
        ("trailing-dot", '{"a":1.}', "a trailing dot is not JSON"),
        ("plus-sign", '{"a":+1}', "a plus sign is not JSON"),
        ("hex", '{"a":0x10}', "hexadecimal is not JSON"),
    ]:
        add(f"numbers/{label}", text, description, num)
    # CIS-JSON-6: integer literals of more than 4300 digits.
    digits = ["CIS-JSON-6"]
    for label, text, description in [
        ("4300-digits", '{"a":' + "1" * 4300 + "}", "an integer of 4300 digits: accepted"),
        ("4301-digits", '{"a":' + "1" * 4301 + "}", "an integer of 4301 digits: refused"),
        ("minus-4300-digits", '{"a":-' + "1" * 4300 + "}", "the sign is not a digit: 4300 digits, accepted"),
        ("minus-4301-digits", '{"a":-' + "1" * 4301 + "}", "4301 digits after the sign: refused"),
        ("400-digits", '{"a":' + "9" * 400 + "}", "an integer beyond every double: accepted (not a float)"),
        ("in-array", '{"a":[1,' + "2" * 4301 + "]}", "the limit applies to every integer in the document"),
    ]:
        add(f"integers/{label}", text, description, digits)
    # CIS-JSON-4: Unicode.
    uni = ["CIS-JSON-4"]
    for label, text, description in [
        ("escaped-pair", '{"a":"\\ud83d\\ude00"}', "an escaped surrogate pair is one character"),
        ("escaped-high", '{"a":"\\ud800"}', "an escaped lone high surrogate"),
        ("escaped-low", '{"a":"\\udc00"}', "an escaped lone low surrogate"),
        ("escaped-reversed", '{"a":"\\ude00\\ud83d"}', "low then high: two lone surrogates"),
        ("escaped-high-then-char", '{"a":"\\ud83dx"}', "a high surrogate not followed by a low one"),
        ("escaped-in-name", '{"\\ud800":1}', "a lone surrogate in a member name"),
        ("raw-lone", '{"a":"\ud800"}', "a raw lone surrogate in the text"),
        ("raw-supplementary", '{"a":"\U0001f600"}', "a supplementary character"),
        ("noncharacter", '{"a":"\uffff\\ufdd0"}', "noncharacters are valid Unicode scalar values: accepted"),
    ]:
        add(f"unicode/{label}", text, description, uni)
    # CIS-JSON-5: depth (limit 4), a scalar 0, a container 1 + its deepest member.
    depth = ["CIS-JSON-5"]
    for label, text, description in [
        ("depth-1", '{"a":1}', "depth 1"),
        ("depth-4", '{"a":{"b":{"c":{}}}}', "depth 4 = the limit"),
        ("depth-5", '{"a":{"b":{"c":{"d":{}}}}}', "depth 5: over the limit"),
        ("arrays-4", '{"a":[[[]]]}', "arrays count as objects do: depth 4"),
        ("arrays-5", '{"a":[[[[]]]]}', "depth 5"),
        ("siblings", '{"a":{},"b":{},"c":{},"d":{},"e":[],"f":[]}', "siblings do not add up: depth 2"),
        ("brackets-in-strings", '{"a":"[[[[[[{{{{{{"}', "brackets inside strings do not count"),
        ("escaped-quote", '{"a":"\\"[[[[[[[["}', "an escaped quote does not end the string"),
        ("closers-in-strings", '{"a":"]]]]}}}}","b":{"c":{"d":{}}}}', "closers in strings do not count"),
        (
            "depth-4-with-siblings",
            '{"a":{"b":{"c":{}}},"d":[]}',
            "depth 4 with six brackets in all: accepted",
        ),
        (
            "depth-5-after-sibling",
            '{"a":{},"b":{"c":{"d":{"e":{}}}}}',
            "a closed sibling does not lower the depth",
        ),
    ]:
        add(f"depth/{label}", text, description, depth)
    return _document(
        "The arguments text: its size in UTF-8 bytes against the request limit (decided before "
        "any parsing) and every I-JSON rule, each on both sides. Run as preflight_order.json.",
        [
            "CIS-SIZE-2",
            "CIS-JSON-1",
            "CIS-JSON-2",
            "CIS-JSON-3",
            "CIS-JSON-4",
            "CIS-JSON-5",
            "CIS-JSON-6",
            "CIS-SPEC-3",
        ],
        {"vectors": vectors},
    )


def _existing(token: str = "tok-first", *, expires_at_ms: int | None = None) -> CanonicalRecord:  # noqa: S107
    record = transition(None, _begin(_NOW, invocation_token=token), _LIMITS)
    assert isinstance(record, CanonicalRecord)
    return record if expires_at_ms is None else evolve(record, expires_at_ms=expires_at_ms)


def _duplicate_fates() -> list[tuple[str, str, CanonicalRecord]]:
    """ERROR records under the key and what kernel ``duplicate_code`` answers for each (CIS-ID-5)."""
    cases = []
    for code, description in (
        (ErrorCode.STALE_PROJECTION, "a swept record: the call was abandoned, its own code"),
        (ErrorCode.DURABILITY_NOT_REACHED, "a record the tool never ran for: its own code"),
        (ErrorCode.EXECUTION_FAILED, "the tool ran and failed: DUPLICATE_TOOL_CALL"),
    ):
        event = (
            SweptStale(now_ms=_NOW + 5, older_than_ms=1)
            if code is ErrorCode.STALE_PROJECTION
            else Failed(code=code, now_ms=_NOW + 5)
        )
        failed = transition(_existing(), event, _LIMITS)
        assert isinstance(failed, CanonicalRecord)
        cases.append(
            (
                f"existing/error-{code.value.lower()}",
                f"ERROR/{code.value} under the key: {description}",
                failed,
            )
        )
    return cases


def _admission_document() -> dict[str, Any]:
    vectors: list[dict[str, Any]] = []
    base = _run()
    size = len(_REQUEST)

    def add(label: str, description: str, requirements: list[str], **inputs: Any) -> None:
        vectors.append(_preflight(f"admission/{label}", requirements, description, **inputs))

    budget = ["CIS-RUN-5", "CIS-PRE-8"]
    add("admitted", "a fresh call: record sequence = used + 1, expiry = now + run ttl", ["CIS-REC-4"])
    add(
        "tool-budget/one-left",
        "used = budget - 1: admitted, budget exactly reached",
        budget,
        run=evolve(base, tool_calls_used=2),
    )
    add(
        "tool-budget/reached",
        "used = budget: TOOL_BUDGET_EXHAUSTED",
        budget,
        run=evolve(base, tool_calls_used=3),
    )
    add("tool-budget/zero", "a budget of 0 admits nothing", budget, run=evolve(base, tool_call_budget=0))
    bytes_ = ["CIS-RUN-6", "CIS-PRE-8"]
    add(
        "byte-budget/exact",
        f"bytes_used + {size} = byte_budget: admitted",
        bytes_,
        run=evolve(base, bytes_used=1000 - size),
    )
    add(
        "byte-budget/one-over",
        f"bytes_used + {size} = byte_budget + 1: RUN_BYTES_EXHAUSTED",
        bytes_,
        run=evolve(base, bytes_used=1001 - size),
    )
    wide = '{"q":"\u00e9"}'
    add(
        "byte-budget/utf8-exact",
        "a 9-character, 10-byte request with 10 bytes left: admitted",
        bytes_,
        envelope={"arguments": wide},
        run=evolve(base, bytes_used=990),
    )
    add(
        "byte-budget/utf8-over",
        "10 bytes with 9 left: exhausted (a reading counting characters admits it)",
        bytes_,
        envelope={"arguments": wide},
        run=evolve(base, bytes_used=991),
    )
    deadline = ["CIS-RUN-4"]
    add("deadline/one-before", "now = deadline - 1: admitted", deadline, now_ms=base.deadline_ms - 1)
    add("deadline/at", "now = deadline: RUN_DEADLINE_EXCEEDED", deadline, now_ms=base.deadline_ms)
    add("deadline/after", "now = deadline + 1", deadline, now_ms=base.deadline_ms + 1)
    add(
        "run/expiry-one-before",
        "now = deadline + ttl - 1: the run state is live, its deadline passed",
        ["CIS-RUN-3", "CIS-RUN-4"],
        now_ms=base.expires_at_ms - 1,
    )
    add(
        "run/expiry-at",
        "now = deadline + ttl: the run state lapsed, RUN_INACTIVE",
        ["CIS-RUN-3"],
        now_ms=base.expires_at_ms,
    )
    add("run/absent", "no run state", ["CIS-RUN-3"], run=None)
    add("run/cancelled", "a cancelled run", ["CIS-RUN-3"], run=evolve(base, status=RunStatus.CANCELLED))
    add("run/closed", "a closed run", ["CIS-RUN-3"], run=evolve(base, status=RunStatus.CLOSED))
    add(
        "run/other-run-state",
        "the run state found belongs to another run id",
        ["CIS-PRE-3"],
        run=evolve(base, run_id="run-2"),
    )
    add(
        "record-ttl",
        "a run ttl of 1234 ms: the record expires at now + 1234, not at the run's expiry",
        ["CIS-TTL-1"],
        run=evolve(base, ttl_ms=1234),
    )
    dup = ["CIS-ID-5", "CIS-RETRY-2"]
    add(
        "existing/live",
        "a live PROJECTING record of another invocation: CALL_IN_PROGRESS (its fate is not known yet)",
        dup,
        existing=_existing(),
    )
    for label, description, failed in _duplicate_fates():
        add(label, description, dup, existing=failed)
    add(
        "existing/expires-next-ms",
        "the record expires at now + 1: still live, duplicate (in progress)",
        [*dup, "CIS-TTL-4"],
        existing=_existing(expires_at_ms=_ADMIT_NOW + 1),
    )
    add(
        "existing/expires-now",
        "the record expires at now: absent, a new record",
        [*dup, "CIS-TTL-4"],
        existing=_existing(expires_at_ms=_ADMIT_NOW),
    )
    ready = _existing()
    ready = evolve(
        ready,
        status=InvocationStatus.READY,
        evidence_status=EvidenceStatus.EVIDENCE_FOUND,
        raw_response="RAW",
        agent_result="found",
        scope="web",
        updated_at_ms=_NOW + 5,
    )
    add("existing/ready", "a READY record under the key: duplicate", dup, existing=ready)
    replay = ["CIS-RETRY-2", "CIS-RETRY-1"]
    mine = _existing("tok-new")
    add(
        "replay/same-token",
        "the live record has this invocation's token: a replay, nothing charged",
        replay,
        existing=mine,
        run=evolve(base, tool_calls_used=1, bytes_used=size),
    )
    add(
        "replay/cancelled-run",
        "a retried create is itself even after the run was cancelled",
        replay,
        existing=mine,
        run=evolve(base, status=RunStatus.CANCELLED, tool_calls_used=1),
    )
    add(
        "replay/past-deadline",
        "a retried create is itself even after the deadline",
        replay,
        existing=evolve(mine, expires_at_ms=base.expires_at_ms),
        now_ms=base.deadline_ms,
        run=evolve(base, tool_calls_used=1),
    )
    add("replay/no-run", "no run state: RUN_INACTIVE, not a replay", replay, existing=mine, run=None)
    add(
        "replay/expired",
        "the same token on an expired record: a new admission",
        replay,
        existing=evolve(mine, expires_at_ms=_ADMIT_NOW),
    )
    add(
        "replay/case-differs",
        "tokens are compared exactly: TOK-NEW is another invocation",
        replay,
        existing=_existing("TOK-NEW"),
    )
    add(
        "replay/empty-token",
        "an empty token never identifies an invocation: duplicate",
        replay,
        existing=_existing(""),
        token="",
    )
    tight = evolve(_LIMITS, record_bytes=26)
    add(
        "record-limit/at",
        "the new record is 26 bytes (ids + tool name + request) = the limit",
        ["CIS-SIZE-5"],
        limits=tight,
    )
    add(
        "record-limit/one-over",
        "26 bytes against 25: REQUEST_TOO_LARGE, nothing charged",
        ["CIS-SIZE-5"],
        limits=evolve(tight, record_bytes=25),
    )
    add(
        "record-limit/after-tool-budget",
        "the record limit is checked after the budgets: TOOL_BUDGET_EXHAUSTED wins",
        ["CIS-SIZE-5", "CIS-PRE-8"],
        limits=evolve(tight, record_bytes=25),
        run=evolve(base, tool_calls_used=3),
    )
    add(
        "record-limit/after-byte-budget",
        "the record limit is checked after the budgets: RUN_BYTES_EXHAUSTED wins",
        ["CIS-SIZE-5", "CIS-PRE-8"],
        limits=evolve(tight, record_bytes=25),
        run=evolve(base, bytes_used=1000),
    )
    return _document(
        "Admission at its edges: budgets reached exactly and exceeded by one, the deadline and "
        "the run's expiry (deadline + ttl) at now - 1, now and now + 1, a record expiring at now, "
        "and the invocation-token replay. Run as preflight_order.json.",
        ["CIS-PRE-8", "CIS-RUN-3", "CIS-RUN-4", "CIS-RUN-5", "CIS-RUN-6", "CIS-RETRY-2", "CIS-SPEC-3"],
        {"vectors": vectors},
    )


# ---------------------------------------------------------------------------
# Transition-kind vectors


def _projecting(raw: str = "RAW", **changes: Any) -> CanonicalRecord:
    record = transition(None, _begin(_NOW), _LIMITS)
    assert isinstance(record, CanonicalRecord)
    return evolve(record, raw_response=raw, updated_at_ms=_NOW + 1, **changes)


def _awaiting_raw() -> CanonicalRecord:
    record = transition(None, _begin(_NOW), _LIMITS)
    assert isinstance(record, CanonicalRecord)
    return record


def _projection(status: str, content: str, scope: str, now: int = _NOW + 10) -> ProjectionReceived:
    return ProjectionReceived(
        projection=Projection(evidence_status=status, content=content, scope=scope), now_ms=now
    )


def _limits_document() -> dict[str, Any]:  # noqa: PLR0915 - one list of cases
    vectors: list[dict[str, Any]] = []
    now = _NOW + 10

    def add(  # noqa: PLR0917 - a vector's fields, in file order
        label: str,
        description: str,
        requirements: list[str],
        before: CanonicalRecord | None,
        event: Any,
        limits: Limits = _LIMITS,
    ) -> None:
        vectors.append(
            _transition_vector(f"limits/{label}", requirements, description, before, event, limits)
        )

    record = ["CIS-SIZE-5"]
    add(
        "record/begin-at",
        "run_id 5 + tool_call_id 6 + tool_name 6 + request 9 = 26 bytes, limit 26: created "
        "(a reading that also counts the token refuses it)",
        record,
        None,
        _begin(now),
        evolve(_LIMITS, record_bytes=26),
    )
    add(
        "record/begin-over",
        "26 bytes against 25: REQUEST_TOO_LARGE (a reading that leaves out the ids admits it)",
        record,
        None,
        _begin(now),
        evolve(_LIMITS, record_bytes=25),
    )
    add(
        "record/begin-utf8",
        "a tool name of 7 UTF-8 bytes (6 characters): 27 bytes against 26",
        record,
        None,
        _begin(now, tool_name="s\u00e9arch"),
        evolve(_LIMITS, record_bytes=26),
    )
    add(
        "record/raw-at",
        "26 + raw 30 = 56 = the limit: raw stored",
        record,
        _awaiting_raw(),
        RawReceived(raw_response="r" * 30, now_ms=now),
        evolve(_LIMITS, record_bytes=56),
    )
    add(
        "record/raw-over",
        "26 + raw 31 = 57 > 56: ERROR/RESULT_TOO_LARGE, raw not stored",
        record,
        _awaiting_raw(),
        RawReceived(raw_response="r" * 31, now_ms=now),
        evolve(_LIMITS, record_bytes=56),
    )
    add(
        "record/projection-at",
        "26 + raw 3 + content 5 + scope 3 = 37 = the limit: READY",
        record,
        _projecting(),
        _projection("EVIDENCE_FOUND", "found", "web"),
        evolve(_LIMITS, record_bytes=37),
    )
    add(
        "record/projection-over",
        "37 bytes against 36: ERROR/RESULT_TOO_LARGE, raw kept (a reading that "
        "leaves out the raw response admits it)",
        record,
        _projecting(),
        _projection("EVIDENCE_FOUND", "found", "web"),
        evolve(_LIMITS, record_bytes=36),
    )
    raw = ["CIS-SIZE-3", "CIS-SIZE-1"]
    for length in (63, 64, 65):
        add(
            f"raw/ascii-{length}",
            f"a raw response of {length} bytes, limit 64",
            raw,
            _awaiting_raw(),
            RawReceived(raw_response="r" * length, now_ms=now),
        )
    add(
        "raw/utf8-64",
        "32 characters of U+00E9 = 64 bytes: stored",
        raw,
        _awaiting_raw(),
        RawReceived(raw_response="\u00e9" * 32, now_ms=now),
    )
    add(
        "raw/utf8-66",
        "33 characters = 66 bytes: too large (a reading counting characters stores it)",
        raw,
        _awaiting_raw(),
        RawReceived(raw_response="\u00e9" * 33, now_ms=now),
    )
    add(
        "raw/empty",
        "an empty raw response is a raw response: AWAITING_PROJECTION",
        [*raw, "CIS-LIFE-1"],
        _awaiting_raw(),
        RawReceived(raw_response="", now_ms=now),
    )
    add(
        "raw/empty-then-projection",
        'raw_response "" is present: the record awaits its projection',
        ["CIS-LIFE-1"],
        _projecting(""),
        _projection("EVIDENCE_FOUND", "found", "web"),
    )
    add(
        "raw/empty-then-raw",
        'raw_response "" is present: a second raw is illegal',
        ["CIS-LIFE-1", "CIS-LIFE-2"],
        _projecting(""),
        RawReceived(raw_response="RAW", now_ms=now),
    )
    result = ["CIS-SIZE-4"]
    add(
        "result/at",
        "content 29 + scope 3 = 32 = the agent result limit: READY",
        result,
        _projecting(),
        _projection("EVIDENCE_FOUND", "c" * 29, "web"),
    )
    add(
        "result/one-over",
        "content 30 + scope 3 = 33 > 32: ERROR/RESULT_TOO_LARGE",
        result,
        _projecting(),
        _projection("EVIDENCE_FOUND", "c" * 30, "web"),
    )
    add(
        "result/scope-counts",
        "content 20 + scope 13 = 33 > 32 (a content-only reading accepts it)",
        result,
        _projecting(),
        _projection("EVIDENCE_FOUND", "c" * 20, "s" * 13),
    )
    add(
        "result/utf8",
        "16 characters of U+00E9 (32 bytes) + scope 1 = 33 > 32",
        result,
        _projecting(),
        _projection("EVIDENCE_FOUND", "\u00e9" * 16, "w"),
    )
    scope = ["CIS-EVID-3"]
    for label, value in [
        ("empty", ""),
        ("tab", "\t"),
        ("lf", "\n"),
        ("vt", "\x0b"),
        ("ff", "\x0c"),
        ("cr", "\r"),
        ("space", " "),
        ("all-six", " \t\n\x0b\x0c\r"),
    ]:
        add(
            f"scope/blank-{label}",
            "NO_EVIDENCE with a blank scope: PROJECTION_INVALID",
            scope,
            _projecting(),
            _projection("NO_EVIDENCE", "", value),
        )
    for value in ("\u00a0", "\u3000", "\u200b"):
        add(
            f"scope/not-blank-U+{ord(value):04X}",
            f"U+{ord(value):04X} is not a blank code point: READY",
            scope,
            _projecting(),
            _projection("NO_EVIDENCE", "", value),
        )
    add(
        "scope/kept-exactly",
        "a padded scope is kept exactly, never trimmed",
        scope,
        _projecting(),
        _projection("NO_EVIDENCE", "", " kb "),
    )
    add(
        "scope/found-without-scope",
        "EVIDENCE_FOUND needs no scope",
        ["CIS-EVID-2"],
        _projecting(),
        _projection("EVIDENCE_FOUND", "found", ""),
    )
    for label, content, scope_value, description in [
        ("content-null", None, "web", "content that is not text"),
        ("scope-number", "found", 7, "a scope that is not text"),
        ("content-lone-surrogate", "bad \ud800", "web", "content with no UTF-8 form"),
        ("scope-lone-surrogate", "found", "bad \ud800", "a scope with no UTF-8 form"),
    ]:
        add(
            f"projection/{label}",
            f"{description}: PROJECTION_INVALID, raw kept",
            ["CIS-EVID-2", "CIS-EVID-5"],
            _projecting(),
            ProjectionReceived(
                projection=Projection(evidence_status="EVIDENCE_FOUND", content=content, scope=scope_value),  # type: ignore[arg-type]
                now_ms=now,
            ),
        )
    order = ["CIS-EVID-2", "CIS-EVID-3", "CIS-SIZE-4"]
    add(
        "order/status-before-size",
        "an invalid evidence status and an oversized content: PROJECTION_INVALID (status first)",
        order,
        _projecting(),
        _projection("MAYBE", "c" * 40, "web"),
    )
    add(
        "order/blank-scope-before-size",
        "NO_EVIDENCE with a blank scope and an oversized content: PROJECTION_INVALID (scope first)",
        order,
        _projecting(),
        _projection("NO_EVIDENCE", "c" * 40, " "),
    )
    add(
        "order/utf8-before-size",
        "content with no UTF-8 form and over the limit: PROJECTION_INVALID (UTF-8 first)",
        order,
        _projecting(),
        _projection("EVIDENCE_FOUND", "\ud800" * 40, "web"),
    )
    add(
        "order/raw-utf8-before-size",
        "a raw response with no UTF-8 form and over the limit: SERIALIZATION_FAILED (UTF-8 first)",
        ["CIS-FAIL-4", "CIS-SIZE-3"],
        _awaiting_raw(),
        RawReceived(raw_response="\ud800" * 40, now_ms=now),
    )
    add(
        "evidence/lowercase",
        "evidence status strings are exact: evidence_found is invalid",
        ["CIS-EVID-5"],
        _projecting(),
        _projection("evidence_found", "found", "web"),
    )
    sweep = ["CIS-LIFE-7"]
    add(
        "sweep/age-equals",
        "age = now - created_at = 10 = older_than: stale",
        sweep,
        _awaiting_raw(),
        SweptStale(now_ms=now, older_than_ms=10),
    )
    add(
        "sweep/age-one-less",
        "age 10 < older_than 11: NOT_STALE",
        sweep,
        _awaiting_raw(),
        SweptStale(now_ms=now, older_than_ms=11),
    )
    add(
        "sweep/age-one-more",
        "age 10 > older_than 9: stale",
        sweep,
        _awaiting_raw(),
        SweptStale(now_ms=now, older_than_ms=9),
    )
    add(
        "sweep/from-creation",
        "created 10 ms ago, updated 9 ms ago, older_than 10: stale (a reading "
        "measuring from the last update says NOT_STALE)",
        sweep,
        _projecting(),
        SweptStale(now_ms=now, older_than_ms=10),
    )
    add(
        "sweep/zero",
        "older_than 0 sweeps a record created now",
        sweep,
        _awaiting_raw(),
        SweptStale(now_ms=_NOW, older_than_ms=0),
    )
    expiry = ["CIS-TTL-4"]
    live = _awaiting_raw()
    last = live.expires_at_ms - 1
    add(
        "expiry/raw-last-ms",
        "now = expires_at - 1: the record is live",
        expiry,
        live,
        RawReceived(raw_response="RAW", now_ms=last),
    )
    add(
        "expiry/raw-at",
        "now = expires_at: the record is absent",
        expiry,
        live,
        RawReceived(raw_response="RAW", now_ms=live.expires_at_ms),
    )
    add(
        "expiry/projection-at",
        "now = expires_at: absent",
        expiry,
        _projecting(),
        _projection("EVIDENCE_FOUND", "found", "web", live.expires_at_ms),
    )
    add(
        "expiry/failed-last-ms",
        "now = expires_at - 1: live",
        expiry,
        live,
        Failed(code=ErrorCode.EXECUTION_FAILED, now_ms=last),
    )
    add(
        "expiry/sweep-at",
        "now = expires_at: absent",
        expiry,
        live,
        SweptStale(now_ms=live.expires_at_ms, older_than_ms=0),
    )
    add(
        "expiry/begin-at",
        "a Begin at the old record's expiry creates a new record",
        expiry,
        live,
        _begin(live.expires_at_ms),
    )
    add(
        "expiry/begin-last-ms",
        "a Begin while the old record lives is illegal",
        [*expiry, "CIS-LIFE-2"],
        live,
        _begin(last),
    )
    return _document(
        "Limits and ages at their edges, as transition vectors (run as transitions.json): the whole "
        "record size, the raw and agent-result limits at limit - 1, limit and limit + 1, blank "
        "scopes by code point, the sweep age from creation with age = threshold, and record expiry "
        "at expires_at - 1 and expires_at.",
        ["CIS-SIZE-3", "CIS-SIZE-4", "CIS-SIZE-5", "CIS-EVID-3", "CIS-LIFE-7", "CIS-TTL-4", "CIS-SPEC-3"],
        {"vectors": vectors},
    )


# ---------------------------------------------------------------------------
# Completion vectors


def complete_outcome(vector: dict[str, Any]) -> dict[str, Any]:
    """The compare-and-set of a ``complete`` vector and the run after its byte charge."""
    before = record_from_json(vector["before"])
    after = record_from_json(vector["after"])
    assert before is not None
    assert after is not None
    run = run_from_json(vector["run"])
    effect = decide_completion(record_from_json(vector["stored"]), before, after, run, vector["now_ms"])
    if isinstance(effect, ErrorCode):
        return {"code": effect.value}
    return {"decision": effect.action.value, "run": run_json(run if effect.run is None else effect.run)}


def _complete_vector(  # noqa: PLR0917 - a vector's fields, in file order
    label: str,
    requirements: list[str],
    description: str,
    stored: CanonicalRecord | None,
    before: CanonicalRecord,
    after: CanonicalRecord,
    now: int = _NOW + 20,
    run: RunState | None = None,
) -> dict[str, Any]:
    vector: dict[str, Any] = {
        "id": f"complete/{label}",
        "kind": "complete",
        "requirements": requirements,
        "description": description,
        "stored": record_json(stored),
        "before": record_json(before),
        "after": record_json(after),
        "now_ms": now,
        "run": run_json(run if run is not None else _run(tool_calls_used=1, bytes_used=9)),
    }
    vector["expect"] = complete_outcome(vector)
    return vector


def _step(record: CanonicalRecord, event: Any, limits: Limits = _LIMITS) -> CanonicalRecord:
    result = transition(record, event, limits)
    assert isinstance(result, CanonicalRecord)
    return result


def _completion_document() -> dict[str, Any]:
    before = _awaiting_raw()
    with_raw = _step(before, RawReceived(raw_response="RAW", now_ms=_NOW + 5))
    ready = _step(with_raw, _projection("EVIDENCE_FOUND", "found", "web", _NOW + 6))
    failed = _step(with_raw, Failed(code=ErrorCode.PROJECTION_FAILED, now_ms=_NOW + 6))
    too_big = _step(before, RawReceived(raw_response="r" * 65, now_ms=_NOW + 6))
    wide = _step(before, RawReceived(raw_response="\u00e9\u00e9", now_ms=_NOW + 5))
    wide_ready = _step(wide, _projection("NO_EVIDENCE", "", "\u00e9", _NOW + 6))
    cas = ["CIS-STORE-3", "CIS-RETRY-2"]
    charge = ["CIS-RUN-6"]
    vectors = [
        _complete_vector(
            "ready",
            charge + cas,
            "WRITE; the run is charged raw 3 + content 5 + scope 3 = 11 "
            "bytes (a reading charging the raw response alone, or the result alone, differs)",
            before,
            before,
            ready,
        ),
        _complete_vector(
            "ready-utf8", charge, "raw 4 + content 0 + scope 2 UTF-8 bytes = 6", before, before, wide_ready
        ),
        _complete_vector(
            "error-raw-kept",
            charge,
            "ERROR after the raw response: raw 3 bytes charged",
            before,
            before,
            failed,
        ),
        _complete_vector(
            "error-raw-dropped",
            charge,
            "ERROR/RESULT_TOO_LARGE stores no raw: nothing charged",
            before,
            before,
            too_big,
        ),
        _complete_vector(
            "one-byte",
            charge,
            "an ERROR keeping a 1-byte raw response: 1 byte charged",
            before,
            before,
            _step(
                _step(before, RawReceived(raw_response="R", now_ms=_NOW + 5)),
                Failed(code=ErrorCode.PROJECTION_FAILED, now_ms=_NOW + 6),
            ),
        ),
        _complete_vector(
            "stored-raw-already",
            cas,
            "the store already holds the raw response (PROJECTING): WRITE, charged from the worker's before",
            with_raw,
            before,
            ready,
        ),
        _complete_vector(
            "no-run", cas, "no run state: WRITE, nothing to charge", before, before, ready, run=None
        ),
        _complete_vector(
            "replay",
            cas,
            "the stored record is already `after`: REPLAY, nothing charged again",
            ready,
            before,
            ready,
        ),
        _complete_vector(
            "other-updated",
            cas,
            "terminal with another updated_at_ms: INVALID_TRANSITION",
            evolve(ready, updated_at_ms=ready.updated_at_ms + 1),
            before,
            ready,
        ),
        _complete_vector(
            "other-status", [*cas, "CIS-LIFE-3"], "terminal ERROR, after READY", failed, before, ready
        ),
        _complete_vector(
            "other-code",
            cas,
            "terminal with another error code",
            evolve(failed, error_code=ErrorCode.EXECUTION_FAILED),
            before,
            failed,
        ),
        _complete_vector("absent", [*cas, "CIS-TTL-4"], "nothing stored", None, before, ready),
        _complete_vector(
            "expired",
            [*cas, "CIS-TTL-4"],
            "now = expires_at: absent",
            before,
            before,
            ready,
            now=before.expires_at_ms,
        ),
        _complete_vector(
            "last-ms",
            [*cas, "CIS-TTL-4"],
            "now = expires_at - 1: WRITE",
            before,
            before,
            ready,
            now=before.expires_at_ms - 1,
        ),
        _complete_vector(
            "other-token",
            cas,
            "another invocation's record under the key",
            evolve(before, invocation_token="tok-2"),  # noqa: S106 - a retry token
            before,
            ready,
        ),
        _complete_vector(
            "other-request",
            [*cas, "CIS-LIFE-6"],
            "same token, another request text",
            evolve(before, request_json='{"q":"y"}'),
            before,
            ready,
        ),
        _complete_vector(
            "other-expiry",
            [*cas, "CIS-TTL-2"],
            "same token, another expiry",
            evolve(before, expires_at_ms=before.expires_at_ms + 1),
            before,
            ready,
        ),
    ]
    return _document(
        "The completion compare-and-set and its byte charge: given what the store holds (`stored`), "
        "the worker's PROJECTING record (`before`) and its completed record (`after`) at `now_ms`, "
        "expect `decision` WRITE or REPLAY with the run after the charge (record_bytes(after) - "
        "record_bytes(before) when positive, on WRITE only), or a `code`.",
        ["CIS-STORE-3", "CIS-RETRY-2", "CIS-RUN-6", "CIS-SPEC-3"],
        {"vectors": vectors},
    )


# ---------------------------------------------------------------------------
# References


def cite_outcome(vector: dict[str, Any]) -> dict[str, Any]:
    """The citation of a ``cite`` vector."""
    citation = cite(
        vector["run_id"], vector["tool_call_id"], record_from_json(vector["record"]), vector["now_ms"]
    )
    # The kernel's answer as it is, not the trace view (which maps any unsafe echo to null).
    return {
        "citation": {
            "kind": citation.kind.value,
            "tool_call_id": citation.tool_call_id,
            "content": citation.content,
            "scope": citation.scope,
            "reason": None if citation.reason is None else citation.reason.value,
        }
    }


def progress_outcome(vector: dict[str, Any]) -> dict[str, Any]:
    """The progress report of a ``progress`` vector."""
    records = {key: record_from_json(value) for key, value in vector["records"].items()}
    report = project_progress(
        vector["run_id"], vector["identities"], records, vector["now_ms"], _limits_from_json(vector["limits"])
    )
    return progress_view(report)


def _done(
    tool_call_id: str,
    content: str = "found",
    scope: str = "web",
    *,
    negative: bool = False,
    sequence: int = 1,
) -> CanonicalRecord:
    record = _step(
        _step(_awaiting_raw(), RawReceived(raw_response="RAW", now_ms=_NOW + 1)),
        _projection("NO_EVIDENCE" if negative else "EVIDENCE_FOUND", content, scope, _NOW + 2),
        evolve(_ROOMY, agent_result_bytes=1024),
    )
    return evolve(record, tool_call_id=tool_call_id, sequence=sequence)


def _references_document() -> dict[str, Any]:
    now = _NOW + 100
    found = _done(_CALL)
    negative = _done(_CALL, "", "kb", negative=True)
    projecting = _awaiting_raw()
    error = _step(projecting, Failed(code=ErrorCode.EXECUTION_FAILED, now_ms=_NOW + 1))
    vectors: list[dict[str, Any]] = []

    def cite_vector(  # noqa: PLR0917 - a vector's fields, in file order
        label: str,
        description: str,
        requirements: list[str],
        tool_call_id: str,
        record: CanonicalRecord | None,
        at: int = now,
    ) -> None:
        vector: dict[str, Any] = {
            "id": f"cite/{label}",
            "kind": "cite",
            "requirements": requirements,
            "description": description,
            "run_id": _RUN,
            "tool_call_id": tool_call_id,
            "record": record_json(record),
            "now_ms": at,
        }
        vector["expect"] = cite_outcome(vector)
        vectors.append(vector)

    cite_vector(
        "evidence", "READY + EVIDENCE_FOUND: evidence with its content and scope", ["CIS-REF-1"], _CALL, found
    )
    cite_vector(
        "negative",
        "READY + NO_EVIDENCE: a negative observation with its scope",
        ["CIS-REF-2"],
        _CALL,
        negative,
    )
    cite_vector("projecting", "PROJECTING: not referencable", ["CIS-REF-3"], _CALL, projecting)
    cite_vector("error", "ERROR: not referencable", ["CIS-REF-3"], _CALL, error)
    cite_vector("missing", "no record", ["CIS-REF-3"], _CALL, None)
    cite_vector(
        "expired", "now = expires_at: EXPIRED", ["CIS-REF-3", "CIS-TTL-4"], _CALL, found, found.expires_at_ms
    )
    cite_vector(
        "last-ms",
        "now = expires_at - 1: still evidence",
        ["CIS-REF-1", "CIS-TTL-4"],
        _CALL,
        found,
        found.expires_at_ms - 1,
    )
    cite_vector("other-run", "a record of another run", ["CIS-REF-3"], _CALL, evolve(found, run_id="run-2"))
    cite_vector(
        "other-id",
        "a record answering another tool_call_id",
        ["CIS-REF-3", "CIS-STORE-6"],
        _CALL,
        evolve(found, tool_call_id="call_2"),
    )
    cite_vector(
        "other-run-before-expired",
        "another run's expired record: OTHER_RUN is decided first",
        ["CIS-REF-3"],
        _CALL,
        evolve(found, run_id="run-2"),
        found.expires_at_ms,
    )
    cite_vector(
        "unsafe", "an unsafe id: UNSAFE_ID, the id echoed as null", ["CIS-REF-3", "CIS-ERR-1"], "call 1", None
    )
    cite_vector(
        "unsafe-before-record",
        "an unsafe id is decided before the record",
        ["CIS-REF-3"],
        "call{1}",
        evolve(found, tool_call_id="call{1}"),
    )
    cite_vector(
        "ready-bad-evidence",
        "a READY record whose evidence status is ERROR (a corrupt record): not referencable, ERROR",
        ["CIS-REF-3", "CIS-EVID-1"],
        _CALL,
        evolve(found, evidence_status=EvidenceStatus.ERROR),
    )

    def progress_vector(  # noqa: PLR0917 - a vector's fields, in file order
        label: str,
        description: str,
        requirements: list[str],
        identities: list[str],
        records: dict[str, CanonicalRecord | None],
        limits: Limits = _LIMITS,
    ) -> None:
        vector: dict[str, Any] = {
            "id": f"progress/{label}",
            "kind": "progress",
            "requirements": requirements,
            "description": description,
            "run_id": _RUN,
            "identities": identities,
            "records": {key: record_json(value) for key, value in records.items()},
            "now_ms": now,
            "limits": limits_view(limits),
        }
        vector.update({"expect": progress_outcome(vector)})
        vectors.append(vector)

    a, b, c, d = (_done(f"call_{n}", f"fact{n}", "web", sequence=n) for n in (1, 2, 3, 4))
    progress_vector(
        "completion-order",
        "facts follow the identities' order (completion order), not sequence",
        ["CIS-PROG-2"],
        ["call_2", "call_1"],
        {"call_1": a, "call_2": b},
    )
    progress_vector(
        "first-wins",
        "an identity listed twice gives one fact",
        ["CIS-PROG-2"],
        ["call_1", "call_1"],
        {"call_1": a},
    )
    progress_vector(
        "negative",
        "a NO_EVIDENCE fact is marked negative",
        ["CIS-PROG-2", "CIS-REF-2"],
        ["call_1"],
        {"call_1": evolve(negative, tool_call_id="call_1")},
    )
    progress_vector(
        "every-exclusion",
        "each reason counted once: UNSAFE_ID, MISSING, EXPIRED, OTHER_RUN, PROJECTING, ERROR",
        ["CIS-PROG-3"],
        ["call 9", "call_m", "call_e", "call_o", "call_p", "call_x", "call_1"],
        {
            "call_m": None,
            "call_e": evolve(a, tool_call_id="call_e", expires_at_ms=now),
            "call_o": evolve(a, tool_call_id="call_o", run_id="run-2"),
            "call_p": evolve(projecting, tool_call_id="call_p"),
            "call_x": evolve(error, tool_call_id="call_x"),
            "call_1": a,
        },
    )
    progress_vector(
        "max-facts",
        "4 READY records, at most 3 facts: 1 omitted",
        ["CIS-PROG-4"],
        ["call_1", "call_2", "call_3", "call_4"],
        {"call_1": a, "call_2": b, "call_3": c, "call_4": d},
    )
    big = [_done(f"call_{n}", "c" * 29, "web", sequence=n) for n in (1, 2)]
    progress_vector(
        "bytes-exact",
        "2 facts of 32 bytes = the 64-byte cap: both kept",
        ["CIS-PROG-4"],
        ["call_1", "call_2"],
        {"call_1": big[0], "call_2": big[1]},
    )
    progress_vector(
        "bytes-exact-empty-parts",
        "32 bytes of content with an empty scope + 32 bytes of scope with empty content = 64: both "
        "kept (an empty part counts 0 bytes)",
        ["CIS-PROG-4"],
        ["call_1", "call_2"],
        {
            "call_1": _done("call_1", "c" * 32, "", sequence=1),
            "call_2": _done("call_2", "", "s" * 32, sequence=2),
        },
    )
    over = _done("call_2", "c" * 30, "web", sequence=2)
    progress_vector(
        "bytes-one-over",
        "32 + 33 = 65 > 64: the second omitted",
        ["CIS-PROG-4"],
        ["call_1", "call_2"],
        {"call_1": big[0], "call_2": over},
    )
    small = _done("call_3", "s", "", sequence=3)
    progress_vector(
        "ends-the-list",
        "a fact that does not fit ends the list: a later small one is omitted "
        "too (a reading that skips and goes on keeps it)",
        ["CIS-PROG-4"],
        ["call_1", "call_2", "call_3"],
        {"call_1": big[0], "call_2": over, "call_3": small},
    )
    progress_vector(
        "utf8-bytes",
        "a fact's size is content + scope in UTF-8 bytes: 32 + 33 = 65 > 64 (16 + 17 characters: "
        "a reading counting characters keeps both)",
        ["CIS-PROG-4"],
        ["call_1", "call_2"],
        {
            "call_1": _done("call_1", "\u00e9" * 16, "", sequence=1),
            "call_2": _done("call_2", "\u00e9" * 16, "x", sequence=2),
        },
    )
    progress_vector(
        "excluded-after-full",
        "identities after the cap are still judged: an ERROR is excluded, not omitted",
        ["CIS-PROG-3", "CIS-PROG-4"],
        ["call_1", "call_2", "call_x"],
        {"call_1": big[0], "call_2": over, "call_x": evolve(error, tool_call_id="call_x")},
    )
    return _document(
        "Citations (`cite`: the record read under `run_id`/`tool_call_id` at `now_ms`; expect "
        "`citation`) and progress (`progress`: the tracker's `identities` resolved through `records` "
        "at `now_ms` under `limits`; expect `facts`, `excluded` by reason, `omitted`).",
        ["CIS-REF-1", "CIS-REF-2", "CIS-REF-3", "CIS-PROG-2", "CIS-PROG-3", "CIS-PROG-4", "CIS-SPEC-3"],
        {"vectors": vectors},
    )


# ---------------------------------------------------------------------------
# Run lifecycle at its edges


def _run_lifecycle_document() -> dict[str, Any]:
    opened = _run()
    parameters = {
        "run_id": _RUN,
        "deadline_ms": opened.deadline_ms,
        "ttl_ms": _TTL,
        "tool_call_budget": 3,
        "byte_budget": 1000,
    }
    used = evolve(opened, tool_calls_used=2, bytes_used=40)
    last = opened.expires_at_ms - 1
    vectors = [
        _run_vector(
            "run-edge/open/deadline-now",
            ["CIS-RUN-1", "CIS-RUN-4"],
            "a deadline at now opens an ACTIVE run; every call on it is RUN_DEADLINE_EXCEEDED",
            "open",
            None,
            _NOW,
            {**parameters, "deadline_ms": _NOW},
        ),
        _run_vector(
            "run-edge/open/expiry",
            ["CIS-RUN-1"],
            "the run state expires at deadline + ttl",
            "open",
            None,
            _NOW,
            {**parameters, "ttl_ms": 777},
        ),
        _run_vector(
            "run-edge/open/zero-budgets",
            ["CIS-RUN-1"],
            "budgets of 0 are allowed",
            "open",
            None,
            _NOW,
            {**parameters, "tool_call_budget": 0, "byte_budget": 0},
        ),
        _run_vector(
            "run-edge/reopen/unchanged",
            ["CIS-RETRY-3"],
            "a retried open returns the stored run, counters included",
            "open",
            used,
            last,
            parameters,
        ),
        _run_vector(
            "run-edge/reopen/at-expiry",
            ["CIS-RETRY-3", "CIS-RUN-1"],
            "at deadline + ttl the old state lapsed: a fresh run",
            "open",
            used,
            opened.expires_at_ms,
            parameters,
        ),
        _run_vector(
            "run-edge/reopen/cancelled",
            ["CIS-RETRY-3", "CIS-RUN-3"],
            "a live CANCELLED run is never re-opened: INVALID_TRANSITION",
            "open",
            evolve(opened, status=RunStatus.CANCELLED),
            _NOW,
            parameters,
        ),
        _run_vector(
            "run-edge/reopen/closed",
            ["CIS-RETRY-3", "CIS-RUN-3"],
            "a live CLOSED run is never re-opened",
            "open",
            evolve(opened, status=RunStatus.CLOSED),
            _NOW,
            parameters,
        ),
        _run_vector(
            "run-edge/reopen/other-run-id",
            ["CIS-RETRY-3"],
            "a stored state of another run id",
            "open",
            evolve(opened, run_id="run-2"),
            _NOW,
            parameters,
        ),
    ]
    for name, value in [
        ("deadline_ms", opened.deadline_ms + 1),
        ("ttl_ms", _TTL + 1),
        ("tool_call_budget", 4),
        ("byte_budget", 1001),
    ]:
        vectors.append(
            _run_vector(
                f"run-edge/reopen/other-{name}",
                ["CIS-RETRY-3"],
                f"a retried open with another {name}: INVALID_TRANSITION",
                "open",
                opened,
                _NOW,
                {**parameters, name: value},
            )
        )
    for label, run_id in [
        ("empty", ""),
        ("brace", "run{1}"),
        ("length-129", "r" * 129),
        ("non-ascii", "run-\u00e9"),
    ]:
        vectors.append(
            _run_vector(
                f"run-edge/open/unsafe-{label}",
                ["CIS-ID-1", "CIS-RUN-1"],
                "an unsafe run id: RUN_MISMATCH",
                "open",
                None,
                _NOW,
                {**parameters, "run_id": run_id},
            )
        )
    vectors.append(
        _run_vector(
            "run-edge/open/length-128",
            ["CIS-ID-1", "CIS-RUN-1"],
            "128 characters: safe",
            "open",
            None,
            _NOW,
            {**parameters, "run_id": "r" * 128},
        )
    )
    for operation in ("cancel", "close"):
        vectors.append(
            _run_vector(
                f"run-edge/{operation}/last-ms",
                ["CIS-RUN-2"],
                "now = deadline + ttl - 1: the run state is live",
                operation,
                opened,
                last,
            )
        )
        vectors.append(
            _run_vector(
                f"run-edge/{operation}/after-deadline",
                ["CIS-RUN-2"],
                "past the deadline a live run can still be ended",
                operation,
                opened,
                opened.deadline_ms,
            )
        )
    return _document(
        "The run lifecycle at its edges (run as runs.json): opening at and past the deadline, "
        "re-opening a live run (ACTIVE with the same parameters: unchanged; anything else: "
        "INVALID_TRANSITION), the run state's expiry at deadline + ttl.",
        ["CIS-RUN-1", "CIS-RUN-2", "CIS-RETRY-3", "CIS-SPEC-3"],
        {"vectors": vectors},
    )


# ---------------------------------------------------------------------------
# Unit kinds: the I-JSON check alone, record well-formedness, keys, caller errors


def arguments_outcome(vector: dict[str, Any]) -> dict[str, Any]:
    """The I-JSON check alone (CIS-JSON-1..6): ``{"code": null | "INVALID_ARGUMENTS"}``."""
    code = check_arguments(vector["text"], vector["max_json_depth"])
    return {"code": None if code is None else code.value}


def well_formed_outcome(vector: dict[str, Any]) -> dict[str, Any]:
    """Whether a stored record is a state the lifecycle can produce (CIS-STORE-6)."""
    record = record_from_json(vector["record"])
    assert record is not None
    return {"well_formed": is_well_formed(record)}


def keys_outcome(vector: dict[str, Any]) -> dict[str, Any]:
    """The store keys of a run and a call (CIS-KEY-1); an unsafe part is invalid input."""
    prefix, run_id, tool_call_id = vector["prefix"], vector["run_id"], vector["tool_call_id"]
    return {
        "run_key": run_key(prefix, run_id),
        "done_key": done_key(prefix, run_id),
        "call_key": call_key(prefix, run_id, tool_call_id),
    }


def _ijson_document(arguments: dict[str, Any]) -> dict[str, Any]:
    vectors = []
    for source in arguments["vectors"]:
        if not any(req.startswith("CIS-JSON-") for req in source["requirements"]):
            continue
        vector: dict[str, Any] = {
            "id": "ijson/" + source["id"].split("/", 1)[1],
            "kind": "arguments",
            "requirements": source["requirements"],
            "description": source["description"],
            "text": source["envelope"]["arguments"],
            "max_json_depth": source["limits"]["max_json_depth"],
        }
        vector["expect"] = arguments_outcome(vector)
        vectors.append(vector)
    return _document(
        "The I-JSON check alone: is `text` one I-JSON object with nesting depth at most "
        "`max_json_depth`? Expect `code` null or INVALID_ARGUMENTS. The same cases as the "
        "CIS-JSON vectors of arguments.json, without the rest of preflight.",
        ["CIS-JSON-1", "CIS-JSON-2", "CIS-JSON-3", "CIS-JSON-4", "CIS-JSON-5", "CIS-JSON-6", "CIS-SPEC-3"],
        {"vectors": vectors},
    )


def _well_formed_cases() -> list[tuple[str, str, CanonicalRecord]]:
    """(label, description, record) of each well-formedness case, shared with the view vectors."""
    projecting = _awaiting_raw()
    ready = _done(_CALL)
    negative = _done(_CALL, "", "kb", negative=True)
    error = _step(projecting, Failed(code=ErrorCode.EXECUTION_FAILED, now_ms=_NOW + 1))
    cases: list[tuple[str, str, CanonicalRecord]] = [
        ("projecting", "a PROJECTING record: no evidence, code, result or scope", projecting),
        ("projecting-with-raw", "raw_response is not judged", evolve(projecting, raw_response="RAW")),
        ("ready", "READY + EVIDENCE_FOUND with a result and a scope", ready),
        ("ready-negative", "READY + NO_EVIDENCE", negative),
        ("error", "ERROR + evidence ERROR + a code", error),
        (
            "projecting-evidence",
            "PROJECTING with an evidence status",
            evolve(projecting, evidence_status=EvidenceStatus.EVIDENCE_FOUND),
        ),
        (
            "projecting-code",
            "PROJECTING with an error code",
            evolve(projecting, error_code=ErrorCode.EXECUTION_FAILED),
        ),
        ("projecting-result", "PROJECTING with an agent result", evolve(projecting, agent_result="x")),
        ("projecting-scope", "PROJECTING with a scope", evolve(projecting, scope="x")),
        (
            "ready-evidence-error",
            "READY with evidence ERROR",
            evolve(ready, evidence_status=EvidenceStatus.ERROR),
        ),
        ("ready-no-evidence-status", "READY with no evidence status", evolve(ready, evidence_status=None)),
        ("ready-code", "READY with an error code", evolve(ready, error_code=ErrorCode.EXECUTION_FAILED)),
        ("ready-no-result", "READY without an agent result", evolve(ready, agent_result=None)),
        ("ready-no-scope", "READY without a scope", evolve(ready, scope=None)),
        (
            "error-evidence-found",
            "ERROR with evidence FOUND",
            evolve(error, evidence_status=EvidenceStatus.EVIDENCE_FOUND),
        ),
        ("error-no-code", "ERROR without a code", evolve(error, error_code=None)),
        ("error-result", "ERROR with an agent result", evolve(error, agent_result="x")),
        ("error-scope", "ERROR with a scope", evolve(error, scope="x")),
        ("unsafe-run-id", "an unsafe run id", evolve(ready, run_id="run 1")),
        ("unsafe-tool-call-id", "an unsafe tool_call_id", evolve(ready, tool_call_id="call 1")),
        ("sequence-0", "sequence 0: positions start at 1", evolve(ready, sequence=0)),
        ("sequence-1", "sequence 1", evolve(ready, sequence=1)),
        (
            "expiry-at-creation",
            "expires_at_ms = created_at_ms: a TTL of 0",
            evolve(ready, expires_at_ms=ready.created_at_ms),
        ),
        (
            "expiry-after-creation",
            "expires_at_ms = created_at_ms + 1",
            evolve(ready, expires_at_ms=ready.created_at_ms + 1),
        ),
    ]
    return cases


def _well_formed_document() -> dict[str, Any]:
    vectors = []
    for label, description, record in _well_formed_cases():
        vector: dict[str, Any] = {
            "id": f"well-formed/{label}",
            "kind": "well_formed",
            "requirements": ["CIS-STORE-6", "CIS-LIFE-5", "CIS-EVID-1"],
            "description": description,
            "record": record_json(record),
        }
        vector["expect"] = well_formed_outcome(vector)
        vectors.append(vector)
    return _document(
        "Which stored records are states the lifecycle can produce (`well_formed`): a store that "
        "reads one that is not answers STORE_UNAVAILABLE instead of serving it.",
        ["CIS-STORE-6", "CIS-LIFE-5", "CIS-EVID-1", "CIS-SPEC-3"],
        {"vectors": vectors},
    )


def _keys_document() -> dict[str, Any]:
    vectors = []
    for label, prefix, run_id, tool_call_id, description in [
        ("layout", "cis", _RUN, _CALL, "<prefix>:{<run_id>}:run, :done and :call:<tool_call_id>"),
        ("colon-id", "app:cis", _RUN, "functions.get:0", "colons in the prefix and the id are kept"),
        ("empty-prefix", "", _RUN, _CALL, "an empty prefix is invalid input"),
        ("brace-prefix-open", "a{b", _RUN, _CALL, "a prefix with { is invalid input"),
        ("brace-prefix-close", "a}b", _RUN, _CALL, "a prefix with } is invalid input"),
        ("unsafe-run", "cis", "run{1}", _CALL, "an unsafe run id is invalid input"),
        ("unsafe-call", "cis", _RUN, "call}1", "an unsafe tool_call_id is invalid input"),
    ]:
        vector: dict[str, Any] = {
            "id": f"keys/{label}",
            "kind": "keys",
            "requirements": ["CIS-KEY-1", "CIS-KEY-2", "CIS-KEY-3"],
            "description": description,
            "prefix": prefix,
            "run_id": run_id,
            "tool_call_id": tool_call_id,
        }
        vector["expect"] = run_vector(vector)
        vectors.append(vector)
    return _document(
        "Store keys (`keys`): the run, done-list and call keys of `prefix`, `run_id`, "
        "`tool_call_id`; an unsafe part is `invalid_input`.",
        ["CIS-KEY-1", "CIS-KEY-2", "CIS-KEY-3", "CIS-SPEC-3"],
        {"vectors": vectors},
    )


def _invalid_input_document() -> dict[str, Any]:
    """Inputs the kernel refuses as a caller's error (CIS-KERN-2), and their valid neighbours."""
    vectors: list[dict[str, Any]] = []
    parameters = {
        "run_id": _RUN,
        "deadline_ms": _NOW + 600_000,
        "ttl_ms": _TTL,
        "tool_call_budget": 3,
        "byte_budget": 1000,
    }
    top = 2**53 - 1

    def open_vector(label: str, description: str, now: int, **changes: Any) -> None:
        vector: dict[str, Any] = {
            "id": f"invalid/open/{label}",
            "kind": "run",
            "requirements": ["CIS-KERN-2", "CIS-RUN-1"],
            "description": description,
            "operation": "open",
            "before": None,
            "now_ms": now,
            "parameters": {**parameters, **changes},
        }
        vector["expect"] = run_vector(vector)
        vectors.append(vector)

    open_vector("now-0", "now 0 is the epoch: valid", 0, deadline_ms=0)
    open_vector("now-negative", "a negative time", -1, deadline_ms=0)
    open_vector("deadline-negative", "a negative deadline", _NOW, deadline_ms=-1)
    open_vector("ttl-1", "the smallest TTL, 1 ms", _NOW, ttl_ms=1)
    open_vector("ttl-0", "a TTL of 0", _NOW, ttl_ms=0)
    open_vector("budget-negative", "a negative tool-call budget", _NOW, tool_call_budget=-1)
    open_vector("bytes-negative", "a negative byte budget", _NOW, byte_budget=-1)
    open_vector(
        "budget-max",
        "a budget of 2**53 - 1: the largest exact integer of a double",
        _NOW,
        tool_call_budget=top,
        byte_budget=top,
    )
    open_vector("budget-over", "a budget of 2**53", _NOW, byte_budget=top + 1)
    open_vector("expiry-max", "deadline + ttl = 2**53 - 1", _NOW, deadline_ms=top - _TTL)
    open_vector("expiry-over", "deadline + ttl = 2**53", _NOW, deadline_ms=top - _TTL + 1)
    open_vector("boolean-budget", "true is not a number", _NOW, tool_call_budget=True)
    open_vector("string-ttl", "a string is not a number", _NOW, ttl_ms="60000")

    def transition_vector(
        label: str, description: str, before: CanonicalRecord | None, event: dict[str, Any]
    ) -> None:
        vector: dict[str, Any] = {
            "id": f"invalid/transition/{label}",
            "kind": "transition",
            "requirements": ["CIS-KERN-2"],
            "description": description,
            "limits": limits_view(_LIMITS),
            "before": record_json(before),
            "event": event,
        }
        vector["expect"] = run_vector(vector)
        vectors.append(vector)

    begin = event_json(_begin())
    transition_vector("begin-ttl-1", "a Begin with a TTL of 1 ms", None, {**begin, "ttl_ms": 1})
    transition_vector("begin-ttl-0", "a Begin with a TTL of 0", None, {**begin, "ttl_ms": 0})
    transition_vector("begin-ttl-true", "a Begin whose TTL is true", None, {**begin, "ttl_ms": True})
    transition_vector(
        "failed-not-a-failure",
        "Failed with a code outside the failure set",
        _awaiting_raw(),
        {"type": "Failed", "code": "RUN_INACTIVE", "now_ms": _NOW + 1},
    )
    for label, description, value in [
        ("limit-1", "a limit of 1 (the smallest positive integer): valid", 1),
        ("limit-0", "a limit of 0: every limit is a positive integer", 0),
        ("limit-true", "true is not a limit", True),
    ]:
        limits = {**limits_view(_LIMITS), "max_json_depth": value}
        limit_vector: dict[str, Any] = {
            "id": f"invalid/limits/{label}",
            "kind": "transition",
            "requirements": ["CIS-KERN-2", "CIS-SIZE-1"],
            "description": description,
            "limits": limits,
            "before": None,
            "event": begin,
        }
        limit_vector["expect"] = run_vector(limit_vector)
        vectors.append(limit_vector)
    before = _awaiting_raw()
    ready = _done(_CALL)
    vector: dict[str, Any] = {
        "id": "invalid/complete/identity-changed",
        "kind": "complete",
        "requirements": ["CIS-KERN-2", "CIS-LIFE-6"],
        "description": "an `after` whose request differs from `before`: a completion may not change identity",
        "stored": record_json(before),
        "before": record_json(before),
        "after": record_json(evolve(ready, request_json='{"q":"y"}')),
        "now_ms": _NOW + 20,
        "run": None,
    }
    vector["expect"] = run_vector(vector)
    vectors.append(vector)
    return _document(
        "Inputs the kernel refuses as a caller's error rather than with a domain code "
        '(expect `{"invalid_input": true}`: an exception, a panic or an error return, '
        "whatever the language uses), next to the valid inputs just inside each bound.",
        ["CIS-KERN-2", "CIS-SPEC-3"],
        {"vectors": vectors},
    )


#: Runners of the vector kinds this module adds (``run_vector`` dispatches to them).
RUNNERS: Final[dict[str, Callable[[dict[str, Any]], dict[str, Any]]]] = {
    "complete": complete_outcome,
    "cite": cite_outcome,
    "progress": progress_outcome,
    "arguments": arguments_outcome,
    "well_formed": well_formed_outcome,
    "keys": keys_outcome,
}


def rule_documents() -> dict[str, dict[str, Any]]:
    """The boundary documents by file name, built from the kernel."""
    arguments = _arguments_document()
    return {
        "ids.json": _ids_document(),
        "arguments.json": arguments,
        "ijson.json": _ijson_document(arguments),
        "admission.json": _admission_document(),
        "limits.json": _limits_document(),
        "completion.json": _completion_document(),
        "references.json": _references_document(),
        "run_lifecycle.json": _run_lifecycle_document(),
        "well_formed.json": _well_formed_document(),
        "keys.json": _keys_document(),
        "invalid_input.json": _invalid_input_document(),
    }
