"""One rule, one place: visibility and bookkeeping rules live in the kernel only (CIS-KERN-1).

Outside ``invocation_store/kernel/`` no module may compare a value's
``expires_at_ms`` (liveness is kernel ``is_live``/``live``, what is left is
``remaining_ms``), nor apply a completion's charge or completed-list rule itself
(stores apply what kernel ``decide_completion`` returns, so ``run_usage_after`` and
``decide_complete`` are not called from outside). The Lua scripts mirror kernel
functions to be atomic; they are listed in :data:`LUA_MIRRORS` with the function
each mirrors, and every script names it in a comment.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from invocation_store.adapters import _redis_scripts

PACKAGE = Path(__file__).resolve().parents[1] / "invocation_store"

#: Modules that may state expiry or bookkeeping arithmetic, and why.
ALLOWED: dict[str, str] = {
    "testing/_mutants.py": "planted faulty stores restate the rules wrongly on purpose",
    "testing/_invariants.py": "the invariants compare expiries across steps (a TTL never grows)",
    "testing/_worker_rules.py": "rules move the clock to a record's expiry edge",
    "testing/contract.py": "the shipped contract's tests move the clock to expiry edges",
    "oracle/_vectors.py": "vectors are generated at the expiry edge",
    "oracle/_vectors_rules.py": "vectors are generated at the expiry edge (expires_at - 1, expires_at)",
    "oracle/_vectors_effects.py": "liveness, sweep and completion vectors sit at the expiry edge",
}

#: Lua scripts and the kernel functions they mirror (atomicity needs the mirror).
LUA_MIRRORS: dict[str, tuple[str, ...]] = {
    "CREATE_SCRIPT": ("admit", "is_live"),
    "COMPLETE_SCRIPT": ("decide_complete", "decide_completion"),
    "OPEN_RUN_SCRIPT": ("open_run",),
    "END_RUN_SCRIPT": ("cancel_run", "close_run"),
    "UNDO_OPEN_SCRIPT": ("open_run",),
}

#: Read-only scripts: they decide nothing, so they mirror no kernel function.
LUA_READS: frozenset[str] = frozenset({"PROGRESS_SCRIPT"})
_WRITE_COMMANDS = (
    *("SET", "HSET", "DEL", "RPUSH", "LPUSH", "EXPIRE", "PEXPIRE", "PEXPIREAT", "RENAME", "HINCRBY", "HDEL"),
)

_FORBIDDEN_CALLS = frozenset({"run_usage_after", "decide_complete"})


def _is_expiry(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "expires_at_ms"


#: A line carrying this comment checks an invariant about expiries (e.g. a TTL never
#: grows) rather than applying a rule; the comment must say which.
PRAGMA = "# rule-check:"


def _violations(tree: ast.AST, source: str = "") -> list[tuple[int, str]]:
    exempt = {number for number, line in enumerate(source.splitlines(), 1) if PRAGMA in line}
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(_is_expiry(side) for side in (node.left, *node.comparators)):
            found.append((node.lineno, "expiry comparison (use kernel is_live/live)"))
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub) and _is_expiry(node.left):
            found.append((node.lineno, "expiry arithmetic (use kernel remaining_ms)"))
        elif isinstance(node, ast.Call):
            func = node.func
            name = (
                func.id
                if isinstance(func, ast.Name)
                else func.attr
                if isinstance(func, ast.Attribute)
                else ""
            )
            if name in _FORBIDDEN_CALLS:
                found.append(
                    (node.lineno, f"{name}() outside the kernel (apply decide_completion's effects)")
                )
    return [(line, reason) for line, reason in found if line not in exempt]


def _modules() -> list[Path]:
    return sorted(
        path
        for path in PACKAGE.rglob("*.py")
        if "kernel" not in path.relative_to(PACKAGE).parts[:1]
        and path.relative_to(PACKAGE).as_posix() not in ALLOWED
    )


@pytest.mark.parametrize("path", _modules(), ids=lambda path: path.relative_to(PACKAGE).as_posix())
def test_no_kernel_rule_restated(path: Path) -> None:
    """CIS-KERN-1, CIS-TTL-4, CIS-RUN-6: expiry and completion bookkeeping are decided by the kernel."""
    source = path.read_text(encoding="utf-8")
    assert _violations(ast.parse(source), source) == []


def test_the_guard_sees_a_restated_rule() -> None:
    """CIS-KERN-1: each forbidden form is detected (so the guard cannot pass vacuously)."""
    source = (
        "if now >= record.expires_at_ms:\n    pass\n"
        "left = record.expires_at_ms - now\n"
        "run = run_usage_after(run, before, after)\n"
        "decision = kernel.decide_complete(stored, before, after, now)\n"
    )
    assert [line for line, _ in _violations(ast.parse(source), source)] == [1, 3, 4, 5]
    exempted = source.replace("- now\n", "- now  # rule-check: a test of the pragma\n")
    assert [line for line, _ in _violations(ast.parse(exempted), exempted)] == [1, 4, 5]


def test_allowed_modules_exist() -> None:
    """CIS-KERN-1: the allowlist names real modules (a rename must not silently widen it)."""
    for name in ALLOWED:
        assert (PACKAGE / name).is_file(), name


@pytest.mark.parametrize("script", sorted(LUA_MIRRORS))
def test_lua_mirrors_name_their_kernel_functions(script: str) -> None:
    """CIS-KERN-1: every Lua script is a listed mirror, and its contract comment names what it mirrors."""
    source = Path(_redis_scripts.__file__).read_text(encoding="utf-8")
    start = source.index(f"{script}: Final")
    comment = source[source.rindex("\n\n", 0, start) : start]
    assert any(name in comment for name in LUA_MIRRORS[script]), (script, LUA_MIRRORS[script])
    listed = {name for name in dir(_redis_scripts) if name.endswith("_SCRIPT")}
    assert listed == set(LUA_MIRRORS) | LUA_READS


@pytest.mark.parametrize("script", sorted(LUA_READS))
def test_read_scripts_write_nothing(script: str) -> None:
    """CIS-KERN-1, CIS-TTL-5: a script that mirrors no kernel function only reads."""
    body = getattr(_redis_scripts, script)
    assert "redis.call" in body or "redis.pcall" in body
    for command in _WRITE_COMMANDS:
        assert f"'{command}'" not in body.upper()
        assert f'"{command}"' not in body.upper()
