"""Kernel mutants, and whether the conformance vectors alone kill them (CIS-SPEC-3).

Usage::

    .venv/bin/python scripts/kernel_mutants.py list               # every mutant, one per line
    .venv/bin/python scripts/kernel_mutants.py run [--every N]    # run them through the vectors
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
content-only result limit, a same-token admission as a duplicate, ...), written as
patches of the kernel's text; each must be killed too.

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
    """One mutant: ``name`` is stable, ``module`` the file changed, ``source`` its new text."""

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
                mutants.append(Mutant(name=name, module=module, source=source))
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
        "the time of check_begin's Begin is a placeholder too: a request carries no time (CIS-STORE-10) "
        "and the run-independent refusals of the Begin row never read it"
    ),
    "_state.check_completion: `getattr(before, name) != getattr(after, name)` != -> ==": (
        "it only lists, in the text of a caller error, which fields changed; the outcome (a caller "
        "error) is the same, and vectors never compare error texts"
    ),
}


#: Rival readings of the specification that an implementer could pick, as kernel
#: patches: (name, module, text replaced, replacement). Each must fail some vector.
RIVALS: tuple[tuple[str, str, str, str], ...] = (
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
        "delta = record_bytes(after) - record_bytes(before)",
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


def rivals(kernel: Path = KERNEL) -> list[Mutant]:
    """The :data:`RIVALS` as mutants; raises ``LookupError`` if a patch no longer applies once."""
    result = []
    for name, module, old, new in RIVALS:
        text = (kernel / module).read_text(encoding="utf-8")
        if text.count(old) != 1:
            raise LookupError(f"rival {name!r}: its patch does not apply exactly once to {module}")
        result.append(Mutant(name=f"rival: {name}", module=module, source=text.replace(old, new)))
    return result


class Sandbox:
    """A private copy of the package in which one kernel module at a time is mutated."""

    def __init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="cis-mutants-"))
        self.package = self.directory / "invocation_store"
        shutil.copytree(ROOT / "invocation_store", self.package, ignore=shutil.ignore_patterns("__pycache__"))
        compileall.compile_dir(str(self.package), quiet=1)
        self.originals = {module: (self.package / "kernel" / module).read_text() for module in MODULES}

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
        """Write ``mutant`` (or restore ``module`` when ``mutant`` is None)."""
        target = mutant.module if mutant is not None else module
        assert target is not None
        path = self.package / "kernel" / target
        path.write_text(mutant.source if mutant is not None else self.originals[target])
        for cached in (path.parent / "__pycache__").glob(f"{target[:-3]}.*.pyc"):
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
    args = parser.parse_args(argv)
    mutants = generate() + rivals()
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
