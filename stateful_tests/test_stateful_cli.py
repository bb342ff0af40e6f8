"""`invocation-store fuzz`: the machine outside pytest (CIS-STATE-1, CIS-STATE-2)."""

from __future__ import annotations

import pytest

from invocation_store.cli import main
from invocation_store.testing import MUTANTS


def test_fuzz_memory_passes_with_a_summary(capsys: pytest.CaptureFixture[str]) -> None:
    """CIS-STATE-1: a clean store passes; the summary counts examples, steps, checks and steps/s."""
    assert main(["fuzz", "--examples", "5", "--steps", "10", "--seed", "7"]) == 0
    out, err = capsys.readouterr()
    assert "memory store: " in out
    assert " steps, " in out
    assert "invariant checks (10 invariants after every step)" in out
    assert "steps/s, seed 7" in out
    assert "every invariant held after every step" in out
    assert "fuzzing the memory store: 5 examples of up to 10 steps, seed 7" in err


def test_fuzz_mutant_is_caught_with_the_minimal_sequence(capsys: pytest.CaptureFixture[str]) -> None:
    """CIS-STATE-2, CIS-TTL-5: a planted fault fails the machine; the minimal failing steps are printed."""
    assert main(["fuzz", "--mutant", "ttl-refresh-on-read", "--seed", "1", "-q"]) == 0
    out, err = capsys.readouterr()
    assert "FAILED: InvariantViolation: inv2_ttl_never_extended" in out
    assert "minimal failing sequence:" in out
    assert "state = InvocationMachine()" in out
    assert "state.open_first_run(" in out
    assert "planted fault caught" in out
    assert "re-run with: invocation-store fuzz --store memory" in out
    assert "state.inv" not in out  # invariant calls are not steps
    assert err == ""


def test_fuzz_lists_every_mutant(capsys: pytest.CaptureFixture[str]) -> None:
    """CIS-STATE-2: --list-mutants names every planted fault and the requirement it breaks."""
    assert main(["fuzz", "--list-mutants"]) == 0
    out = capsys.readouterr().out
    for name, mutant in MUTANTS.items():
        assert name in out
        assert mutant.breaks in out


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        (["--mutant", "no-such-fault"], "unknown mutant"),
        (["--mutant", "racy-budget", "--store", "redis"], "--mutant plants its fault in a memory store"),
        (["--redis-url", "redis://user:hunter2@127.0.0.1:1/0"], "--redis-url needs"),
    ],
)
def test_fuzz_refuses_contradictory_options(
    argv: list[str], complaint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """CIS-ERR-1: bad options are one line on stderr and exit 2, never echoing a credential."""
    assert main(["fuzz", *argv]) == 2
    out, err = capsys.readouterr()
    assert complaint in err
    assert "hunter2" not in out + err


def test_fuzz_unreachable_redis_is_a_safe_error(capsys: pytest.CaptureFixture[str]) -> None:
    """CIS-FAIL-5, CIS-ERR-1: an unreachable Redis is STORE_UNAVAILABLE (exit 2), never its URL."""
    argv = ["fuzz", "--store", "redis", "--redis-url", "redis://user:hunter2@127.0.0.1:1/0", "-q"]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert "STORE_UNAVAILABLE" in err
    assert "hunter2" not in out + err
    assert "127.0.0.1:1" not in out + err


def test_fuzz_redis_store(redis_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """CIS-STATE-1: the CLI checks RedisStore on a given server, under a fresh prefix per example."""
    argv = ["fuzz", "--store", "redis", "--redis-url", redis_url, "--examples", "3", "--steps", "10", "-q"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "redis store: " in out
    assert redis_url not in out


def test_fuzz_rejects_non_positive_counts(capsys: pytest.CaptureFixture[str]) -> None:
    """CIS-STATE-1: --examples and --steps take positive integers (argparse exits 2)."""
    with pytest.raises(SystemExit) as exited:
        main(["fuzz", "--examples", "0"])
    assert exited.value.code == 2
    assert "must be a positive integer" in capsys.readouterr().err
