"""`invocation-store fuzz`: run the stateful verification machine outside pytest.

Drives :func:`~invocation_store.testing.make_invocation_machine` with Hypothesis
(``run_state_machine`` under explicit settings and an explicit seed) against the
in-memory store, a Redis store, their async twins, or all of them at once
(``--store differential``). Progress goes to stderr while it runs; stdout gets the
summary (examples, steps, invariant checks, steps per second) or, when an invariant
breaks, the broken invariant and Hypothesis' minimal failing sequence of steps.

``--mutant NAME`` plants one known fault (``--list-mutants``) in a memory store to
show the machine catching it. With ``--store redis`` and no ``--redis-url`` a
private redis-server is started on a free loopback port and stopped afterwards;
the Redis URL (which may hold a password) is never printed. The URL may also come
from the ``INVOCATION_STORE_REDIS_URL`` environment variable (``--redis-url`` wins).

Nothing is left in the current directory: Hypothesis runs with no example database
(``database=None``) and keeps its caches in a temporary directory removed at the
end, unless ``HYPOTHESIS_STORAGE_DIRECTORY`` names one.

Exit status: 0 when every example passed (with ``--mutant``: when the planted fault
was caught), 1 when an invariant broke (with ``--mutant``: when it survived), 2 for
a bad option, a missing Hypothesis, or a Redis that cannot be reached or that the
store refuses (older than 6.2, an evicting ``maxmemory-policy``: the message says so).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TextIO

from ._common import REDIS_URL_ENV, fail, positive_int, unavailable

__all__ = ["register", "run"]

STORES = ("memory", "async-memory", "redis", "async-redis", "differential")

_PROG = "invocation-store fuzz"


def register(subparsers: Any) -> None:
    """Add the ``fuzz`` subcommand and its options (all documented in ``--help``)."""
    parser = subparsers.add_parser(
        "fuzz",
        help="check a store with the Hypothesis stateful machine (the invariants after every step)",
        description=(
            "Generate random sequences of operations (open, cancel and close runs; tool calls with every "
            "outcome; duplicate, cross-run, malformed and refused calls; crashed, late and racing workers; "
            "reads, citations, progress, stale sweeps; clock moves) and check the ten invariants after every "
            "step against the reference kernel. Progress on stderr; a summary, or the minimal failing "
            "sequence, on stdout. Exit 0 when every example passed, 1 when an invariant broke, 2 for a bad "
            "option or a Redis that cannot be reached or that the store refuses (older than 6.2, an "
            "evicting maxmemory-policy). With --mutant, exit 0 when the planted fault was caught and 1 "
            "when it survived. Writes nothing to the current directory: no Hypothesis example database "
            "(database=None, so a failure is replayed with --seed, not from a database) and Hypothesis' "
            "caches go to a temporary directory removed afterwards (or to HYPOTHESIS_STORAGE_DIRECTORY "
            "if set), so no .hypothesis/ directory appears."
        ),
    )
    parser.add_argument(
        "--store",
        choices=STORES,
        default="memory",
        help=(
            "store to check (default: memory). 'redis'/'async-redis' use RedisStore/AsyncRedisStore with a "
            "fresh key prefix per example; 'differential' runs memory, Redis and async Redis side by side"
        ),
    )
    parser.add_argument(
        "--redis-url",
        metavar="URL",
        help=(
            "Redis to use for the redis stores (only keys under a fresh 'cis-fuzz-*' prefix are written and "
            f"deleted); default: the {REDIS_URL_ENV} environment variable if set (prefer it for a URL with "
            "a password: it stays out of ps and the shell history), else start a private redis-server on "
            "a free loopback port"
        ),
    )
    parser.add_argument(
        "--examples",
        type=positive_int,
        default=100,
        metavar="N",
        help=(
            "examples to generate, default 100 (Hypothesis' max_examples): at most N examples pass. The "
            "summary counts every example run, which can be more: examples Hypothesis discards as invalid "
            "(they drew too much data) run too, and once an invariant breaks, generation stops and "
            "shrinking runs more examples to find the minimal failing sequence"
        ),
    )
    parser.add_argument(
        "--steps", type=positive_int, default=50, metavar="N", help="steps per example, default 50"
    )
    parser.add_argument(
        "--seed",
        type=int,
        metavar="S",
        help="random seed; the same seed replays the same examples (default: a random one, printed)",
    )
    parser.add_argument(
        "--mutant",
        metavar="NAME",
        help="plant a known fault in a memory store and show it being caught (see --list-mutants)",
    )
    parser.add_argument("--list-mutants", action="store_true", help="list the planted faults and exit")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    parser.set_defaults(func=run)


class _Progress:
    """Examples done, steps and rate on stderr: one rewritten line on a TTY, else a line every 2 s."""

    def __init__(self, stream: TextIO, total: int, quiet: bool) -> None:
        self.stream = stream
        self.total = total
        self.quiet = quiet
        self.tty = stream.isatty()
        self.last = 0.0

    def __call__(self, stats: Any) -> None:
        if self.quiet:
            return
        now = time.monotonic()
        if not self.tty and now - self.last < 2.0:
            return
        self.last = now
        line = (
            f"examples {stats.examples}/{self.total}  steps {stats.steps}  "
            f"checks {stats.checks}  {stats.steps_per_second:,.0f} steps/s"
        )
        if self.tty:
            self.stream.write("\r" + line + "  ")
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def done(self) -> None:
        if self.tty and not self.quiet and self.last:
            self.stream.write("\n")
            self.stream.flush()


@contextlib.contextmanager
def _redis_url(given: str | None, needed: bool, quiet: bool) -> Iterator[str | None]:
    if not needed:
        yield None
        return
    if given:
        yield given
        return
    from ..testing.redis_server import redis_server  # noqa: PLC0415 - only when a private server is needed

    with redis_server() as url:
        if not quiet:
            print("started a private redis-server on a free loopback port", file=sys.stderr)
        yield url


@contextlib.contextmanager
def _hypothesis_home() -> Iterator[None]:
    """Hypothesis' storage (caches) in a temporary directory, unless the user chose one."""
    from hypothesis import configuration  # noqa: PLC0415 - optional dependency

    if os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
        yield
        return
    previous = configuration.storage_directory(intent_to_write=False).home_directory
    with tempfile.TemporaryDirectory(prefix="cis-fuzz-hypothesis-") as home:
        configuration.set_hypothesis_home_dir(home)
        try:
            yield
        finally:
            configuration.set_hypothesis_home_dir(previous)


def _factories(store: str, url: str | None, closers: list[Any]) -> list[Callable[..., Any]]:
    """Store factories for ``store``; Redis factories to close are appended to ``closers``."""
    from ..adapters import AsyncMemoryStore, MemoryStore  # noqa: PLC0415 - the CLI starts fast
    from ..testing import FakeClock, RedisStoreFactory  # noqa: PLC0415 - the CLI starts fast

    def async_memory(clock: FakeClock) -> AsyncMemoryStore:
        return AsyncMemoryStore(clock=clock)

    if store == "memory":
        return [MemoryStore]
    if store == "async-memory":
        return [async_memory]
    assert url is not None
    factories: list[Callable[..., Any]] = []
    if store in ("redis", "differential"):
        factories.append(RedisStoreFactory(url, prefix="cis-fuzz"))
    if store in ("async-redis", "differential"):
        factories.append(RedisStoreFactory(url, asynchronous=True, prefix="cis-fuzz-async"))
    closers.extend(factories)
    return [MemoryStore, *factories] if store == "differential" else factories


def _check_redis(url: str) -> str | None:
    """None if the store accepts the server at ``url``, else a safe one-line reason (never the URL).

    The check is the store's own (``check_server``: reachable, version >= 6.2, an
    eviction policy that cannot evict its keys, every command its scripts use;
    CIS-STORE-7, CIS-DUR-3), so an old or misconfigured server is refused here with
    the setting to change, before any example runs.
    """
    from ..adapters import RedisStore, StoreUnavailableError  # noqa: PLC0415 - the CLI starts fast

    try:
        store = RedisStore.from_url(url, prefix="cis-fuzz", socket_timeout=3.0, socket_connect_timeout=3.0)
    except ValueError:
        return "cannot reach Redis (ValueError); STORE_UNAVAILABLE"
    try:
        store.check_server()
    except StoreUnavailableError as exc:
        if exc.permanent:  # a refused server: the message names what to change
            return unavailable(exc)
        return f"cannot reach Redis ({exc.cause}); STORE_UNAVAILABLE"
    finally:
        store.close()
    return None


def _notes(error: BaseException) -> list[str]:
    lines: list[str] = []
    for note in getattr(error, "__notes__", ()):
        lines.extend(str(note).splitlines())
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            lines.extend(_notes(inner))
    return lines


def _check_options(args: argparse.Namespace, mutants: Mapping[str, Any]) -> str | None:
    """A one-line complaint about contradictory options, or None."""
    if args.mutant is not None:
        if args.mutant not in mutants:
            return f"unknown mutant {args.mutant!r}; see --list-mutants"
        if args.store != "memory":
            return "--mutant plants its fault in a memory store; leave --store at 'memory'"
    if args.redis_url and args.store not in _REDIS_STORES:
        return "--redis-url needs --store redis, async-redis or differential"
    return None


_REDIS_STORES = ("redis", "async-redis", "differential")
_NOT_STEPS = ("state.inv", "Failing test case", "Explanation", "You can", "/")


def run(args: argparse.Namespace) -> int:
    """Run the machine as the options say; returns the exit status (see the module doc)."""
    try:
        from hypothesis import HealthCheck, Phase, reporting, seed, settings  # noqa: PLC0415 - optional
        from hypothesis.stateful import get_state_machine_test  # noqa: PLC0415 - optional

        from ..testing import INVARIANTS, MUTANTS, MachineStats, make_invocation_machine  # noqa: PLC0415
    except ImportError:
        return fail(
            _PROG, "needs Hypothesis: pip install 'canonical-invocation-store[dev]' (or hypothesis)", 2
        )
    if args.list_mutants:
        return _list_mutants(MUTANTS)
    complaint = _check_options(args, MUTANTS)
    if complaint is not None:
        return fail(_PROG, complaint, 2)
    mutant = MUTANTS[args.mutant] if args.mutant is not None else None
    label = f"mutant {mutant.name}" if mutant is not None else f"{args.store} store"
    chosen_seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    progress = _Progress(sys.stderr, args.examples, args.quiet)
    stats = MachineStats(on_example=progress)
    config = settings(
        max_examples=args.examples,
        stateful_step_count=args.steps,
        deadline=None,
        database=None,
        derandomize=False,
        report_multiple_bugs=False,
        print_blob=False,
        phases=[Phase.explicit, Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
    )
    reported: list[str] = []
    failure: BaseException | None = None
    with contextlib.ExitStack() as stack:
        given = args.redis_url or os.environ.get(REDIS_URL_ENV) or None
        try:
            url = stack.enter_context(_redis_url(given, args.store in _REDIS_STORES, args.quiet))
        except Exception as exc:  # noqa: BLE001 - a missing binary or a failed start is a one-line error
            return fail(
                _PROG, f"cannot start a private redis-server ({type(exc).__name__}); pass --redis-url", 2
            )
        reason = None if url is None else _check_redis(url)
        if reason is not None:
            return fail(_PROG, reason, 2)
        closers: list[Any] = []
        stack.callback(lambda: [closer.close() for closer in closers])
        stack.callback(progress.done)
        if mutant is not None:
            machine = make_invocation_machine(mutant.store, boundary_factory=mutant.boundary, stats=stats)
        else:
            machine = make_invocation_machine(*_factories(args.store, url, closers), stats=stats)
        if not args.quiet:
            print(
                f"fuzzing the {label}: {args.examples} examples of up to {args.steps} steps, "
                f"seed {chosen_seed}",
                file=sys.stderr,
            )
        test = seed(chosen_seed)(get_state_machine_test(machine, settings=config))

        def collect(value: object) -> None:
            reported.append(str(value))

        stack.enter_context(_hypothesis_home())
        started = time.perf_counter()
        with reporting.with_reporter(collect):
            try:
                test()
            except Exception as exc:  # noqa: BLE001 - any failure of the machine is reported below
                failure = exc
        elapsed = time.perf_counter() - started
    rate = stats.steps / elapsed if elapsed > 0 else 0.0
    print(
        f"{label}: {stats.examples} examples, {stats.steps} steps, {stats.checks} invariant checks "
        f"({len(INVARIANTS)} invariants after every step), {elapsed:.1f} s, {rate:,.0f} steps/s, "
        f"seed {chosen_seed}"
    )
    return _verdict(failure, mutant, reported, args, chosen_seed)


def _list_mutants(mutants: Mapping[str, Any]) -> int:
    width = max(len(name) for name in mutants)
    for name, planted in mutants.items():
        print(f"{name:{width}}  {planted.breaks:11}  {planted.summary}")
    return 0


def _verdict(
    failure: BaseException | None,
    mutant: Any,
    reported: list[str],
    args: argparse.Namespace,
    chosen_seed: int,
) -> int:
    """Print the outcome; the exit status (see the module doc)."""
    if failure is None:
        if mutant is not None:
            print(f"planted fault NOT caught: {mutant.summary} ({mutant.breaks})")
            return 1
        print("every invariant held after every step")
        return 0
    _report_failure(failure, reported, args, chosen_seed)
    if mutant is not None:
        print(f"planted fault caught: {mutant.summary} ({mutant.breaks})")
        return 0
    return 1


def _report_failure(failure: BaseException, reported: list[str], args: argparse.Namespace, seed: int) -> None:
    """The broken invariant, the minimal failing steps and how to replay them, on stdout."""
    print()
    print(f"FAILED: {type(failure).__name__}: {failure}")
    lines = [line for line in [*reported, *_notes(failure)] if line.strip()]
    steps = [line for line in lines if not line.lstrip().startswith(_NOT_STEPS)]
    if steps:
        print("minimal failing sequence:")
        for line in steps:
            print(f"    {line}")
    print(f"re-run with: invocation-store fuzz {_rerun(args, seed)}")


def _rerun(args: argparse.Namespace, chosen_seed: int) -> str:
    parts = [
        f"--store {args.store}",
        f"--examples {args.examples}",
        f"--steps {args.steps}",
        f"--seed {chosen_seed}",
    ]
    if args.mutant:
        parts.append(f"--mutant {args.mutant}")
    if args.redis_url:
        parts.append("--redis-url URL")
    return " ".join(parts)
