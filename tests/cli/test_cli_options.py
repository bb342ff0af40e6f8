"""CLI options and messages found by a newcomer walkthrough: --version, the Redis URL from the
environment, --prefix without Redis, accurate and consistent errors, fuzz leaving no files."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

import invocation_store
from invocation_store._cli._common import REDIS_URL_ENV
from invocation_store.cli import main
from invocation_store.testing.redis_server import redis_server

ROOT = Path(__file__).resolve().parents[2]
GEMINI = ROOT / "examples" / "transcripts" / "gemini.json"
GEMINI_RUN = "run-inc2031-gemini"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def no_env_url(monkeypatch: pytest.MonkeyPatch) -> None:
    """The variable unset, whatever the developer's shell has."""
    monkeypatch.delenv(REDIS_URL_ENV, raising=False)


@pytest.fixture
def password_redis() -> Iterator[str]:
    """A private redis-server that requires the password ``right-pass``; yields its URL without one."""
    if shutil.which("redis-server") is None:
        pytest.skip("no redis-server binary on PATH")
    with redis_server(extra_args=["--requirepass", "right-pass"]) as url:
        yield url


# -- --version --------------------------------------------------------------------------------------


def test_version_option_and_attribute(capsys: pytest.CaptureFixture[str]) -> None:
    """CIS-ORC-2: `invocation-store --version` and `invocation_store.__version__` give the installed
    distribution's version (so a conformance job can record which oracle checked its traces)."""
    from importlib.metadata import version  # noqa: PLC0415

    expected = version("canonical-invocation-store")
    assert invocation_store.__version__ == expected
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"invocation-store {expected}\n"


# -- replay: --prefix, the environment, messages ---------------------------------------------------


def test_replay_prefix_without_redis_is_an_error(
    capsys: pytest.CaptureFixture[str], no_env_url: None
) -> None:
    """CIS-FAIL-5: `replay --prefix` with no Redis URL is one line on stderr and exit 2, not ignored."""
    code, out, err = _run(capsys, "replay", str(GEMINI), "--prefix", "foo")
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert "--prefix needs a Redis store" in err
    assert REDIS_URL_ENV in err


def test_replay_uses_memory_without_url_or_env(capsys: pytest.CaptureFixture[str], no_env_url: None) -> None:
    """CIS-STORE-4: with neither --redis-url nor the variable, replay uses the in-memory store."""
    code, out, _err = _run(capsys, "replay", "--json", str(GEMINI))
    assert code == 0
    assert json.loads(out)["run"]["store"] == "memory"


@pytest.mark.redis
def test_replay_and_inspect_read_the_url_from_the_environment(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, redis_url: str
) -> None:
    """CIS-ERR-2, CIS-TTL-5: with INVOCATION_STORE_REDIS_URL set, replay writes to that Redis and
    inspect reads from it, no --redis-url needed (and the URL is never printed)."""
    monkeypatch.setenv(REDIS_URL_ENV, redis_url)
    prefix = f"cli-env-{os.getpid()}"
    code, out, _err = _run(capsys, "replay", "--json", str(GEMINI), "--prefix", prefix)
    assert code == 0
    report = json.loads(out)
    assert report["run"]["store"] == "redis"
    assert redis_url not in out
    code, out, err = _run(capsys, "inspect", "--json", "--run", GEMINI_RUN, "--prefix", prefix)
    assert (code, err) == (0, "")
    listing = json.loads(out)
    assert [row["tool_call_id"] for row in listing["records"]] == [
        row["tool_call_id"] for row in report["records"]
    ]
    # --redis-url wins over the variable.
    monkeypatch.setenv(REDIS_URL_ENV, "redis://127.0.0.1:1/0")
    code, _out, err = _run(
        capsys, "inspect", "--redis-url", redis_url, "--run", GEMINI_RUN, "--prefix", prefix
    )
    assert (code, err) == (0, "")


def test_inspect_needs_a_url_from_option_or_environment(
    capsys: pytest.CaptureFixture[str], no_env_url: None
) -> None:
    """CIS-FAIL-5: inspect without --redis-url and without the variable is one line, exit 2."""
    code, out, err = _run(capsys, "inspect", "--run", GEMINI_RUN)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert REDIS_URL_ENV in err


@pytest.mark.redis
def test_replaying_twice_says_the_run_exists(
    capsys: pytest.CaptureFixture[str], redis_url: str, no_env_url: None
) -> None:
    """CIS-RETRY-3: a second identical replay into Redis says the run already exists, nothing about
    other parameters (the deadline is relative to now, so they do differ)."""
    args = ["replay", str(GEMINI), "--redis-url", redis_url, "--prefix", f"cli-twice-msg-{os.getpid()}"]
    assert main(args) == 0
    capsys.readouterr()
    code, out, err = _run(capsys, *args)
    assert code == 1
    assert out == ""
    assert f"cannot open run {GEMINI_RUN}" in err
    assert "a live run with this id already exists; choose another --run-id" in err
    assert "other parameters" not in err


@pytest.mark.redis
def test_inspect_unknown_run_prints_only_the_error(
    capsys: pytest.CaptureFixture[str], redis_url: str, no_env_url: None
) -> None:
    """CIS-FAIL-5: `inspect --run nope` prints no empty table, only the one-line error (exit 1),
    with or without --json."""
    for extra in ([], ["--json"]):
        code, out, err = _run(capsys, "inspect", *extra, "--redis-url", redis_url, "--run", "nope")
        assert code == 1
        assert out == ""
        assert err.count("\n") == 1
        assert "no run nope" in err


@pytest.mark.redis
def test_wrong_password_is_the_same_type_only_message_in_replay_and_inspect(
    capsys: pytest.CaptureFixture[str], password_redis: str, no_env_url: None
) -> None:
    """CIS-FAIL-5, CIS-ERR-2: a wrong Redis password gives the same line from replay and inspect:
    the exception type name only, never its text, the URL or the password."""
    url = password_redis.replace("redis://", "redis://:wrong-pass@", 1)
    replay_code, replay_out, replay_err = _run(capsys, "replay", str(GEMINI), "--redis-url", url)
    inspect_code, inspect_out, inspect_err = _run(capsys, "inspect", "--redis-url", url, "--run", GEMINI_RUN)
    assert (replay_code, inspect_code) == (1, 1)
    assert (replay_out, inspect_out) == ("", "")
    expected = "the Redis store is unavailable (AuthenticationError)\n"
    assert replay_err == f"invocation-store replay: {expected}"
    assert inspect_err == f"invocation-store inspect: {expected}"
    for text in (replay_err, inspect_err):
        assert "wrong-pass" not in text
        assert "127.0.0.1" not in text


# -- fuzz ---------------------------------------------------------------------------------------------


def test_fuzz_reads_the_url_from_the_environment(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """CIS-FAIL-5: `fuzz --store redis` uses INVOCATION_STORE_REDIS_URL when --redis-url is not given
    (here an unreachable one: a safe one-line error, exit 2, no private server started)."""
    monkeypatch.setenv(REDIS_URL_ENV, "redis://:s3cret@127.0.0.1:1/0")
    code, out, err = _run(capsys, "fuzz", "--store", "redis", "--examples", "1", "-q")
    assert code == 2
    assert out == ""
    assert "cannot reach Redis (ConnectionError)" in err
    assert "s3cret" not in err
    assert "private redis-server" not in err


def test_fuzz_ignores_the_environment_for_a_memory_store(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """CIS-STATE-1: the variable does not make `fuzz --store memory` complain (only --redis-url does),
    and fuzz leaves no .hypothesis/ directory in the current directory."""
    monkeypatch.setenv(REDIS_URL_ENV, "redis://127.0.0.1:1/0")
    monkeypatch.delenv("HYPOTHESIS_STORAGE_DIRECTORY", raising=False)
    monkeypatch.chdir(tmp_path)
    code, out, err = _run(capsys, "fuzz", "--mutant", "ttl-refresh-on-read", "--seed", "3", "-q")
    assert code == 0
    assert "planted fault caught" in out
    assert err == ""
    assert list(tmp_path.iterdir()) == []


def test_fuzz_help_documents_examples_and_storage(capsys: pytest.CaptureFixture[str]) -> None:
    """CIS-STATE-1: `fuzz --help` says what --examples counts, that no .hypothesis/ is written, and
    where the Redis URL can come from."""
    with pytest.raises(SystemExit):
        main(["fuzz", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "max_examples" in text
    assert "summary counts every example run" in text
    assert "database=None" in text
    assert ".hypothesis/" in text
    assert REDIS_URL_ENV in text


def test_replay_and_inspect_help_name_the_variable(capsys: pytest.CaptureFixture[str]) -> None:
    """CIS-ERR-2: replay and inspect --help name INVOCATION_STORE_REDIS_URL; replay says Redis is
    used whenever it is set."""
    for command in ("replay", "inspect"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert REDIS_URL_ENV in text, command
    with pytest.raises(SystemExit):
        main(["replay", "--help"])
    assert "Redis is used whenever it is set" in " ".join(capsys.readouterr().out.split())
