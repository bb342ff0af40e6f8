"""The deterministic simulator: replays, planted faults found, the real code's promises (CIS-SIM-1..10).

The default run is the CI size (about a minute on two cores); ``INVOCATION_STORE_SIMULATION=long``
runs ten times the seeds and longer schedules.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import random
import subprocess
import sys
import types
from collections.abc import Mapping

import attrs
import pytest
from hypothesis import HealthCheck, find, given, settings

from invocation_store.adapters._redis_server import judge_hello
from invocation_store.testing import (
    DEPLOYMENTS,
    PLANTED_FAULTS,
    PROMISES,
    HostSpec,
    RunSpec,
    Schedule,
    SimulationResult,
    Step,
    schedules,
    seed_schedule,
    seeds_to_find,
    shrink_failure,
    simulate,
)
from invocation_store.testing._sim_redis import SimRedisDeployment, _NodeSocket
from invocation_store.testing._sim_schedule import decode, encode, generate

LONG = os.environ.get("INVOCATION_STORE_SIMULATION") == "long"
SCALE = 10 if LONG else 1
STEPS = 400 if LONG else 150

#: Seeds from seed 0 within which each planted fault must be found at the CI size
#: (hosts 3, steps 150); the measured counts are in benchmarks/README.md.
FOUND_WITHIN: Mapping[str, int] = {
    "caller-clock": 10,
    "dropped-create": 10,
    "nested-retry": 20,
    "replay-ack": 30,
}

#: Seeds of the real code per deployment at the CI size.
REAL_SEEDS: Mapping[str, int] = {
    "memory": 15,
    "redis": 5,
    "redis-volatile": 4,
    "redis-replicas": 8,
    "redis-replicas-redis": 4,
    "redis-aof": 4,
    "redis-replicated": 4,
}


def test_same_schedule_replays_byte_for_byte() -> None:
    """The same seed gives the same schedule and the same trace, also through its text form (CIS-SIM-1)."""
    for deployment in ("memory", "redis-replicas"):
        schedule = seed_schedule(11, steps=120, deployment=deployment)
        assert seed_schedule(11, steps=120, deployment=deployment) == schedule
        first, second = simulate(schedule), simulate(schedule)
        assert first.trace == second.trace
        assert first.digest == second.digest
        assert len(first.trace) > 50
        replayed = simulate(decode(encode(schedule)))
        assert replayed.digest == first.digest
    assert seed_schedule(12, steps=120, deployment="memory") != seed_schedule(
        11, steps=120, deployment="memory"
    )


def test_replays_alike_in_other_processes() -> None:
    """Two processes with different hash seeds print the same digest for one seed (CIS-SIM-1)."""
    digests = set()
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "invocation_store.cli",
                "simulate",
                "--seed",
                "5",
                "--steps",
                "80",
                "--deployment",
                "redis-replicas",
                "--json",
                "--max-skew-ms",
                "0",
            ],
            capture_output=True,
            text=True,
            env=env,
            check=False,
            timeout=120,
        )
        assert out.returncode in (0, 1), out.stderr
        digests.add(json.loads(out.stdout.splitlines()[0])["digest"])
    assert len(digests) == 1


@pytest.mark.parametrize("planted", sorted(PLANTED_FAULTS))
def test_planted_fault_is_found_within_its_seeds(planted: str) -> None:
    """Each planted seam fault breaks its promise within the documented number of seeds (CIS-SIM-2)."""
    fault = PLANTED_FAULTS[planted]
    needed = seeds_to_find(planted, max_seeds=FOUND_WITHIN[planted], steps=150)
    assert needed is not None, f"{planted} not found within {FOUND_WITHIN[planted]} seeds"
    result = simulate(seed_schedule(needed - 1, steps=150, planted=planted), planted=planted)
    assert fault.promise in {violation.promise for violation in result.violations}
    assert fault.promise in PROMISES


def test_a_failure_shrinks_to_a_minimal_schedule_that_replays() -> None:
    """A planted caller-clock fault shrinks to a few steps; its text form replays it (CIS-SIM-2)."""
    needed = seeds_to_find("caller-clock", max_seeds=10, steps=150)
    assert needed is not None
    result = simulate(seed_schedule(needed - 1, steps=150, planted="caller-clock"), planted="caller-clock")
    small = shrink_failure(result, promise="once")
    assert "once" in {violation.promise for violation in small.violations}
    assert len(small.schedule.steps) <= 6 < len(result.schedule.steps)
    assert any(host.offset_ms for host in small.schedule.hosts)
    again = simulate(decode(encode(small.schedule)), planted="caller-clock")
    assert again.digest == small.digest
    assert again.violations == small.violations


def test_hypothesis_finds_and_shrinks_the_caller_clock_fault() -> None:
    """Hypothesis' own search over schedules finds a planted fault and shrinks it (CIS-SIM-2, CIS-SIM-3)."""

    def broken(schedule: Schedule) -> bool:
        found = simulate(schedule, planted="caller-clock", history=False)
        return any(v.promise == "once" for v in found.violations)

    found = find(
        schedules(max_hosts=2, max_steps=20, deployments=[DEPLOYMENTS["memory"]]),
        broken,
        settings=settings(max_examples=300, database=None, deadline=None),
        random=random.Random(27),
    )
    calls = [step for step in found.steps if step.action in ("call", "resend")]
    assert len(calls) >= 2
    assert any(host.offset_ms for host in found.hosts)


@settings(
    max_examples=8 * SCALE,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(schedules(max_hosts=3, max_steps=30, deployments=[DEPLOYMENTS["memory"], DEPLOYMENTS["redis"]]))
def test_generated_schedules_keep_every_promise(schedule: Schedule) -> None:
    """Hypothesis' schedules keep every promise, the history included (CIS-SIM-3..10)."""
    result = simulate(schedule)
    assert result.violations == (), [v.render() for v in result.violations]


_RESULTS: dict[str, list[SimulationResult]] = {}


def _real(deployment: str) -> list[SimulationResult]:
    if deployment not in _RESULTS:
        _RESULTS[deployment] = [
            simulate(seed_schedule(seed, steps=STEPS, deployment=deployment))
            for seed in range(REAL_SEEDS[deployment] * SCALE)
        ]
    return _RESULTS[deployment]


def _broken(promise: str, deployments: tuple[str, ...]) -> list[str]:
    return [
        f"{result.schedule.seed} {result.schedule.deployment.label()}: {violation.render()}"
        for deployment in deployments
        for result in _real(deployment)
        for violation in result.violations
        if violation.promise == promise
    ]


ALL = tuple(REAL_SEEDS)
REDIS = tuple(name for name in REAL_SEEDS if name != "memory")


@pytest.mark.parametrize("promise", ["budget", "raw", "wait", "drift", "stalled"])
def test_real_code_keeps_its_promises(promise: str) -> None:
    """The real boundary and stores keep these promises on every deployment and seed.

    CIS-SIM-1, CIS-SIM-6, CIS-SIM-7, CIS-SIM-8, CIS-SIM-10.
    """
    assert _broken(promise, ALL) == []


def test_real_code_never_refuses_a_call_made_once() -> None:
    """A re-sent call whose create reply was lost runs its tool once, not CALL_IN_PROGRESS (CIS-SIM-5)."""
    assert _broken("fate", ALL) == []


def test_real_code_runs_a_call_once_whatever_the_clocks() -> None:
    """Hosts whose clocks differ by seconds never run one call twice while its record lives (CIS-SIM-3)."""
    assert _broken("once", ALL) == []


def test_real_code_history_is_linearizable() -> None:
    """Every host's store operations form a linearizable history (CIS-SIM-9)."""
    assert _broken("history", ALL) == []


def test_real_code_keeps_acknowledged_creates() -> None:
    """No acknowledged create is lost in a failover (replicas=1) or a restart (aof) (CIS-SIM-4)."""
    assert _broken("durable", REDIS) == []


def test_real_code_keeps_every_promise_with_one_host_and_no_faults() -> None:
    """One host, no faults: every promise holds, so a failure above is a seam (CIS-SIM-3, CIS-SIM-9)."""
    for deployment in ("memory", "redis", "redis-replicas"):
        base = generate(3, hosts=1, steps=120, deployment=DEPLOYMENTS[deployment], fault_rate=0.0)
        steps = tuple(step for step in base.steps if step.action not in ("crash",))
        result = simulate(
            Schedule(seed=3, deployment=base.deployment, hosts=base.hosts, runs=base.runs, steps=steps)
        )
        assert [v.render() for v in result.violations] == []
        assert result.stats["executions"] > 5


def test_the_valkey_replay_acknowledgement_loses_a_create() -> None:
    """Issue 19.2's seam: a reply lost while replication is cut, then a failover (CIS-SIM-4)."""
    schedule = Schedule(
        seed=1,
        deployment=DEPLOYMENTS["redis-replicas"],
        hosts=(HostSpec(), HostSpec()),
        runs=(RunSpec(ttl_ms=30_000, budget=10, byte_budget=10_000),),
        steps=(
            Step(at_ms=0, action="open", arg=25_000),
            Step(at_ms=500, action="repl-cut", arg=6_000),
            Step(at_ms=500, action="lose-reply", arg=1),
            Step(at_ms=501, action="call", call=2),
            Step(at_ms=3_000, action="failover", arg=100),
            Step(at_ms=6_000, host=1, action="call", call=2),
        ),
    )
    for deployment in ("redis-replicas-redis", "redis-replicas"):
        result = simulate(attrs.evolve(schedule, deployment=DEPLOYMENTS[deployment]))
        assert "durable" not in {v.promise for v in result.violations}, deployment
        executions = [line for line in result.trace if "executes run-0/call_2" in line]
        assert len(executions) <= 1, deployment  # run once, or refused as not durable (never twice)


@pytest.mark.parametrize("flavour", ["redis", "valkey"])
def test_a_simulated_node_answers_the_version_probe_as_the_server_it_stands_for(flavour: str) -> None:
    """CIS-STORE-7: ``HELLO`` without arguments (a store's version check before its first read) is
    answered by the simulated node with the version its INFO reports, accepted by the store's judge,
    not by fakeredis with fakeredis' own version (which the judge would refuse as below 6.2)."""
    deployment = SimRedisDeployment(
        types.SimpleNamespace(now_ns=0),  # the simulation's loop: only its time is read here
        persistence="none",
        replica=False,
        flavour=flavour,
        repl_delay_ms=lambda: 0,
        on_change=lambda node: None,
        on_time=lambda tag, ms: None,
        on_reset=lambda node: None,
    )
    replies: list[bytes] = []
    sock = _NodeSocket(deployment.master, replies.append)
    assert judge_hello(deployment.master.node_command(sock, b"hello", [])) is True
    sock.run([b"HELLO"])  # what the store's probe sends reaches the node, not fakeredis
    version = b"8.1.1" if flavour == "valkey" else b"7.2.4"
    assert replies == [
        b"*8\r\n$6\r\nserver\r\n$%d\r\n%s\r\n$7\r\nversion\r\n$5\r\n%s\r\n"
        b"$5\r\nproto\r\n:2\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n"
        % (len(flavour), flavour.encode(), version)
    ]


def test_a_history_file_that_cannot_be_written_is_refused_before_any_seed_runs(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """CIS-SIM-1: ``--history`` to a path that cannot be written is a bad option (exit 2, one line,
    no traceback) said before the seeds run, so no work is lost; a writable path gets the history
    of the last seed, one JSON object per line."""
    from invocation_store.cli import main  # noqa: PLC0415 - the CLI entry point under test

    missing = tmp_path / "no-such-dir" / "h.jsonl"
    assert main(["simulate", "--seeds", "3", "--steps", "20", "--history", str(missing)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1
    assert "cannot write --history" in err
    assert "Traceback" not in err
    written = tmp_path / "h.jsonl"
    assert main(["simulate", "--seed", "4", "--steps", "20", "--history", str(written)]) == 0
    lines = written.read_text(encoding="ascii").splitlines()
    assert lines
    assert all(isinstance(json.loads(line), dict) for line in lines)


def test_a_script_refused_noscript_is_not_timed_and_a_plain_read_is() -> None:
    """CIS-SIM-9: the history times an operation where the server decided it. An EVALSHA of a script
    the node does not hold (after a restart) is refused NOSCRIPT and runs nothing: it reaches the
    node but gets no script time (it made an open look decided before the run it opened, a false
    "not linearizable" on seed 11016); the EVAL after it, and the EVALSHA once loaded, get the
    node's time. A plain read gets the node's time when it runs (a read during a restart was
    timed at its start, before the lapse its answer saw: seed 10022)."""
    writes: list[tuple[object, int | None]] = []
    reads: list[tuple[object, int]] = []
    loop = types.SimpleNamespace(now_ns=5_000_000_000)
    deployment = SimRedisDeployment(
        loop,
        persistence="none",
        replica=False,
        flavour="redis",
        repl_delay_ms=lambda: 0,
        on_change=lambda node: None,
        on_time=lambda tag, ms: None,
        on_reset=lambda node: None,
        on_write=lambda tag, ms: writes.append((tag, ms)),
        on_read=lambda tag, ms: reads.append((tag, ms)),
    )
    replies: list[bytes] = []
    sock = _NodeSocket(deployment.master, replies.append)
    sock.tag = "op"
    script = b"return redis.call('SET', KEYS[1], '1')"
    sha = hashlib.sha1(script).hexdigest().encode()  # Redis names a script by its SHA-1
    sock.run([b"EVALSHA", sha, b"1", b"k"])
    assert replies[-1].startswith(b"-NOSCRIPT")
    sock.run([b"EVAL", script, b"1", b"k"])
    sock.run([b"EVALSHA", sha, b"1", b"k"])
    now = deployment.master.time_ms()
    assert writes == [("op", None), ("op", now), ("op", now)]
    loop.now_ns += 7_000_000
    sock.run([b"GET", b"k"])
    sock.run([b"SET", b"k", b"2"])
    assert reads == [("op", now + 7)]
    assert writes[-1] == ("op", None)


def test_bad_seeds_and_a_replayed_schedule_say_what_to_run(capsys: pytest.CaptureFixture[str]) -> None:
    """CIS-SIM-2: a negative seed, or both ``--replay`` and ``--schedule``, is a bad option (exit 2,
    one line); a failing ``--schedule`` run names itself (``--schedule TEXT``) as its replay
    command, never the seed's default run, which is another schedule."""
    from invocation_store.cli import main  # noqa: PLC0415 - the CLI entry point under test

    for options in (["--seed", "-1"], ["--replay", "-2"], ["--replay", "3", "--schedule", "x"]):
        assert main(["simulate", *options]) == 2
        out, err = capsys.readouterr()
        assert out == ""
        assert err.count("\n") == 1
    assert main(["simulate", "--planted", "dropped-create", "--seeds", "10", "--steps", "150"]) == 1
    out, _ = capsys.readouterr()
    minimal = next(line for line in out.splitlines() if "replay the minimal schedule:" in line)
    text = minimal.split("--schedule ", 1)[1].split()[0]
    assert main(["simulate", "--planted", "dropped-create", "--schedule", text]) == 1
    out, _ = capsys.readouterr()
    (replay,) = [line for line in out.splitlines() if line.strip().startswith("replay:")]
    assert f"--schedule {text}" in replay
    assert "--replay" not in replay
