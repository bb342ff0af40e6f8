"""Conformance vectors, generated from the kernel (CIS-SPEC-3).

Theory of operation
-------------------
:func:`generate_vectors` builds, from the kernel's own tables and functions, the
documents of ``spec/vectors/`` (``scripts/generate_vectors.py`` writes them; a test
regenerates them and fails on any difference, so they never drift from the kernel).
The cases live in one module per family of rules, each a set of data rows, over one
module of shared fixtures; the modules form a tree (no module imports one above it):

- :mod:`._vectors_fixtures`: constants, the fixture call, records, runs, JSON forms;
- :mod:`._vectors_outcomes`: :func:`run_vector`, how each vector kind is run;
- :mod:`._vectors_lifecycle`: every table row, illegal pair, run row, pair of
  preflight checks;
- :mod:`._vectors_preflight`: ids, the arguments text, admission, authorization;
- :mod:`._vectors_rules`: limits, the completion compare-and-set, references, the
  run lifecycle at its edges, well-formedness, keys, caller errors;
- :mod:`._vectors_effects`: store effects and what readers see;
- this module: the assembly, and ``error_codes.json`` (every code with its fixed
  message and one vector producing it).

A vector is language-neutral JSON: kernel values are spelled with their field names,
enum values as strings, times in integer ms, text as JSON strings (ASCII-escaped, so
a lone surrogate survives). :func:`run_vector` replays one vector through the kernel
and returns what it got, so a test can check every vector, and other implementations
can read the same files to do the same with their own kernel.
"""

from __future__ import annotations

import json
from typing import Any

from ..kernel import ERROR_MESSAGES, ErrorCode
from ._vectors_effects import effect_documents
from ._vectors_fixtures import VECTOR_FORMAT, VECTOR_VERSION, document
from ._vectors_lifecycle import EXCLUSIVE, lifecycle_documents
from ._vectors_outcomes import INVALID_INPUT, UnknownKindError, preflight_outcome, run_vector
from ._vectors_preflight import preflight_documents
from ._vectors_rules import rule_documents

__all__ = [
    "EXCLUSIVE",
    "INVALID_INPUT",
    "VECTOR_FORMAT",
    "VECTOR_VERSION",
    "UnknownKindError",
    "all_vectors",
    "dump_document",
    "generate_vectors",
    "preflight_outcome",
    "run_vector",
]


def all_vectors(documents: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Every vector of ``documents``: under ``vectors``, ``rows[].vectors`` and ``codes[].vector``."""
    found: list[dict[str, Any]] = []
    for doc in documents.values():
        found += doc.get("vectors", [])
        found += [made for row in doc.get("rows", []) for made in row["vectors"]]
        found += [entry["vector"] for entry in doc.get("codes", [])]
    return found


def _codes_of(made: dict[str, Any]) -> set[str]:
    expect = made["expect"]
    codes = set()
    if expect.get("code"):
        codes.add(expect["code"])
    record = expect.get("record")
    if record and record.get("error_code"):
        codes.add(record["error_code"])
    return codes


def _error_codes_document(sources: list[dict[str, Any]]) -> dict[str, Any]:
    found: dict[str, dict[str, Any]] = {}
    for made in sources:
        for code in sorted(_codes_of(made)):
            found.setdefault(code, made)
    missing = sorted(code.value for code in ErrorCode if code.value not in found)
    if missing:
        raise LookupError(
            f"no vector produces {missing}: add a case that ends in each code to the case tables of "
            "invocation_store/oracle/_vectors_*.py (the lifecycle table's rows for a Failed code, "
            "_vectors_preflight.py for a refusal)"
        )
    codes = [
        {"code": code.value, "message": ERROR_MESSAGES[code], "vector": found[code.value]}
        for code in ErrorCode
    ]
    return document(
        "Every error code of the closed set, with its fixed agent-facing message and one vector "
        "(of the kinds in the other files) that produces it.",
        ["CIS-ERR-1", "CIS-FAIL-1", "CIS-SPEC-3"],
        {"codes": codes},
    )


def generate_vectors() -> dict[str, dict[str, Any]]:
    """Every vector document by file name (``transitions.json``, ...), built from the kernel.

    Raises ``LookupError``/``AssertionError`` if the kernel grew a table row, a code or
    a check that no case covers, or a case no longer shows what it was made for.
    """
    documents = {**lifecycle_documents(), **preflight_documents(), **rule_documents(), **effect_documents()}
    documents["error_codes.json"] = _error_codes_document(all_vectors(documents))
    return documents


def dump_document(doc: dict[str, Any]) -> str:
    """The exact text of a vector (or schema) file: sorted keys, ASCII, 1-space indent, final newline."""
    return json.dumps(doc, ensure_ascii=True, sort_keys=True, indent=1) + "\n"
