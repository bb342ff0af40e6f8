"""Preflight vectors at their edges: ids, the arguments text, admission (CIS-SPEC-3).

Theory of operation
-------------------
``preflight_order.json`` (:mod:`._vectors_lifecycle`) pins the order of the checks;
the documents here pin each check's own boundary, on both sides, as case tables:

- ``ids.json``: every character class of a tool_call_id, the six blank code points
  and the code points other languages call whitespace (:data:`UNSAFE_IDS`, ...);
- ``arguments.json``: the request size in UTF-8 bytes before any parsing and every
  I-JSON rule (:data:`ARGUMENT_SECTIONS`), and ``ijson.json``, the same cases against
  the I-JSON check alone;
- ``admission.json``: budgets reached exactly and by one over, the deadline and the
  run's expiry, a record expiring at now, the duplicate's fate, the token replay
  (:data:`ADMISSION_CASES`).

Every vector is a whole preflight (kind ``preflight``) of the fixture call with one
input changed; the kernel computes what it expects. The description of a vector names
the rival reading it rules out, where there is one.

Size: data. Case tables, one row per vector; the builders that turn rows into
vectors are short. Its length is the number of preflight edges the spec pins.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any, Final, NamedTuple

from attrs import evolve

from ..kernel import (
    MAX_SAFE_INT,
    PREFLIGHT_ORDER,
    CanonicalRecord,
    ErrorCode,
    EvidenceStatus,
    Failed,
    InvocationStatus,
    Limits,
    RunStatus,
    SweptStale,
)
from ._vectors_fixtures import (
    ADMIT_NOW,
    LIMITS,
    NOW,
    REQUEST,
    ROOMY,
    RUN,
    TOOL,
    document,
    existing_record,
    record_json,
    run_json,
    run_state,
    step,
)
from ._vectors_lifecycle import scenario
from ._vectors_outcomes import arguments_outcome, vector
from ._views import limits_view

__all__ = ["preflight_documents", "preflight_vector"]


def preflight_vector(
    vector_id: str,
    requirements: list[str],
    description: str,
    *,
    envelope: dict[str, Any] | None = None,
    limits: Limits | None = None,
    run: Any = "default",
    existing: CanonicalRecord | None = None,
    now_ms: int | None = None,
    token: Any = "tok-new",  # noqa: S107 - a retry token, not a credential
    policy: Any = "default",
) -> dict[str, Any]:
    """A ``preflight`` vector of the fixture call with the inputs given changed."""
    inputs = scenario(frozenset())
    if envelope:
        inputs["envelope"] = {**inputs["envelope"], **envelope}
    if limits is not None:
        inputs["limits"] = limits_view(limits)
    if run != "default":
        inputs["run"] = run_json(run)
    if policy != "default":
        inputs["policy"] = policy
    inputs["existing"] = record_json(existing)
    if now_ms is not None:
        inputs["now_ms"] = now_ms
    inputs["token"] = token
    return vector("preflight", vector_id, requirements, description, **inputs)


# ---------------------------------------------------------------------------
# ids.json

_SAFE: Final = ["CIS-ID-1", "CIS-ID-4"]
_MISSING: Final = ["CIS-ID-2"]
_UNSAFE: Final = ["CIS-ID-3"]

#: Safe ids (label, id): each class alone, real framework ids, 127 and 128 characters.
SAFE_IDS: Final[tuple[tuple[str, str], ...]] = (
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
)
#: Values that are no id text at all (label, value): MISSING_TOOL_CALL_ID.
NOT_TEXT_IDS: Final[tuple[tuple[str, Any], ...]] = (
    ("null", None),
    ("number", 7),
    ("true", True),
    ("list", ["call_1"]),
    ("empty", ""),
)
#: The six blank code points (label, text): MISSING_TOOL_CALL_ID.
BLANK_IDS: Final[tuple[tuple[str, str], ...]] = (
    ("tab", "\t"),
    ("lf", "\n"),
    ("vt", "\x0b"),
    ("ff", "\x0c"),
    ("cr", "\r"),
    ("space", " "),
)
#: Code points some languages call whitespace (text, why): not blank here, so unsafe.
NOT_BLANK_IDS: Final[tuple[tuple[str, str], ...]] = (
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
)
#: Unsafe ids (label, id): padding, controls, non-ASCII, a lone surrogate.
UNSAFE_IDS: Final[tuple[tuple[str, str], ...]] = (
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
)
#: Every printable ASCII character outside the safe set.
UNSAFE_ASCII: Final = "!\"#$%&'()*+,/;<=>?@[\\]^`{|}~"
#: Envelope run ids beside the context's ``run-1`` (label, value, description): only the same text passes.
ENVELOPE_RUN_IDS: Final[tuple[tuple[str, Any, str], ...]] = (
    ("same", RUN, "the context's run id: admitted"),
    ("null", None, "no run id (null): RUN_MISMATCH, never the context's by default"),
    ("number", 7, "a number: RUN_MISMATCH"),
    ("empty", "", "the empty text: RUN_MISMATCH"),
    ("case", "RUN-1", "RUN-1: run ids are compared exactly, RUN_MISMATCH"),
    ("padded", "run-1 ", "a trailing space: RUN_MISMATCH"),
    ("list", [RUN], "a list holding the run id: RUN_MISMATCH"),
)


def _id_vector(label: str, value: Any, description: str, requirements: list[str]) -> dict[str, Any]:
    return preflight_vector(f"id/{label}", requirements, description, envelope={"tool_call_id": value})


def _ids_document() -> dict[str, Any]:
    vectors = [
        _id_vector(label, value, "a safe id: admitted, kept exactly", _SAFE) for label, value in SAFE_IDS
    ]
    vectors.append(_id_vector("length-129", "c" * 129, "129 characters: one over the 128 limit", _UNSAFE))
    vectors += [
        _id_vector(f"missing/{label}", v, "no id string at all", _MISSING) for label, v in NOT_TEXT_IDS
    ]
    vectors += [
        _id_vector(f"blank/{label}", value, f"only U+{ord(value):04X}, a blank code point: missing", _MISSING)
        for label, value in BLANK_IDS
    ]
    vectors.append(
        _id_vector("blank/all-six", "\t\n\x0b\x0c\r ", "only the six blank code points: missing", _MISSING)
    )
    vectors += [
        _id_vector(
            f"not-blank/U+{ord(value):04X}",
            value,
            f"only U+{ord(value):04X} {why}: not a blank code point here, so unsafe, not missing",
            ["CIS-ID-2", "CIS-ID-3"],
        )
        for value, why in NOT_BLANK_IDS
    ]
    vectors += [
        _id_vector(f"unsafe/{label}", value, "outside A-Z a-z 0-9 _ - . :", _UNSAFE)
        for label, value in UNSAFE_IDS
    ]
    vectors += [
        preflight_vector(
            f"id/run-id/{label}",
            ["CIS-PRE-3", "CIS-PRE-2"],
            description,
            envelope={"run_id": value},
        )
        for label, value, description in ENVELOPE_RUN_IDS
    ]
    vectors += [
        _id_vector(
            f"unsafe/U+{ord(char):04X}",
            f"call{char}1",
            f"ASCII {char!r} (U+{ord(char):04X}) is not in the safe set",
            _UNSAFE,
        )
        for char in UNSAFE_ASCII
    ]
    return document(
        "Identifier classes: a preflight vector per character class of a tool_call_id (safe: "
        "A-Z a-z 0-9 _ - . : and 1-128 characters; blank: only U+0009, U+000A, U+000B, U+000C, "
        "U+000D, U+0020, or empty). Run as preflight_order.json.",
        ["CIS-ID-1", "CIS-ID-2", "CIS-ID-3", "CIS-ID-4", "CIS-SPEC-3"],
        {"vectors": vectors},
    )


# ---------------------------------------------------------------------------
# arguments.json and ijson.json


class ArgumentCase(NamedTuple):
    """One arguments value (usually a text) and what it shows."""

    label: str
    text: Any
    description: str


class ArgumentSection(NamedTuple):
    """Cases sharing an id prefix, requirements and limits."""

    prefix: str
    requirements: list[str]
    cases: tuple[ArgumentCase, ...]
    limits: Limits = ROOMY


def _q(body: str) -> str:
    return '{"q":"' + body + '"}'


#: Every arguments case, by section: the size (64-byte limit) then each I-JSON rule.
ARGUMENT_SECTIONS: Final[tuple[ArgumentSection, ...]] = (
    ArgumentSection(
        "size",
        ["CIS-SIZE-1", "CIS-SIZE-2", "CIS-PRE-2"],
        (
            *(
                ArgumentCase(f"ascii-{n}", _q("x" * (n - 8)), f"{n} bytes against a 64-byte limit")
                for n in (63, 64, 65)
            ),
            ArgumentCase(
                "two-byte-64",
                _q("\u00e9" * 28),
                "36 characters, 64 UTF-8 bytes (U+00E9 is 2 bytes): at the limit",
            ),
            ArgumentCase(
                "two-byte-66",
                _q("\u00e9" * 29),
                "37 characters, 66 UTF-8 bytes: over the limit (a reading counting characters admits it)",
            ),
            ArgumentCase(
                "four-byte-68",
                _q("\U0001f600" * 15),
                "15 supplementary characters (4 bytes each, 2 UTF-16 units): 68 bytes, over",
            ),
            ArgumentCase(
                "escape-counts-as-written",
                _q("\\u00e9" * 10),
                "the text is measured as written: each \\u00e9 escape is 6 bytes, 68 in all, over",
            ),
            ArgumentCase(
                "lone-surrogates-3-bytes",
                _q("\ud800" * 20),
                "20 raw lone surrogates count 3 bytes each: 68 bytes, REQUEST_TOO_LARGE before the "
                "I-JSON check (a reading counting UTF-16 units or a replacement byte says INVALID_ARGUMENTS)",
            ),
            ArgumentCase(
                "before-parsing",
                "[" * 65,
                "65 bytes of unbalanced brackets: too large, decided before any parsing",
            ),
            ArgumentCase("invalid-at-limit", "[" * 64, "64 bytes, not JSON: invalid arguments"),
        ),
        LIMITS,
    ),
    ArgumentSection(
        "object",
        ["CIS-JSON-1"],
        (
            ArgumentCase("empty-object", "{}", "the smallest object"),
            ArgumentCase(
                "json-whitespace",
                " \t\n\r{} \t\n\r",
                "JSON whitespace (U+0020, U+0009, U+000A, U+000D) around it",
            ),
            ArgumentCase("vt-before", "\x0b{}", "U+000B is not JSON whitespace"),
            ArgumentCase("ff-before", "\x0c{}", "U+000C is not JSON whitespace"),
            ArgumentCase("nbsp-before", "\u00a0{}", "U+00A0 is not JSON whitespace"),
            ArgumentCase("bom", "\ufeff{}", "a leading byte order mark"),
            ArgumentCase("empty", "", "no value"),
            ArgumentCase("blank", "   ", "only whitespace"),
            ArgumentCase("array", "[]", "an array"),
            ArgumentCase("string", '"{}"', "a string"),
            ArgumentCase("number", "1", "a number"),
            ArgumentCase("null-text", "null", "the literal null"),
            ArgumentCase("true", "true", "the literal true"),
            ArgumentCase("two-objects", "{}{}", "two values"),
            ArgumentCase("trailing-data", "{} x", "trailing data"),
            ArgumentCase("unterminated", '{"a":1', "unterminated"),
            ArgumentCase("trailing-comma", '{"a":1,}', "a trailing comma"),
            ArgumentCase("single-quotes", "{'a':1}", "single-quoted names"),
            ArgumentCase("bare-name", "{a:1}", "an unquoted name"),
            ArgumentCase("comment", '{"a":1 /* c */}', "a comment"),
            ArgumentCase("raw-control", '{"a":"\x01"}', "a raw control character in a string"),
            ArgumentCase("escaped-control", '{"a":"\\u0001\\u0000"}', "escaped control characters are valid"),
            ArgumentCase("not-a-string", {"q": 1}, "arguments that are not text at all"),
            ArgumentCase("null", None, "no arguments"),
        ),
    ),
    ArgumentSection(
        "names",
        ["CIS-JSON-2"],
        (
            ArgumentCase("duplicate", '{"a":1,"a":1}', "the same name twice, even with the same value"),
            ArgumentCase(
                "duplicate-escaped", '{"a":1,"\\u0061":2}', '"\\u0061" is "a": a duplicate after unescaping'
            ),
            ArgumentCase("duplicate-nested", '{"x":{"b":1,"b":2}}', "a duplicate inside a nested object"),
            ArgumentCase(
                "same-name-other-objects",
                '{"a":{"a":1},"b":[{"a":1},{"a":2}]}',
                "one name in several objects",
            ),
            ArgumentCase("case-differs", '{"A":1,"a":2}', "names are compared exactly: A and a differ"),
            ArgumentCase(
                "not-normalized",
                '{"\u00e9":1,"e\u0301":2}',
                "no Unicode normalization: U+00E9 and e + U+0301 differ",
            ),
        ),
    ),
    ArgumentSection(
        "numbers",
        ["CIS-JSON-3"],
        (
            ArgumentCase("nan", '{"a":NaN}', "NaN is not JSON"),
            ArgumentCase("infinity", '{"a":Infinity}', "Infinity is not JSON"),
            ArgumentCase("minus-infinity", '{"a":-Infinity}', "-Infinity is not JSON"),
            ArgumentCase("nan-string", '{"a":"NaN"}', "the string NaN is fine"),
            ArgumentCase("max-double", '{"a":1.7976931348623157e308}', "the largest finite double"),
            ArgumentCase(
                "rounds-to-max", '{"a":1.7976931348623158e308}', "rounds to the largest finite double"
            ),
            ArgumentCase(
                "rounds-to-infinity", '{"a":1.7976931348623159e308}', "rounds to infinity: overflow"
            ),
            ArgumentCase("exponent-308", '{"a":1e308}', "finite"),
            ArgumentCase("exponent-309", '{"a":1e309}', "overflows a double"),
            ArgumentCase("negative-overflow", '{"a":-1e309}', "overflows a double"),
            ArgumentCase("underflow", '{"a":1e-400}', "underflows to zero: accepted"),
            ArgumentCase(
                "zero-huge-exponent",
                '{"a":0e99999999999999999999}',
                "zero times any power of ten is zero: an exponent past any machine integer is accepted",
            ),
            ArgumentCase(
                "huge-negative-exponent",
                '{"a":1e-99999999999999999999}',
                "an exponent past any machine integer underflows to zero: accepted",
            ),
            ArgumentCase(
                "huge-exponent",
                '{"a":1e99999999999999999999}',
                "an exponent past any machine integer overflows a double",
            ),
            ArgumentCase(
                "overflow-tie",
                '{"a":' + str(2**1024 - 2**970) + ".0}",
                "2^1024 - 2^970, halfway between the largest double and 2^1024: rounds to even, "
                "which is infinity: overflow",
            ),
            ArgumentCase(
                "below-overflow-tie",
                '{"a":' + str(2**1024 - 2**970 - 1) + ".0}",
                "one below the halfway point: rounds to the largest double, accepted",
            ),
            ArgumentCase(
                "fraction-overflow",
                '{"a":' + "9" * 400 + ".0}",
                "a 400-digit number with a fraction overflows",
            ),
            ArgumentCase(
                "long-fraction", '{"a":0.' + "1" * 5000 + "}", "5000 fraction digits: finite, accepted"
            ),
            ArgumentCase("minus-zero", '{"a":-0}', "-0 is a number"),
            ArgumentCase("exponent-forms", '{"a":[1E2,1e+2,1e-2,-1.5E-3]}', "exponent forms"),
            ArgumentCase("leading-zero", '{"a":01}', "a leading zero is not JSON"),
            ArgumentCase("leading-dot", '{"a":.5}', "a leading dot is not JSON"),
            ArgumentCase("trailing-dot", '{"a":1.}', "a trailing dot is not JSON"),
            ArgumentCase("plus-sign", '{"a":+1}', "a plus sign is not JSON"),
            ArgumentCase("hex", '{"a":0x10}', "hexadecimal is not JSON"),
            ArgumentCase("bare-minus", '{"a":-}', "a minus sign alone is not a number"),
            ArgumentCase("bare-minus-in-array", '{"a":[-]}', "a minus sign alone, in an array"),
            ArgumentCase("double-minus", '{"a":--1}', "two minus signs are not a number"),
            ArgumentCase("minus-dot", '{"a":-.5}', "a fraction needs an integer part after the sign"),
            ArgumentCase("exponent-without-digits", '{"a":1e}', "an exponent needs digits"),
            ArgumentCase("exponent-sign-only", '{"a":1e+}', "an exponent sign alone is not an exponent"),
        ),
    ),
    ArgumentSection(
        "integers",
        ["CIS-JSON-6"],
        (
            ArgumentCase("4300-digits", '{"a":' + "1" * 4300 + "}", "an integer of 4300 digits: accepted"),
            ArgumentCase("4301-digits", '{"a":' + "1" * 4301 + "}", "an integer of 4301 digits: refused"),
            ArgumentCase(
                "minus-4300-digits",
                '{"a":-' + "1" * 4300 + "}",
                "the sign is not a digit: 4300 digits, accepted",
            ),
            ArgumentCase(
                "minus-4301-digits", '{"a":-' + "1" * 4301 + "}", "4301 digits after the sign: refused"
            ),
            ArgumentCase(
                "400-digits",
                '{"a":' + "9" * 400 + "}",
                "an integer beyond every double: accepted (not a float)",
            ),
            ArgumentCase(
                "in-array",
                '{"a":[1,' + "2" * 4301 + "]}",
                "the limit applies to every integer in the document",
            ),
            ArgumentCase(
                "4301-digits-with-exponent",
                '{"a":' + "1" * 4301 + "e-4300}",
                "4301 digits with an exponent: not an integer literal, judged as a double (about 1.1): "
                "accepted (a reading applying the digit limit to every number refuses it)",
            ),
            ArgumentCase(
                "4301-digits-with-fraction",
                '{"a":' + "1" * 4301 + ".5e-4300}",
                "4301 digits, a fraction and an exponent: a double of about 1.1, accepted",
            ),
        ),
    ),
    ArgumentSection(
        "binary64",
        ["CIS-JSON-6", "CIS-JSON-3", "CIS-REC-2"],
        (
            ArgumentCase(
                "max-safe", '{"a":9007199254740991}', "2^53 - 1, the largest integer a binary64 holds exactly"
            ),
            ArgumentCase("two-to-53", '{"a":9007199254740992}', "2^53: accepted"),
            ArgumentCase(
                "two-to-53-plus-1",
                '{"a":9007199254740993}',
                "2^53 + 1, which a binary64 reader rounds to 2^53 (JavaScript's JSON.parse): accepted, and "
                "the request is kept as written (a reading refusing integers beyond 2^53 - 1 refuses it)",
            ),
            ArgumentCase("minus-two-to-53-plus-1", '{"a":-9007199254740993}', "-(2^53 + 1): accepted"),
            ArgumentCase(
                "two-to-64", '{"a":18446744073709551616}', "2^64: beyond every 64-bit integer, accepted"
            ),
            ArgumentCase("ten-to-30", '{"a":1000000000000000000000000000000}', "10^30: accepted"),
            ArgumentCase(
                "fraction-beyond-53-bits",
                '{"a":9007199254740993.0}',
                "2^53 + 1 written with a fraction: a double that rounds, finite: accepted",
            ),
        ),
    ),
    ArgumentSection(
        "unicode",
        ["CIS-JSON-4"],
        (
            ArgumentCase(
                "escaped-pair", '{"a":"\\ud83d\\ude00"}', "an escaped surrogate pair is one character"
            ),
            ArgumentCase("escaped-high", '{"a":"\\ud800"}', "an escaped lone high surrogate"),
            ArgumentCase("escaped-low", '{"a":"\\udc00"}', "an escaped lone low surrogate"),
            ArgumentCase("escaped-reversed", '{"a":"\\ude00\\ud83d"}', "low then high: two lone surrogates"),
            ArgumentCase(
                "escaped-high-then-char", '{"a":"\\ud83dx"}', "a high surrogate not followed by a low one"
            ),
            ArgumentCase("escaped-in-name", '{"\\ud800":1}', "a lone surrogate in a member name"),
            ArgumentCase("raw-lone", '{"a":"\ud800"}', "a raw lone surrogate in the text"),
            ArgumentCase(
                "escaped-high-raw-low",
                '{"a":"\\ud83d\udc00"}',
                "an escaped high surrogate then a raw low one: two lone surrogates, invalid (a reader that "
                "parses into UTF-16 first joins them into a pair and accepts it)",
            ),
            ArgumentCase(
                "raw-high-escaped-low",
                '{"a":"\ud83d\\ude00"}',
                "a raw high surrogate then an escaped low one: two lone surrogates, invalid",
            ),
            ArgumentCase("raw-supplementary", '{"a":"\U0001f600"}', "a supplementary character"),
            ArgumentCase(
                "noncharacter",
                '{"a":"\uffff\\ufdd0"}',
                "noncharacters are valid Unicode scalar values: accepted",
            ),
        ),
    ),
    ArgumentSection(
        "depth",
        ["CIS-JSON-5"],
        (
            ArgumentCase("depth-1", '{"a":1}', "depth 1"),
            ArgumentCase("depth-4", '{"a":{"b":{"c":{}}}}', "depth 4 = the limit"),
            ArgumentCase("depth-5", '{"a":{"b":{"c":{"d":{}}}}}', "depth 5: over the limit"),
            ArgumentCase("arrays-4", '{"a":[[[]]]}', "arrays count as objects do: depth 4"),
            ArgumentCase("arrays-5", '{"a":[[[[]]]]}', "depth 5"),
            ArgumentCase(
                "siblings", '{"a":{},"b":{},"c":{},"d":{},"e":[],"f":[]}', "siblings do not add up: depth 2"
            ),
            ArgumentCase(
                "brackets-in-strings", '{"a":"[[[[[[{{{{{{"}', "brackets inside strings do not count"
            ),
            ArgumentCase("escaped-quote", '{"a":"\\"[[[[[[[["}', "an escaped quote does not end the string"),
            ArgumentCase(
                "closers-in-strings", '{"a":"]]]]}}}}","b":{"c":{"d":{}}}}', "closers in strings do not count"
            ),
            ArgumentCase(
                "depth-4-with-siblings",
                '{"a":{"b":{"c":{}}},"d":[]}',
                "depth 4 with six brackets in all: accepted",
            ),
            ArgumentCase(
                "depth-5-after-sibling",
                '{"a":{},"b":{"c":{"d":{"e":{}}}}}',
                "a closed sibling does not lower the depth",
            ),
        ),
    ),
)


def _arguments_document() -> dict[str, Any]:
    roomy_run = run_state(byte_budget=1_000_000)
    vectors = [
        preflight_vector(
            f"arguments/{section.prefix}/{case.label}",
            section.requirements,
            case.description,
            envelope={"arguments": case.text},
            limits=section.limits,
            run=roomy_run,
        )
        for section in ARGUMENT_SECTIONS
        for case in section.cases
    ]
    return document(
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


def _ijson_document(arguments: dict[str, Any]) -> dict[str, Any]:
    vectors = []
    for source in arguments["vectors"]:
        if not any(req.startswith("CIS-JSON-") for req in source["requirements"]):
            continue
        made: dict[str, Any] = {
            "id": "ijson/" + source["id"].split("/", 1)[1],
            "kind": "arguments",
            "requirements": source["requirements"],
            "description": source["description"],
            "text": source["envelope"]["arguments"],
            "max_json_depth": source["limits"]["max_json_depth"],
        }
        made["expect"] = arguments_outcome(made)
        vectors.append(made)
    return document(
        "The I-JSON check alone: is `text` one I-JSON object with nesting depth at most "
        "`max_json_depth`? Expect `code` null or INVALID_ARGUMENTS. The same cases as the "
        "CIS-JSON vectors of arguments.json, without the rest of preflight.",
        ["CIS-JSON-1", "CIS-JSON-2", "CIS-JSON-3", "CIS-JSON-4", "CIS-JSON-5", "CIS-JSON-6", "CIS-SPEC-3"],
        {"vectors": vectors},
    )


# ---------------------------------------------------------------------------
# admission.json


class AdmissionCase(NamedTuple):
    """An admission of the fixture call: ``inputs()`` gives the changed preflight inputs."""

    label: str
    description: str
    requirements: list[str]
    inputs: Callable[[], dict[str, Any]]


_BUDGET: Final = ["CIS-RUN-5", "CIS-PRE-8"]
_BYTES: Final = ["CIS-RUN-6", "CIS-PRE-8"]
_DUP: Final = ["CIS-ID-5", "CIS-RETRY-2"]
_REPLAY: Final = ["CIS-RETRY-2", "CIS-RETRY-1"]
_SIZE: Final = len(REQUEST)
_NEW: Final = "tok-new"  # the call's own invocation token (a retry token, not a credential)
_WIDE: Final = '{"q":"\u00e9"}'
_DEADLINE: Final = NOW + 600_000  # the fixture run's deadline
_RUN_EXPIRY: Final = _DEADLINE + 60_000  # and its expiry
_TIGHT: Final = evolve(LIMITS, record_bytes=26)


def _ready_under_key() -> CanonicalRecord:
    return evolve(
        existing_record(),
        status=InvocationStatus.READY,
        evidence_status=EvidenceStatus.EVIDENCE_FOUND,
        raw_response="RAW",
        agent_result="found",
        scope="web",
        updated_at_ms=NOW + 5,
    )


def _failed_under_key(code: ErrorCode) -> CanonicalRecord:
    if code is ErrorCode.STALE_PROJECTION:
        return step(existing_record(), SweptStale(now_ms=NOW + 5, older_than_ms=1))
    return step(existing_record(), Failed(code=code, now_ms=NOW + 5))


def _fate(code: ErrorCode, description: str) -> AdmissionCase:
    return AdmissionCase(
        f"existing/error-{code.value.lower()}",
        f"ERROR/{code.value} under the key: {description}",
        _DUP,
        lambda: {"existing": _failed_under_key(code)},
    )


#: Admission at its edges, in file order.
ADMISSION_CASES: Final[tuple[AdmissionCase, ...]] = (
    AdmissionCase(
        "admitted", "a fresh call: record sequence = used + 1, expiry = now + run ttl", ["CIS-REC-4"], dict
    ),
    AdmissionCase(
        "tool-budget/one-left",
        "used = budget - 1: admitted, budget exactly reached",
        _BUDGET,
        lambda: {"run": run_state(tool_calls_used=2)},
    ),
    AdmissionCase(
        "tool-budget/reached",
        "used = budget: TOOL_BUDGET_EXHAUSTED",
        _BUDGET,
        lambda: {"run": run_state(tool_calls_used=3)},
    ),
    AdmissionCase(
        "tool-budget/zero",
        "a budget of 0 admits nothing",
        _BUDGET,
        lambda: {"run": run_state(tool_call_budget=0)},
    ),
    AdmissionCase(
        "byte-budget/exact",
        f"bytes_used + {_SIZE} = byte_budget: admitted",
        _BYTES,
        lambda: {"run": run_state(bytes_used=1000 - _SIZE)},
    ),
    AdmissionCase(
        "byte-budget/one-over",
        f"bytes_used + {_SIZE} = byte_budget + 1: RUN_BYTES_EXHAUSTED",
        _BYTES,
        lambda: {"run": run_state(bytes_used=1001 - _SIZE)},
    ),
    AdmissionCase(
        "byte-budget/utf8-exact",
        "a 9-character, 10-byte request with 10 bytes left: admitted",
        _BYTES,
        lambda: {"envelope": {"arguments": _WIDE}, "run": run_state(bytes_used=990)},
    ),
    AdmissionCase(
        "byte-budget/utf8-over",
        "10 bytes with 9 left: exhausted (a reading counting characters admits it)",
        _BYTES,
        lambda: {"envelope": {"arguments": _WIDE}, "run": run_state(bytes_used=991)},
    ),
    AdmissionCase(
        "deadline/one-before",
        "now = deadline - 1: admitted",
        ["CIS-RUN-4"],
        lambda: {"now_ms": _DEADLINE - 1},
    ),
    AdmissionCase(
        "deadline/at", "now = deadline: RUN_DEADLINE_EXCEEDED", ["CIS-RUN-4"], lambda: {"now_ms": _DEADLINE}
    ),
    AdmissionCase("deadline/after", "now = deadline + 1", ["CIS-RUN-4"], lambda: {"now_ms": _DEADLINE + 1}),
    AdmissionCase(
        "run/expiry-one-before",
        "now = deadline + ttl - 1: the run state is live, its deadline passed",
        ["CIS-RUN-3", "CIS-RUN-4"],
        lambda: {"now_ms": _RUN_EXPIRY - 1},
    ),
    AdmissionCase(
        "run/expiry-at",
        "now = deadline + ttl: the run state lapsed, RUN_INACTIVE",
        ["CIS-RUN-3"],
        lambda: {"now_ms": _RUN_EXPIRY},
    ),
    AdmissionCase("run/absent", "no run state", ["CIS-RUN-3"], lambda: {"run": None}),
    AdmissionCase(
        "run/cancelled", "a cancelled run", ["CIS-RUN-3"], lambda: {"run": run_state(RunStatus.CANCELLED)}
    ),
    AdmissionCase("run/closed", "a closed run", ["CIS-RUN-3"], lambda: {"run": run_state(RunStatus.CLOSED)}),
    AdmissionCase(
        "run/other-run-state",
        "the run state found belongs to another run id",
        ["CIS-PRE-3"],
        lambda: {"run": run_state(run_id="run-2")},
    ),
    AdmissionCase(
        "record-ttl",
        "a run ttl of 1234 ms: the record expires at now + 1234, not at the run's expiry",
        ["CIS-TTL-1"],
        lambda: {"run": run_state(ttl_ms=1234)},
    ),
    AdmissionCase(
        "existing/live",
        "a live PROJECTING record of another invocation: CALL_IN_PROGRESS (its fate is not known yet)",
        _DUP,
        lambda: {"existing": existing_record()},
    ),
    _fate(ErrorCode.STALE_PROJECTION, "a swept record: the call was abandoned, its own code"),
    _fate(ErrorCode.DURABILITY_NOT_REACHED, "a record the tool never ran for: its own code"),
    _fate(ErrorCode.EXECUTION_FAILED, "the tool ran and failed: DUPLICATE_TOOL_CALL"),
    AdmissionCase(
        "existing/expires-next-ms",
        "the record expires at now + 1: still live, duplicate (in progress)",
        [*_DUP, "CIS-TTL-4"],
        lambda: {"existing": existing_record(expires_at_ms=ADMIT_NOW + 1)},
    ),
    AdmissionCase(
        "existing/expires-now",
        "the record expires at now: absent, a new record",
        [*_DUP, "CIS-TTL-4"],
        lambda: {"existing": existing_record(expires_at_ms=ADMIT_NOW)},
    ),
    AdmissionCase(
        "existing/ready",
        "a READY record under the key: duplicate",
        _DUP,
        lambda: {"existing": _ready_under_key()},
    ),
    AdmissionCase(
        "replay/same-token",
        "the live record has this invocation's token: a replay, nothing charged",
        _REPLAY,
        lambda: {
            "existing": existing_record("tok-new"),
            "run": run_state(tool_calls_used=1, bytes_used=_SIZE),
        },
    ),
    AdmissionCase(
        "replay/cancelled-run",
        "a retried create is itself even after the run was cancelled",
        _REPLAY,
        lambda: {
            "existing": existing_record("tok-new"),
            "run": run_state(RunStatus.CANCELLED, tool_calls_used=1),
        },
    ),
    AdmissionCase(
        "replay/past-deadline",
        "a retried create is itself even after the deadline",
        _REPLAY,
        lambda: {
            "existing": existing_record("tok-new", expires_at_ms=_RUN_EXPIRY),
            "now_ms": _DEADLINE,
            "run": run_state(tool_calls_used=1),
        },
    ),
    AdmissionCase(
        "replay/no-run",
        "no run state: RUN_INACTIVE, not a replay",
        _REPLAY,
        lambda: {"existing": existing_record("tok-new"), "run": None},
    ),
    AdmissionCase(
        "replay/expired",
        "the same token on an expired record: a new admission",
        _REPLAY,
        lambda: {"existing": existing_record("tok-new", expires_at_ms=ADMIT_NOW)},
    ),
    AdmissionCase(
        "replay/case-differs",
        "tokens are compared exactly: TOK-NEW is another invocation",
        _REPLAY,
        lambda: {"existing": existing_record("TOK-NEW")},
    ),
    AdmissionCase(
        "replay/empty-token",
        "an empty token never identifies an invocation: duplicate",
        _REPLAY,
        lambda: {"existing": existing_record(""), "token": ""},
    ),
    AdmissionCase(
        "replay/expired-run",
        "the live record has this call's token but the run state lapsed (now = deadline + ttl): an "
        "expired run state is absent, RUN_INACTIVE (a reading replaying on any stored run state "
        "answers the record)",
        _REPLAY,
        lambda: {
            "existing": existing_record("tok-new", expires_at_ms=_RUN_EXPIRY + 1000),
            "now_ms": _RUN_EXPIRY,
        },
    ),
    AdmissionCase(
        "replay/ready",
        "the record under the key has this call's token and is READY: still a replay, whatever its "
        "status (a reading replaying PROJECTING records only says DUPLICATE_TOOL_CALL)",
        _REPLAY,
        lambda: {"existing": evolve(_ready_under_key(), invocation_token=_NEW)},
    ),
    AdmissionCase(
        "replay/error",
        "the record under the key has this call's token and is ERROR: a replay",
        _REPLAY,
        lambda: {"existing": evolve(_failed_under_key(ErrorCode.EXECUTION_FAILED), invocation_token=_NEW)},
    ),
    AdmissionCase(
        "token/empty-admitted",
        "an empty token is a text: the call is admitted with it (it can never be replayed)",
        ["CIS-RETRY-1", "CIS-PRE-8"],
        lambda: {"token": ""},
    ),
    AdmissionCase(
        "token/null",
        "an invocation token that is not a text (null): a caller error",
        ["CIS-RETRY-1", "CIS-KERN-2"],
        lambda: {"token": None},
    ),
    AdmissionCase(
        "token/number",
        "an invocation token that is a number: a caller error",
        ["CIS-RETRY-1", "CIS-KERN-2"],
        lambda: {"token": 7},
    ),
    AdmissionCase(
        "token/null-on-cancelled-run",
        "a null token on a cancelled run: the caller error first (invalid input, not RUN_INACTIVE)",
        ["CIS-RETRY-1", "CIS-KERN-2"],
        lambda: {"token": None, "run": run_state(RunStatus.CANCELLED)},
    ),
    AdmissionCase(
        "now/max-safe",
        "now = 2^53 - 1: a time in range, past the run's expiry: RUN_INACTIVE",
        ["CIS-KERN-2", "CIS-RUN-3"],
        lambda: {"now_ms": MAX_SAFE_INT},
    ),
    AdmissionCase(
        "now/two-to-53",
        "now = 2^53: outside [0, 2^53 - 1], a caller error",
        ["CIS-KERN-2"],
        lambda: {"now_ms": MAX_SAFE_INT + 1},
    ),
    AdmissionCase(
        "now/two-to-53-plus-1",
        "now = 2^53 + 1 (a binary64 reader sees 2^53): a caller error either way",
        ["CIS-KERN-2"],
        lambda: {"now_ms": MAX_SAFE_INT + 2},
    ),
    AdmissionCase("now/negative", "now = -1: a caller error", ["CIS-KERN-2"], lambda: {"now_ms": -1}),
    AdmissionCase(
        "now/caller-error-first",
        "now = 2^53 and an unsafe tool_call_id: the caller error is decided first (invalid input, "
        "not UNSAFE_TOOL_CALL_ID)",
        ["CIS-KERN-2", "CIS-PRE-2"],
        lambda: {"now_ms": MAX_SAFE_INT + 1, "envelope": {"tool_call_id": "call 1"}},
    ),
    AdmissionCase(
        "record-limit/at",
        "the new record is 26 bytes (ids + tool name + request) = the limit",
        ["CIS-SIZE-5"],
        lambda: {"limits": _TIGHT},
    ),
    AdmissionCase(
        "record-limit/one-over",
        "26 bytes against 25: REQUEST_TOO_LARGE, nothing charged",
        ["CIS-SIZE-5"],
        lambda: {"limits": evolve(_TIGHT, record_bytes=25)},
    ),
    AdmissionCase(
        "record-limit/after-tool-budget",
        "the record limit is checked after the budgets: TOOL_BUDGET_EXHAUSTED wins",
        ["CIS-SIZE-5", "CIS-PRE-8"],
        lambda: {"limits": evolve(_TIGHT, record_bytes=25), "run": run_state(tool_calls_used=3)},
    ),
    AdmissionCase(
        "record-limit/after-byte-budget",
        "the record limit is checked after the budgets: RUN_BYTES_EXHAUSTED wins",
        ["CIS-SIZE-5", "CIS-PRE-8"],
        lambda: {"limits": evolve(_TIGHT, record_bytes=25), "run": run_state(bytes_used=1000)},
    ),
)


def _admission_document() -> dict[str, Any]:
    vectors = [
        preflight_vector(f"admission/{case.label}", case.requirements, case.description, **case.inputs())
        for case in ADMISSION_CASES
    ]
    vectors += _admission_order_vectors()
    return document(
        "Admission at its edges: budgets reached exactly and exceeded by one, the deadline and "
        "the run's expiry (deadline + ttl) at now - 1, now and now + 1, a record expiring at now, "
        "and the invocation-token replay. Run as preflight_order.json.",
        ["CIS-PRE-8", "CIS-RUN-3", "CIS-RUN-4", "CIS-RUN-5", "CIS-RUN-6", "CIS-RETRY-2", "CIS-SPEC-3"],
        {"vectors": vectors},
    )


#: The admission checks in order (CIS-PRE-8), after checks 1-6 passed; ``None`` is the replay.
ADMISSION_ORDER: Final[tuple[ErrorCode | None, ...]] = (
    None,
    ErrorCode.RUN_INACTIVE,
    ErrorCode.RUN_MISMATCH,
    ErrorCode.RUN_DEADLINE_EXCEEDED,
    ErrorCode.CALL_IN_PROGRESS,
    ErrorCode.TOOL_BUDGET_EXHAUSTED,
    ErrorCode.RUN_BYTES_EXHAUSTED,
    ErrorCode.REQUEST_TOO_LARGE,
)
#: Admission faults one input cannot hold together: the record under the key is the
#: caller's own (a replay) or another invocation's (a duplicate), not both.
_ADMISSION_EXCLUSIVE: Final = frozenset({None, ErrorCode.CALL_IN_PROGRESS})


def _admission_faults(faults: frozenset[ErrorCode | None]) -> dict[str, Any]:
    """Preflight inputs whose admission fails exactly ``faults``.

    ``None`` in ``faults``: the key holds the call's own record (a replay).
    """
    run = run_state()
    if ErrorCode.RUN_INACTIVE in faults:
        run = evolve(run, status=RunStatus.CANCELLED)
    if ErrorCode.RUN_MISMATCH in faults:
        run = evolve(run, run_id="run-2")
    if ErrorCode.TOOL_BUDGET_EXHAUSTED in faults:
        run = evolve(run, tool_calls_used=3)
    if ErrorCode.RUN_BYTES_EXHAUSTED in faults:
        run = evolve(run, bytes_used=1000)
    inputs: dict[str, Any] = {"run": run}
    if ErrorCode.RUN_DEADLINE_EXCEEDED in faults:
        inputs["now_ms"] = _DEADLINE
    if ErrorCode.REQUEST_TOO_LARGE in faults:
        inputs["limits"] = evolve(LIMITS, record_bytes=25)
    if ErrorCode.CALL_IN_PROGRESS in faults or None in faults:
        token = _NEW if None in faults else "tok-first"
        inputs["existing"] = existing_record(token, expires_at_ms=_RUN_EXPIRY)
    return inputs


def _admission_order_vectors() -> list[dict[str, Any]]:
    vectors = []
    for first, second in itertools.combinations(ADMISSION_ORDER, 2):
        if {first, second} == _ADMISSION_EXCLUSIVE:
            continue
        names = [code.value if code is not None else "REPLAY" for code in (first, second)]
        made = preflight_vector(
            f"admission/order/{names[0]}+{names[1]}",
            ["CIS-PRE-8", "CIS-PRE-2"],
            f"fails {names[0]} and {names[1]}: the earlier wins",
            **_admission_faults(frozenset({first, second})),
        )
        expect = made["expect"]
        won = None if expect.get("code") is None and expect.get("replayed") else expect.get("code")
        if won != (None if first is None else first.value):
            raise AssertionError(f"admission order {names}: {expect}")
        vectors.append(made)
    return vectors


# ---------------------------------------------------------------------------
# authorization.json


def _policy(**changes: Any) -> dict[str, Any]:
    policy = {"name": TOOL, "authorized": True, "read_only": True, "timeout_ms": 1000}
    return {**policy, **changes}


class PolicyCase(NamedTuple):
    """The fixture call against ``policy`` (None: no policy) with the envelope's ``tool_name``."""

    label: str
    description: str
    requirements: list[str]
    policy: dict[str, Any] | None
    tool_name: Any = TOOL


_AUTH: Final = ["CIS-PRE-5", "CIS-PRE-4"]
_READ: Final = ["CIS-PRE-6", "CIS-PRE-4"]

#: Authorization and read-only fail closed: every reading of the policy, both sides.
POLICY_CASES: Final[tuple[PolicyCase, ...]] = (
    PolicyCase(
        "passes",
        "the policy of the tool, authorized and read-only (booleans true): admitted",
        _AUTH,
        _policy(),
    ),
    PolicyCase(
        "no-policy",
        "no policy (an unknown tool): UNAUTHORIZED, checks 5 and 6 are not skipped",
        _AUTH,
        None,
    ),
    PolicyCase(
        "other-name",
        "the policy names another tool: UNAUTHORIZED (a reading that ignores the name admits it)",
        _AUTH,
        _policy(name="fetch"),
    ),
    PolicyCase(
        "name-case",
        "the envelope says Search, the policy search: names are compared exactly, UNAUTHORIZED",
        _AUTH,
        _policy(),
        "Search",
    ),
    PolicyCase(
        "policy-name-case",
        "the envelope says search, the policy SEARCH: UNAUTHORIZED",
        _AUTH,
        _policy(name="SEARCH"),
    ),
    PolicyCase(
        "name-padded",
        "the envelope says 'search ' (trailing space): UNAUTHORIZED",
        _AUTH,
        _policy(),
        "search ",
    ),
    PolicyCase(
        "name-lone-surrogate-differs",
        "the envelope's name is search + a lone surrogate: another name, UNAUTHORIZED",
        _AUTH,
        _policy(),
        "search\ud800",
    ),
    PolicyCase(
        "name-lone-surrogate-equal",
        "both names are search + a lone surrogate: equal, but a name with no UTF-8 form cannot be "
        "stored: UNAUTHORIZED",
        _AUTH,
        _policy(name="search\ud800"),
        "search\ud800",
    ),
    PolicyCase("name-null", "the envelope has no tool name (null): UNAUTHORIZED", _AUTH, _policy(), None),
    PolicyCase(
        "name-number", "the envelope's tool name is the number 7: UNAUTHORIZED", _AUTH, _policy(name=7), 7
    ),
    PolicyCase("name-list", "the envelope's tool name is a list: UNAUTHORIZED", _AUTH, _policy(), [TOOL]),
    PolicyCase("policy-name-null", "the policy's name is null: UNAUTHORIZED", _AUTH, _policy(name=None)),
    *(
        PolicyCase(
            f"authorized-{label}",
            f"authorized is {shown}, not the boolean true: UNAUTHORIZED (fails closed)",
            _AUTH,
            _policy(authorized=value),
        )
        for label, shown, value in (
            ("false", "false", False),
            ("string-true", 'the string "true"', "true"),
            ("string-false", 'the string "false"', "false"),
            ("one", "the number 1", 1),
            ("zero", "the number 0", 0),
            ("null", "null", None),
            ("object", "an object", {}),
            ("list", "a list", [True]),
        )
    ),
    *(
        PolicyCase(
            f"read-only-{label}",
            f"read_only is {shown}, not the boolean true: NOT_READ_ONLY (fails closed)",
            _READ,
            _policy(read_only=value),
        )
        for label, shown, value in (
            ("false", "false", False),
            ("string-true", 'the string "true"', "true"),
            ("one", "the number 1", 1),
            ("null", "null", None),
        )
    ),
    PolicyCase(
        "both-refused",
        "authorized and read_only both false: UNAUTHORIZED, checked first",
        [*_AUTH, "CIS-PRE-2"],
        _policy(authorized=False, read_only=False),
    ),
    PolicyCase(
        "both-strings",
        'authorized and read_only both the string "true": UNAUTHORIZED',
        [*_AUTH, "CIS-PRE-2"],
        _policy(authorized="true", read_only="true"),
    ),
)


def _authorization_document() -> dict[str, Any]:
    vectors = [
        preflight_vector(
            f"authorization/{case.label}",
            case.requirements,
            case.description,
            envelope={"tool_name": case.tool_name},
            policy=case.policy,
        )
        for case in POLICY_CASES
    ]
    assert PREFLIGHT_ORDER.index(ErrorCode.UNAUTHORIZED) < PREFLIGHT_ORDER.index(ErrorCode.NOT_READ_ONLY)
    return document(
        "Authorization and read-only fail closed (checks 5 and 6): the call's tool name must be a text "
        "equal, code point for code point, to the policy's name and have a UTF-8 form, and the policy's "
        "`authorized` and `read_only` must each be the boolean true; no policy at all is UNAUTHORIZED. "
        "`policy` is given as the harness declared it (any JSON value per member). Run as "
        "preflight_order.json.",
        ["CIS-PRE-4", "CIS-PRE-5", "CIS-PRE-6", "CIS-SPEC-3"],
        {"vectors": vectors},
    )


def preflight_documents() -> dict[str, dict[str, Any]]:
    """``ids.json``, ``arguments.json``, ``ijson.json``, ``admission.json`` and ``authorization.json``."""
    arguments = _arguments_document()
    return {
        "ids.json": _ids_document(),
        "arguments.json": arguments,
        "ijson.json": _ijson_document(arguments),
        "admission.json": _admission_document(),
        "authorization.json": _authorization_document(),
    }
