"""Kernel mutants, and whether the conformance vectors alone kill them (CIS-SPEC-3).

Usage::

    .venv/bin/python scripts/kernel_mutants.py list               # every mutant, one per line
    .venv/bin/python scripts/kernel_mutants.py run [--every N]    # run them through the vectors
    .venv/bin/python scripts/kernel_mutants.py run --only rivals  # the rival readings alone (a minute)
    .venv/bin/python scripts/kernel_mutants.py suite              # equivalents vs tests/kernel

A *mutant* is the kernel with one small change to one decision: a comparison
operator moved across its boundary (``<`` and ``<=``, ``>`` and ``>=``), negated
(``==`` and ``!=``, ``is`` and ``is not``, ``in`` and ``not in``), ``and`` and
``or`` swapped, a ``not`` dropped, ``+`` and ``-`` swapped, or an integer
constant moved by one. Mutants are generated from the kernel's syntax tree
(:func:`generate`), so the list follows the kernel as it changes; each has a
stable name made of its module, its function, the expression it changes and the
change (never a line number, which moves with every edit).

:data:`RIVALS` adds the rival readings of the specification that an independent
implementer could pick (sizes in characters, a sweep age from the last update, a
content-only result limit, a same-token admission as a duplicate; round 3: truthy or
`== true` authorization, a name compared case-insensitively, a missing policy that
skips checks 5-6, Begin applying the request limit, caller errors after the phase,
replays on a lapsed run or only while PROJECTING, charges of ACTIVE runs only, whole
record replays, unsafe run ids cited UNSAFE_ID, duplicates removed among facts only,
JavaScript's UTF-16 reading of escapes, unsafe integers refused; issue 22's audit: a
bare minus as a number, Begin judging the id before the phase, trimmed tool names, a
request stored re-serialized by a binary64 reader, ...), written as
patches of the kernel's text, or of the adapter's reading of a vector's JSON where
the rule is about that JSON form (what a projection is, which texts name a code);
each must be killed too.

The vectors *kill* a mutant when ``scripts/run_vectors.py`` (which loads only the
JSON files) reports at least one failing vector against the mutated kernel behind
``invocation_store.oracle.vector_adapter``. :data:`EQUIVALENT` lists the mutants
that no vector can kill, each with the reason; ``tests/oracle/test_vector_mutants.py``
checks that every other mutant is killed.
"""

from __future__ import annotations

import argparse
import ast
import compileall
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KERNEL = ROOT / "invocation_store" / "kernel"
#: Every kernel module holding a decision: their decisions are mutated. ``_models.py``
#: is one (its validators refuse caller errors, CIS-SIZE-1; ``terminal``).
MODULES = (
    "_ids.py",
    "_ijson.py",
    "_sizes.py",
    "_state.py",
    "_admission.py",
    "_runs.py",
    "_refs.py",
    "_preflight.py",
    "_effects.py",
    "_views.py",
    "_lifetime.py",
    "_models.py",
)

#: Kernel modules that hold no decision, each with the reason (every other module is in MODULES).
NO_DECISIONS: dict[str, str] = {
    "__init__.py": "re-exports only",
    "_codes.py": "the closed set of error codes and their fixed messages: a table, checked whole by "
    "error_codes.json",
}

_SWAP: dict[type[ast.AST], type[ast.AST]] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.And: ast.Or,
    ast.Or: ast.And,
}
_SYMBOL: dict[type[ast.AST], str] = {
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Is: "is",
    ast.IsNot: "is not",
    ast.In: "in",
    ast.NotIn: "not in",
    ast.Add: "+",
    ast.Sub: "-",
    ast.And: "and",
    ast.Or: "or",
}


@dataclass(frozen=True)
class Mutant:
    """One mutant: ``name`` is stable, ``module`` the file changed (in the package), ``source`` its text."""

    name: str
    module: str
    source: str


#: Kernel functions outside the language-neutral contract, so outside the vectors'
#: reach, each with the reason; the test suite (``tests/kernel``) covers them instead.
OUT_OF_CONTRACT: dict[str, str] = {
    "_ijson.load_document": (
        "decodes a provider payload or transcript (a Python harness's input), not an arguments "
        "text; another implementation receives arguments text. tests/kernel/test_ijson_documents.py"
    ),
    "_ijson.violates_ijson": "the same: it judges one call inside a decoded payload",
    "_ijson._marking_pairs": "the same: a hook of load_document",
    "_ijson._marking_float": "the same: a hook of load_document",
    "_ijson._marking_int": "the same: a hook of load_document",
    "_ijson._valid_unicode": "the same: a helper of violates_ijson",
}


def _functions(tree: ast.Module, module: str = "") -> Iterator[tuple[str, ast.FunctionDef]]:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            if f"{module}.{node.name}" in OUT_OF_CONTRACT:
                continue
            yield node.name, node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    yield f"{node.name}.{item.name}", item


def _sites(function: ast.FunctionDef) -> Iterator[tuple[ast.AST, str, int]]:
    """(node, change, operand index) of every mutable site in ``function``, in tree order."""
    body = function.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    for statement in body:
        for node in ast.walk(statement):
            if isinstance(node, ast.Compare):
                for index, op in enumerate(node.ops):
                    yield node, f"{_SYMBOL[type(op)]} -> {_SYMBOL[_SWAP[type(op)]]}", index
            elif (isinstance(node, ast.BinOp) and type(node.op) in _SWAP) or isinstance(node, ast.BoolOp):
                yield node, f"{_SYMBOL[type(node.op)]} -> {_SYMBOL[_SWAP[type(node.op)]]}", 0
            elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
                yield node, "drop not", 0
            elif (
                isinstance(node, ast.Constant)
                and type(node.value) is int
                and not isinstance(getattr(node, "parent", None), ast.Subscript)
            ):
                yield node, f"{node.value} -> {node.value + 1}", 0


def _replace_child(parent: ast.AST, old: ast.AST, new: ast.AST) -> None:
    for field, value in ast.iter_fields(parent):
        if value is old:
            setattr(parent, field, new)
            return
        if isinstance(value, list):
            for index, item in enumerate(value):
                if item is old:
                    value[index] = new
                    return
    raise LookupError("child not found")


def _mutated_source(tree: ast.Module, parents: dict[int, ast.AST], node: ast.AST, index: int) -> str:
    """The module text with one change at ``node``; the tree is restored before returning."""
    if isinstance(node, ast.Compare):
        original = node.ops[index]
        node.ops[index] = _SWAP[type(original)]()
        try:
            return ast.unparse(tree)
        finally:
            node.ops[index] = original
    if isinstance(node, (ast.BinOp, ast.BoolOp)):
        original_op = node.op
        node.op = _SWAP[type(original_op)]()  # type: ignore[assignment]
        try:
            return ast.unparse(tree)
        finally:
            node.op = original_op
    if isinstance(node, ast.UnaryOp):
        parent = parents[id(node)]
        _replace_child(parent, node, node.operand)
        try:
            return ast.unparse(tree)
        finally:
            _replace_child(parent, node.operand, node)
    assert isinstance(node, ast.Constant)
    node.value += 1
    try:
        return ast.unparse(tree)
    finally:
        node.value -= 1


def generate(kernel: Path = KERNEL) -> list[Mutant]:
    """Every mutant of :data:`MODULES`, in a fixed order, with unique stable names."""
    mutants: list[Mutant] = []
    for module in MODULES:
        tree = ast.parse((kernel / module).read_text(encoding="utf-8"))
        parents = {id(child): parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
        for function_name, function in _functions(tree, module[:-3]):
            seen: dict[str, int] = {}
            for node, change, index in list(_sites(function)):
                expression = ast.unparse(node)
                if len(expression) > 70:
                    expression = expression[:67] + "..."
                key = f"{module[:-3]}.{function_name}: `{expression}` {change}"
                seen[key] = seen.get(key, 0) + 1
                name = key if seen[key] == 1 else f"{key} #{seen[key]}"
                source = _mutated_source(tree, parents, node, index)
                mutants.append(Mutant(name=name, module=f"kernel/{module}", source=source))
    return mutants


#: Mutants that no vector can kill, each with the reason (the name is the key).
EQUIVALENT: dict[str, str] = {
    "_ijson._depth_exceeds: `text.count('{') + text.count('[') <= max_depth` <= -> <": (
        "the bracket count is only a shortcut: at count == max_depth the full scan runs instead and "
        "gives the same answer, since a text with at most max_depth brackets cannot nest deeper"
    ),
    "_sizes.text_exceeds: `4 * length <= limit` <= -> <": (
        "a shortcut only: at 4 * length == limit the exact count runs instead and gives the same answer"
    ),
    "_sizes.text_exceeds: `4` 4 -> 5": (
        "a shortcut only: with 5 the shortcut answers within for fewer texts, and the exact count "
        "decides the others alike"
    ),
    "_admission.charge: `delta > 0` > -> >=": ("at delta == 0 both branches answer 0"),
    "_admission.check_begin: `1` 1 -> 2": (
        "the sequence of check_begin's Begin is a placeholder: the refusals of the Begin row (ids, run "
        "id, record size) never read it, and check_begin returns only a refusal, never the record"
    ),
    "_admission.check_begin: `1` 1 -> 2 #2": (
        "the TTL of check_begin's Begin is a placeholder, for the same reason as its sequence"
    ),
    "_admission.check_begin: `0` 0 -> 1": (
        "the times of check_begin are placeholders too (the time its caller-error check is given, and "
        "its Begin row's): a request carries no time (CIS-STORE-10), any time in the domain passes that "
        "check, and the run-independent refusals of the Begin row never read it"
    ),
    "_admission.check_begin: `0` 0 -> 1 #2": (
        "the other of check_begin's two placeholder times, for the same reason as the first"
    ),
    "_state.check_completion: `getattr(before, name) != getattr(after, name)` != -> ==": (
        "it only lists, in the text of a caller error, which fields changed; the outcome (a caller "
        "error) is the same, and vectors never compare error texts"
    ),
    "_state.is_well_formed: `0` 0 -> 1 #3": (
        "the expiry's lower bound: an expiry of 0 never passes expires_at_ms > created_at_ms with "
        "created_at_ms >= 0, so a bound of 0 or 1 refuses the same records"
    ),
}


@dataclass(frozen=True)
class Rival:
    """A rival reading of a rule: ``patches`` (text replaced, replacement) applied to ``path``.

    ``path`` is relative to the package: a kernel module (``kernel/_preflight.py``), or
    the module that reads vectors into kernel values (``oracle/_vectors_outcomes.py``)
    where the rule is about the JSON form of an input (what counts as a projection, which
    texts name an error code), which is this project's reading of the vector files.
    """

    name: str
    path: str
    patches: tuple[tuple[str, str], ...]


def _kernel(name: str, module: str, old: str, new: str) -> Rival:
    return Rival(name, f"kernel/{module}", ((old, new),))


#: Round 2's rival readings, as kernel patches: (name, module, text replaced, replacement).
_ROUND_2: tuple[tuple[str, str, str, str], ...] = (
    (
        "record size counts the invocation token",
        "_sizes.py",
        "    return (\n        len(record.run_id)",
        "    return (\n        len(record.invocation_token)\n        + len(record.run_id)",
    ),
    (
        "record size leaves out the ids",
        "_sizes.py",
        "        len(record.run_id)\n        + len(record.tool_call_id)\n        + _n(record.tool_name)",
        "        _n(record.tool_name)",
    ),
    (
        "sizes count characters, not UTF-8 bytes",
        "_sizes.py",
        "    if str.isascii(text):\n        return str.__len__(text)\n"
        '    return len(str.encode(text, "utf-8", "surrogatepass"))',
        "    return str.__len__(text)",
    ),
    (
        "a lone surrogate counts one replacement byte (Java getBytes)",
        "_sizes.py",
        'return len(str.encode(text, "utf-8", "surrogatepass"))',
        'return len(str.encode(text, "utf-8", "replace"))',
    ),
    (
        "raw size counted in characters",
        "_sizes.py",
        '    try:\n        return len(str.encode(text, "utf-8"))',
        '    try:\n        str.encode(text, "utf-8")\n        return str.__len__(text)',
    ),
    (
        "the sweep age runs from the last update",
        "_state.py",
        "event.now_ms - record.created_at_ms < event.older_than_ms",
        "event.now_ms - record.updated_at_ms < event.older_than_ms",
    ),
    (
        "a sweep needs age > threshold",
        "_state.py",
        "event.now_ms - record.created_at_ms < event.older_than_ms",
        "event.now_ms - record.created_at_ms <= event.older_than_ms",
    ),
    (
        "the byte budget may not be reached exactly",
        "_admission.py",
        "if run.bytes_used + request_size > run.byte_budget:",
        "if run.bytes_used + request_size >= run.byte_budget:",
    ),
    (
        "a same-token admission is a duplicate",
        "_admission.py",
        "        and request.invocation_token\n",
        "        and False\n",
    ),
    (
        "an empty raw response means the raw is still awaited",
        "_state.py",
        "return Phase.AWAITING_RAW if record.raw_response is None else",
        "return Phase.AWAITING_RAW if not record.raw_response else",
    ),
    (
        "a completion charges the raw response only",
        "_admission.py",
        "delta = outcome_bytes(after) - outcome_bytes(before)",
        "delta = (utf8_len(after.raw_response or '') or 0)\n"
        "    delta -= utf8_len(before.raw_response or '') or 0",
    ),
    (
        "the agent result limit counts the content only",
        "_state.py",
        "if content_size + scope_size > limits.agent_result_bytes:",
        "if content_size > limits.agent_result_bytes:",
    ),
    (
        "records expire with the run (deadline + ttl)",
        "_admission.py",
        "sequence=run.tool_calls_used + 1,\n        ttl_ms=run.ttl_ms,",
        "sequence=run.tool_calls_used + 1,\n        ttl_ms=run.expires_at_ms - now_ms,",
    ),
    (
        "a live CANCELLED or CLOSED run re-opens unchanged",
        "_runs.py",
        "        existing.status is RunStatus.ACTIVE\n        and existing.run_id == run_id",
        "        existing.run_id == run_id",
    ),
    (
        "a run cannot be opened past its deadline",
        "_runs.py",
        "    if existing is None or now_ms >= existing.expires_at_ms:",
        "    if deadline_ms <= now_ms:\n        return ErrorCode.RUN_DEADLINE_EXCEEDED\n"
        "    if existing is None or now_ms >= existing.expires_at_ms:",
    ),
    (
        "blank means Unicode whitespace (str.strip)",
        "_ids.py",
        "    return not str.strip(text, _BLANK)",
        "    return not str.strip(text)",
    ),
    (
        "whitespace around the object is trimmed before parsing",
        "_ijson.py",
        "value = _DECODER.decode(text)",
        "value = _DECODER.decode(text.strip())",
    ),
    (
        "every number is a double (integers overflow like floats)",
        "_ijson.py",
        "parse_constant=_constant, parse_float=_float)",
        "parse_constant=_constant, parse_float=_float, parse_int=_float)",
    ),
    (
        "numbers that overflow a double are accepted",
        "_ijson.py",
        "if not math.isfinite(value):",
        "if False:",
    ),
    (
        "an empty container has depth 0",
        "_ijson.py",
        "            if depth > max_depth:",
        "            if depth > max_depth + 1:",
    ),
    (
        "brackets inside strings count toward the depth",
        "_ijson.py",
        "    for match in _TOKEN.finditer(text):\n        token = match.group()",
        "    for token in text:",
    ),
    (
        "the arguments are parsed before their size is checked",
        "_preflight.py",
        "    if type(arguments) is str and text_exceeds(arguments, limits.request_bytes):\n"
        "        return ErrorCode.REQUEST_TOO_LARGE\n"
        "    parsed = parse_arguments(arguments, limits.max_json_depth)\n"
        "    if isinstance(parsed, ErrorCode):\n"
        "        return ErrorCode.INVALID_ARGUMENTS\n",
        "    parsed = parse_arguments(arguments, limits.max_json_depth)\n"
        "    if isinstance(parsed, ErrorCode):\n"
        "        return ErrorCode.INVALID_ARGUMENTS\n"
        "    if type(arguments) is str and text_exceeds(arguments, limits.request_bytes):\n"
        "        return ErrorCode.REQUEST_TOO_LARGE\n",
    ),
    (
        "an unsafe id is cited as the empty string",
        "_refs.py",
        "tool_call_id=tool_call_id if is_safe_id(tool_call_id) else None,",
        'tool_call_id=tool_call_id if is_safe_id(tool_call_id) else "",',
    ),
    (
        "a fact that does not fit is skipped and the list goes on",
        "_refs.py",
        "if full or len(facts) >= limits.max_facts",
        "if len(facts) >= limits.max_facts",
    ),
    (
        "an expired record of another run is EXPIRED",
        "_refs.py",
        "    if record.run_id != run_id or record.tool_call_id != tool_call_id:\n"
        "        return ExclusionReason.OTHER_RUN\n"
        "    if now_ms >= record.expires_at_ms:\n"
        "        return ExclusionReason.EXPIRED\n",
        "    if now_ms >= record.expires_at_ms:\n"
        "        return ExclusionReason.EXPIRED\n"
        "    if record.run_id != run_id or record.tool_call_id != tool_call_id:\n"
        "        return ExclusionReason.OTHER_RUN\n",
    ),
)

_OUTCOMES = "oracle/_vectors_outcomes.py"

#: Rival readings of the open points of round 3 (fail-closed authorization, Begin, projections,
#: replays, charges, citations, progress, well-formedness, own creates, views, the integer domain).
_ROUND_3: tuple[Rival, ...] = (
    # Authorization fails closed (CIS-PRE-5, CIS-PRE-6).
    _kernel(
        "authorization refuses only authorized === false",
        "_preflight.py",
        "or policy.authorized is not True",
        "or policy.authorized is False",
    ),
    _kernel(
        "authorized is read as truthy",
        "_preflight.py",
        "or policy.authorized is not True",
        "or not policy.authorized",
    ),
    _kernel(
        "authorized == true (the number 1 passes)",
        "_preflight.py",
        "or policy.authorized is not True",
        "or policy.authorized != True  # noqa",
    ),
    _kernel(
        "no policy skips checks 5 and 6",
        "_preflight.py",
        "    if (\n        policy is None\n        or type(envelope.tool_name) is not str",
        "    if policy is None:\n"
        "        return parsed\n"
        "    if (\n"
        "        type(envelope.tool_name) is not str",
    ),
    _kernel(
        "the tool name is ignored", "_preflight.py", "        or policy.name != envelope.tool_name\n", ""
    ),
    _kernel(
        "tool names are compared case-insensitively",
        "_preflight.py",
        "or policy.name != envelope.tool_name",
        "or str(policy.name).lower() != envelope.tool_name.lower()",
    ),
    _kernel(
        "a tool name without a UTF-8 form is authorized",
        "_preflight.py",
        "        or utf8_len(envelope.tool_name) is None  # a name with no UTF-8 form cannot be stored\n",
        "",
    ),
    _kernel(
        "read_only is read as truthy",
        "_preflight.py",
        "if policy.read_only is not True:",
        "if not policy.read_only:",
    ),
    _kernel(
        "read_only refuses only read_only === false",
        "_preflight.py",
        "if policy.read_only is not True:",
        "if policy.read_only is False:",
    ),
    _kernel(
        "NOT_READ_ONLY is checked before UNAUTHORIZED",
        "_preflight.py",
        "    if (\n        policy is None\n",
        "    if policy is not None and policy.read_only is not True:\n"
        "        return ErrorCode.NOT_READ_ONLY\n"
        "    if (\n        policy is None\n",
    ),
    _kernel(
        "a missing envelope run id means the context's",
        "_preflight.py",
        "    if type(envelope.run_id) is not str or envelope.run_id != context.run_id:",
        "    if envelope.run_id is not None and envelope.run_id != context.run_id:",
    ),
    _kernel(
        "the time is judged after the envelope",
        "_preflight.py",
        "    check_now(now_ms)  # a caller error is refused before any check\n",
        "",
    ),
    # Begin (CIS-REC-4, CIS-SIZE-5, CIS-ID-6, CIS-KERN-2).
    _kernel(
        "Begin also refuses a request over request_bytes",
        "_state.py",
        "    if not is_safe_id(run_id):\n        return ErrorCode.RUN_MISMATCH\n",
        "    if not is_safe_id(run_id):\n        return ErrorCode.RUN_MISMATCH\n"
        "    if len(request_json) > limits.request_bytes:\n"
        "        return ErrorCode.REQUEST_TOO_LARGE\n",
    ),
    _kernel(
        "caller errors are judged after the phase",
        "_state.py",
        "    check_event(event)  # caller errors first, whatever the phase\n",
        "",
    ),
    _kernel(
        "Begin checks the run id before the tool_call_id",
        "_state.py",
        "    id_code = check_tool_call_id(tool_call_id)\n    if id_code is not None:\n"
        "        return id_code  # no fallback id ever reaches a record\n"
        "    if not is_safe_id(run_id):\n        return ErrorCode.RUN_MISMATCH\n",
        "    if not is_safe_id(run_id):\n        return ErrorCode.RUN_MISMATCH\n"
        "    id_code = check_tool_call_id(tool_call_id)\n    if id_code is not None:\n"
        "        return id_code\n",
    ),
    _kernel(
        "sequence 0 is a position",
        "_state.py",
        'check_int("Begin.sequence", event.sequence, 1)',
        'check_int("Begin.sequence", event.sequence, 0)',
    ),
    _kernel(
        "an empty invocation token is a caller error",
        "_state.py",
        '        ttl = check_int("Begin.ttl_ms", event.ttl_ms, 1)',
        '        if event.invocation_token == "":\n            raise ValueError("empty token")\n'
        '        ttl = check_int("Begin.ttl_ms", event.ttl_ms, 1)',
    ),
    _kernel(
        "a Begin's texts are not checked (a null token or tool name is stored)",
        "_state.py",
        "            if type(getattr(event, name)) is not str:\n"
        '                raise TypeError(f"Begin.{name} must be a str")',
        "            pass",
    ),
    _kernel(
        "a Begin's expiry may pass 2^53 - 1",
        "_state.py",
        "        if now + ttl > MAX_SAFE_INT:",
        "        if False:",
    ),
    _kernel(
        "a negative sweep age is allowed",
        "_state.py",
        'check_int("SweptStale.older_than_ms", event.older_than_ms)',
        "pass",
    ),
    # Projections (CIS-EVID-2, CIS-EVID-5).
    _kernel(
        "a projection that is not one is a caller error",
        "_state.py",
        "    if not isinstance(projection, Projection):\n"
        "        return _error(record, ErrorCode.PROJECTION_INVALID, now_ms, keep_raw=True)\n",
        '    if not isinstance(projection, Projection):\n        raise TypeError("not a projection")\n',
    ),
    Rival(
        "extra members of a projection are ignored (vector reading)",
        _OUTCOMES,
        (
            ("value.keys() == PROJECTION_MEMBERS", "value.keys() >= PROJECTION_MEMBERS"),
            (
                "return Projection(**value)",
                "return Projection(**{name: value[name] for name in PROJECTION_MEMBERS})",
            ),
        ),
    ),
    Rival(
        "a projection without a scope has the empty scope (vector reading)",
        _OUTCOMES,
        (
            ("value.keys() == PROJECTION_MEMBERS", 'value.keys() | {"scope"} == PROJECTION_MEMBERS'),
            ("return Projection(**value)", 'return Projection(**{"scope": "", **value})'),
        ),
    ),
    # Admission (CIS-PRE-8, CIS-RETRY-2).
    _kernel(
        "a replay on any stored run state, live or not",
        "_admission.py",
        "        and run_live\n    ):",
        "        and run is not None\n    ):",
    ),
    _kernel(
        "a replay only while the record is PROJECTING",
        "_admission.py",
        "        and live.invocation_token == request.invocation_token\n",
        "        and live.invocation_token == request.invocation_token\n"
        "        and live.status is InvocationStatus.PROJECTING\n",
    ),
    _kernel(
        "RUN_MISMATCH before RUN_INACTIVE",
        "_admission.py",
        "    if run is None or not run_live or run.status is not RunStatus.ACTIVE:\n"
        "        return ErrorCode.RUN_INACTIVE\n"
        "    if run.run_id != request.run_id:\n        return ErrorCode.RUN_MISMATCH\n",
        "    if run is not None and run.run_id != request.run_id:\n        return ErrorCode.RUN_MISMATCH\n"
        "    if run is None or not run_live or run.status is not RunStatus.ACTIVE:\n"
        "        return ErrorCode.RUN_INACTIVE\n",
    ),
    _kernel(
        "the deadline before the run state's run id",
        "_admission.py",
        "    if run.run_id != request.run_id:\n        return ErrorCode.RUN_MISMATCH\n"
        "    if now_ms >= run.deadline_ms:\n        return ErrorCode.RUN_DEADLINE_EXCEEDED\n",
        "    if now_ms >= run.deadline_ms:\n        return ErrorCode.RUN_DEADLINE_EXCEEDED\n"
        "    if run.run_id != request.run_id:\n        return ErrorCode.RUN_MISMATCH\n",
    ),
    _kernel(
        "an admission's texts are not checked (a null token is admitted)",
        "_admission.py",
        "        if type(getattr(request, name)) is not str:\n"
        '            raise TypeError(f"AdmissionRequest.{name} must be a str")',
        "        pass",
    ),
    # Completions (CIS-STORE-3, CIS-RUN-6).
    _kernel(
        "a lapsed run state is charged",
        "_effects.py",
        "    current = live(run, now_ms)\n",
        "    current = run\n",
    ),
    _kernel(
        "only an ACTIVE run is charged",
        "_effects.py",
        "    if current is None or current.run_id != after.run_id:",
        '    if current is None or current.run_id != after.run_id or current.status.value != "ACTIVE":',
    ),
    _kernel(
        "a replayed completion compares the whole record",
        "_state.py",
        "        and stored.updated_at_ms == after.updated_at_ms\n    ):",
        "        and stored.updated_at_ms == after.updated_at_ms\n        and stored == after\n    ):",
    ),
    _kernel(
        "a replayed completion ignores updated_at_ms",
        "_state.py",
        "        and stored.updated_at_ms == after.updated_at_ms\n    ):",
        "    ):",
    ),
    _kernel(
        "a completion's time is judged after the compare-and-set",
        "_state.py",
        "    check_completion(before, after)\n    check_now(now_ms)\n",
        "    check_completion(before, after)\n",
    ),
    # Citations and progress (CIS-REF-3, CIS-PROG-2, CIS-PROG-3).
    _kernel(
        "an unsafe run id is cited UNSAFE_ID",
        "_refs.py",
        "    if not is_safe_id(tool_call_id):\n        return ExclusionReason.UNSAFE_ID\n",
        "    if not is_safe_id(tool_call_id) or not is_safe_id(run_id):\n"
        "        return ExclusionReason.UNSAFE_ID\n",
    ),
    _kernel(
        "the tool_call_id is hidden when the run id is unsafe",
        "_refs.py",
        "tool_call_id=tool_call_id if is_safe_id(tool_call_id) else None,",
        "tool_call_id=tool_call_id if is_safe_id(tool_call_id) and is_safe_id(run_id) else None,",
    ),
    _kernel(
        "PROJECTING and ERROR before EXPIRED",
        "_refs.py",
        "    if now_ms >= record.expires_at_ms:\n        return ExclusionReason.EXPIRED\n"
        "    if record.status is InvocationStatus.PROJECTING:\n        return ExclusionReason.PROJECTING\n",
        "    if record.status is InvocationStatus.PROJECTING:\n        return ExclusionReason.PROJECTING\n"
        "    if record.status is InvocationStatus.ERROR:\n        return ExclusionReason.ERROR\n"
        "    if now_ms >= record.expires_at_ms:\n        return ExclusionReason.EXPIRED\n",
    ),
    _kernel(
        "ERROR before EXPIRED",
        "_refs.py",
        "    if now_ms >= record.expires_at_ms:\n        return ExclusionReason.EXPIRED\n",
        "    if record.status is InvocationStatus.ERROR:\n        return ExclusionReason.ERROR\n"
        "    if now_ms >= record.expires_at_ms:\n        return ExclusionReason.EXPIRED\n",
    ),
    _kernel(
        "duplicate identities are removed among facts only",
        "_refs.py",
        "        if tool_call_id in seen:\n            continue\n        seen.add(tool_call_id)\n"
        "        record = records.get(tool_call_id)\n"
        "        reason = classify(run_id, tool_call_id, record, now_ms)\n"
        "        if reason is not None:\n"
        "            excluded[reason] = excluded.get(reason, 0) + 1\n"
        "            continue\n",
        "        record = records.get(tool_call_id)\n"
        "        reason = classify(run_id, tool_call_id, record, now_ms)\n"
        "        if reason is not None:\n"
        "            excluded[reason] = excluded.get(reason, 0) + 1\n"
        "            continue\n"
        "        if tool_call_id in seen:\n            continue\n        seen.add(tool_call_id)\n",
    ),
    _kernel(
        "an identity that is not a text is a caller error",
        "_refs.py",
        "        if type(tool_call_id) is not str:  # no id at all: never a key to look up\n"
        "            excluded[ExclusionReason.UNSAFE_ID] = excluded.get(ExclusionReason.UNSAFE_ID, 0) + 1\n"
        "            continue\n",
        "",
    ),
    _kernel(
        "an identity that is not a text is skipped, not counted",
        "_refs.py",
        "            excluded[ExclusionReason.UNSAFE_ID] = excluded.get(ExclusionReason.UNSAFE_ID, 0) + 1\n",
        "",
    ),
    # Well-formedness, own creates, views (CIS-LIFE-5, CIS-RETRY-2, CIS-BND-4, CIS-ERR-1).
    _kernel(
        "a well-formed record's update follows its creation",
        "_state.py",
        "        and record.expires_at_ms > record.created_at_ms\n    )",
        "        and record.expires_at_ms > record.created_at_ms\n"
        "        and record.updated_at_ms >= record.created_at_ms\n    )",
    ),
    _kernel(
        "a well-formed READY record holds its raw response",
        "_state.py",
        "        and record.expires_at_ms > record.created_at_ms\n    )",
        "        and record.expires_at_ms > record.created_at_ms\n"
        "        and (status is not InvocationStatus.READY or record.raw_response is not None)\n    )",
    ),
    _kernel(
        "a well-formed record has a non-empty token",
        "_state.py",
        "        and record.expires_at_ms > record.created_at_ms\n    )",
        "        and record.expires_at_ms > record.created_at_ms\n"
        '        and record.invocation_token != ""\n'
        "    )",
    ),
    Rival(
        "well-formedness does not judge integer ranges",
        "kernel/_state.py",
        (
            ("        and is_safe_int(record.sequence, 1)\n", "        and record.sequence >= 1\n"),
            ("        and is_safe_int(record.created_at_ms, 0)\n", ""),
            ("        and is_safe_int(record.updated_at_ms, 0)\n", ""),
            ("        and is_safe_int(record.expires_at_ms, 0)\n", ""),
        ),
    ),
    _kernel(
        "an empty token makes an own create",
        "_effects.py",
        '        request.invocation_token != ""\n        and record.created_at_ms >= not_before_ms',
        "        record.created_at_ms >= not_before_ms",
    ),
    _kernel(
        "the agent sees a PROJECTING record as INVALID_TRANSITION",
        "_effects.py",
        "        return failure_view(ErrorCode.CALL_IN_PROGRESS, record.tool_call_id)",
        "        return failure_view(ErrorCode.INVALID_TRANSITION, record.tool_call_id)",
    ),
    _kernel(
        "the agent sees a record that is not well formed by its own fields",
        "_effects.py",
        "    if not is_well_formed(record):\n"
        "        return failure_view(ErrorCode.STORE_UNAVAILABLE, record.tool_call_id)\n",
        "",
    ),
    Rival(
        "a text naming no error code is shown as STORE_UNAVAILABLE (vector reading)",
        _OUTCOMES,
        (
            (
                'failure_view(ErrorCode(vector["code"]), vector["tool_call_id"])',
                'failure_view(ErrorCode(vector["code"]) if vector["code"] in ErrorCode.__members__ '
                'else ErrorCode.STORE_UNAVAILABLE, vector["tool_call_id"])',
            ),
        ),
    ),
    Rival(
        "error codes are compared case-insensitively (vector reading)",
        _OUTCOMES,
        (
            (
                'failure_view(ErrorCode(vector["code"]), ',
                'failure_view(ErrorCode(str(vector["code"]).upper()), ',
            ),
        ),
    ),
    # The integer domain (CIS-KERN-2) and binary64 readers.
    _kernel(
        "times beyond 2^53 - 1 are accepted",
        "_models.py",
        "    if type(now_ms) is not int or not 0 <= now_ms <= MAX_SAFE_INT:",
        "    if type(now_ms) is not int or now_ms < 0:",
    ),
    _kernel(
        "limits have no upper bound",
        "_models.py",
        '    check_int(getattr(attribute, "name", "?"), value, 1)',
        "    if type(value) is not int or value < 1:\n"
        '        raise ValueError("a limit must be a positive int")',
    ),
    _kernel(
        "an open judges the run id before its numbers",
        "_runs.py",
        "    check_now(now_ms)  # caller errors first, before the run id is judged\n",
        "    if not is_safe_id(run_id):\n        return ErrorCode.RUN_MISMATCH\n    check_now(now_ms)\n",
    ),
    _kernel(
        "a cancel or close judges no time",
        "_runs.py",
        "    check_now(now_ms)\n    if run is None",
        "    if run is None",
    ),
    Rival(
        "liveness takes any number",
        "kernel/_effects.py",
        (
            (
                "return value is not None and check_now(now_ms) < value.expires_at_ms",
                "return value is not None and now_ms < value.expires_at_ms",
            ),
            (
                "return value if value is not None and check_now(now_ms) < value.expires_at_ms else None",
                "return value if value is not None and now_ms < value.expires_at_ms else None",
            ),
            (
                "    if value is None or check_now(now_ms) >= value.expires_at_ms:",
                "    if value is None or now_ms >= value.expires_at_ms:",
            ),
        ),
    ),
    _kernel(
        "integers beyond 2^53 - 1 make the arguments invalid",
        "_ijson.py",
        "parse_constant=_constant, parse_float=_float)",
        "parse_constant=_constant, parse_float=_float, parse_int=_safe_integer)\n\n\n"
        "def _safe_integer(text):\n    value = int(text)\n    if abs(value) > 2**53 - 1:\n"
        '        raise _RejectError("beyond 2**53 - 1")\n    return value',
    ),
    _kernel(
        "the 4300-digit limit applies to every number",
        "_ijson.py",
        "def _float(text: str) -> float:\n",
        "def _float(text: str) -> float:\n"
        '    if len(text.lstrip("-").split("e")[0].split("E")[0].split(".")[0]) > 4300:\n'
        '        raise _RejectError("too many digits")\n',
    ),
    Rival(
        "strings are judged as UTF-16 after parsing (an escaped high surrogate pairs with a raw low one)",
        "kernel/_ijson.py",
        (
            ('text.encode("utf-8")  # raises on a raw lone surrogate', "pass"),
            ("if _SURROGATE_ESCAPE.search(text) is not None:", "if True:"),
            (
                'json.dumps(value, ensure_ascii=False).encode("utf-8")',
                'json.dumps(value, ensure_ascii=False).encode("utf-16",'
                ' "surrogatepass").decode("utf-16").encode("utf-8")',
            ),
        ),
    ),
    # Issue 22's audit: readings the vectors held without a rival to show they decide them.
    _kernel(
        "a minus sign alone is a number (read as -0)",
        "_ijson.py",
        "        value = _DECODER.decode(text)\n",
        '        value = _DECODER.decode(re.sub(r"-(?=\\s*[,\\]}])", "-0", text))\n',
    ),
    _kernel(
        "Begin judges the tool_call_id before the phase",
        "_state.py",
        "    check_event(event)  # caller errors first, whatever the phase\n",
        "    check_event(event)  # caller errors first, whatever the phase\n"
        "    if isinstance(event, Begin) and check_tool_call_id(event.tool_call_id) is not None:\n"
        "        return check_tool_call_id(event.tool_call_id)\n",
    ),
    _kernel(
        "tool names are compared after trimming whitespace",
        "_preflight.py",
        "        or policy.name != envelope.tool_name\n",
        "        or (policy.name.strip() if type(policy.name) is str else policy.name)\n"
        "        != envelope.tool_name.strip()\n",
    ),
    _kernel(
        "the request is stored re-serialized (JSON.stringify(JSON.parse(text)) in a binary64 reader)",
        "_admission.py",
        "        request_json=request.request_json,\n        invocation_token=request.invocation_token,\n"
        "        sequence=run.tool_calls_used + 1,\n",
        "        request_json=__import__('json').dumps(__import__('json').loads(request.request_json, "
        "parse_int=lambda t: int(float(t)) if abs(int(t)) > 2**53 else int(t)), separators=(',', ':'), "
        "ensure_ascii=False),\n        invocation_token=request.invocation_token,\n"
        "        sequence=run.tool_calls_used + 1,\n",
    ),
    _kernel(
        "the request is stored with its integers as a binary64 reader holds them (2^53 + 1 as 2^53)",
        "_admission.py",
        "        request_json=request.request_json,\n        invocation_token=request.invocation_token,\n"
        "        sequence=run.tool_calls_used + 1,\n",
        "        request_json=__import__('re').sub(r'(?<![\\d.eE+-])-?\\d{16,}(?![\\d.eE])', "
        "lambda m: str(int(float(m.group()))), request.request_json),\n"
        "        invocation_token=request.invocation_token,\n"
        "        sequence=run.tool_calls_used + 1,\n",
    ),
)

#: Every rival reading kept as a patch; each must fail some vector.
RIVALS: tuple[Rival, ...] = (*(_kernel(*entry) for entry in _ROUND_2), *_ROUND_3)


def rivals(root: Path = ROOT / "invocation_store") -> list[Mutant]:
    """The :data:`RIVALS` as mutants; raises ``LookupError`` if a patch no longer applies exactly once."""
    result = []
    for rival in RIVALS:
        text = (root / rival.path).read_text(encoding="utf-8")
        for old, new in rival.patches:
            if text.count(old) != 1:
                raise LookupError(
                    f"rival {rival.name!r}: a patch does not apply exactly once to {rival.path}"
                )
            text = text.replace(old, new)
        result.append(Mutant(name=f"rival: {rival.name}", module=rival.path, source=text))
    return result


class Sandbox:
    """A private copy of the package in which one module at a time is mutated."""

    def __init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="cis-mutants-"))
        self.package = self.directory / "invocation_store"
        shutil.copytree(ROOT / "invocation_store", self.package, ignore=shutil.ignore_patterns("__pycache__"))
        compileall.compile_dir(str(self.package), quiet=1)
        self.originals: dict[str, str] = {}

    def command(self) -> list[str]:
        """The adapter command that imports this copy."""
        return [sys.executable, "-m", "invocation_store.oracle.vector_adapter"]

    def environment(self) -> dict[str, str]:
        """The environment that makes the copy win over the installed package."""
        env = dict(os.environ)
        env["PYTHONPATH"] = str(self.directory)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env["PYTHONSAFEPATH"] = "1"
        return env

    def apply(self, mutant: Mutant | None, module: str | None = None) -> None:
        """Write ``mutant`` (or restore ``module``, a path in the package, when ``mutant`` is None)."""
        target = mutant.module if mutant is not None else module
        assert target is not None
        path = self.package / target
        self.originals.setdefault(target, path.read_text(encoding="utf-8"))
        path.write_text(mutant.source if mutant is not None else self.originals[target], encoding="utf-8")
        for cached in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"):
            cached.unlink()

    def close(self) -> None:
        """Remove the copy."""
        shutil.rmtree(self.directory, ignore_errors=True)


def killed_by_vectors(sandbox: Sandbox, mutant: Mutant | None) -> bool:
    """True if the vectors runner reports a failure (or the adapter breaks) with ``mutant``."""
    if mutant is not None:
        sandbox.apply(mutant)
    try:
        result = subprocess.run(  # noqa: S603 - our own runner and adapter
            [
                sys.executable,
                "-I",
                str(ROOT / "scripts" / "run_vectors.py"),
                "-q",
                "--max-shown",
                "0",
                "--",
                *sandbox.command(),
            ],
            env=sandbox.environment(),
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
    finally:
        if mutant is not None:
            sandbox.apply(None, mutant.module)
    return result.returncode != 0


def killed_by_kernel_suite(sandbox: Sandbox, mutant: Mutant) -> bool:
    """True if ``tests/kernel`` fails with ``mutant`` applied to the sandbox copy."""
    sandbox.apply(mutant)
    try:
        result = subprocess.run(  # noqa: S603 - our own test suite
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-x",
                "-p",
                "no:xdist",
                "-p",
                "no:cacheprovider",
                str(ROOT / "tests" / "kernel"),
            ],
            env=sandbox.environment(),
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
            timeout=900,
        )
    finally:
        sandbox.apply(None, mutant.module)
    return result.returncode != 0


def main(argv: list[str] | None = None) -> int:
    """``list``, ``run`` (exit 1 if a non-equivalent mutant survives the vectors) or ``suite``
    (exit 1 if the kernel test suite kills a mutant listed as equivalent)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("list", "run", "suite"))
    parser.add_argument("--every", type=int, default=1, help="run every Nth mutant only")
    parser.add_argument(
        "--only",
        choices=("generated", "rivals"),
        help="only the mutants generated from the kernel's syntax, or only the rival readings",
    )
    args = parser.parse_args(argv)
    mutants = ([] if args.only == "rivals" else generate()) + ([] if args.only == "generated" else rivals())
    if args.action == "list":
        for mutant in mutants:
            print(mutant.name)
        print(f"{len(mutants)} mutants, {len(EQUIVALENT)} listed as equivalent", file=sys.stderr)
        return 0
    sandbox = Sandbox()
    if args.action == "suite":
        try:
            listed = [mutant for mutant in mutants if mutant.name in EQUIVALENT]
            killed = [mutant.name for mutant in listed if killed_by_kernel_suite(sandbox, mutant)]
        finally:
            sandbox.close()
        for name in killed:
            print(f"killed by tests/kernel although listed as equivalent: {name}")
        print(f"{len(listed)} equivalent mutants, {len(killed)} killed by tests/kernel")
        return 1 if killed else 0
    try:
        if killed_by_vectors(sandbox, None):
            print("the unmutated kernel fails the vectors", file=sys.stderr)
            return 2
        survivors = []
        chosen = mutants[:: args.every]
        for mutant in chosen:
            if not killed_by_vectors(sandbox, mutant):
                survivors.append(mutant.name)
                marker = "equivalent" if mutant.name in EQUIVALENT else "SURVIVED"
                print(f"{marker}: {mutant.name}")
    finally:
        sandbox.close()
    unexplained = [name for name in survivors if name not in EQUIVALENT]
    print(
        f"{len(chosen)} mutants run, {len(chosen) - len(survivors)} killed by the vectors, "
        f"{len(survivors) - len(unexplained)} equivalent, {len(unexplained)} unexplained survivors"
    )
    return 1 if unexplained else 0


if __name__ == "__main__":
    raise SystemExit(main())
