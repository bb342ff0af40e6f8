"""Mutation analysis of the kernel and the adapters, on demand (mutmut; not part of CI).

Usage::

    .venv/bin/pip install -e '.[dev,mutation]'
    .venv/bin/python scripts/mutation.py kernel                 # every kernel mutant
    .venv/bin/python scripts/mutation.py adapters --sample 60   # a seeded sample of adapter mutants
    .venv/bin/python scripts/mutation.py adapters --keep /tmp/cis-mutants   # keep it for mutmut show

``kernel`` runs mutmut with the ``[tool.mutmut]`` table of ``pyproject.toml`` (the kernel's
modules, each mutant checked by the fast kernel tests, ``tests/kernel``). ``adapters``
runs it in a scratch copy of the repository whose table mutates the memory store, the
Redis store and its reply checks instead, each mutant checked by ``tests/stores`` (which
starts its own Redis servers). Both print one line::

    <target>: <total> mutants, <killed> killed, <survived> survived (<equivalent> equivalent), score <s>%

where the score is killed / (total - equivalent). Surviving mutants judged equivalent
(no observable behaviour differs) are listed in :data:`EQUIVALENT` with the reason;
every other survivor is printed by name, to be killed by a new test or judged. Mutant
names are mutmut's (``<module>.x_<function>__mutmut_<n>``) and change when the code
changes: rerun and review after kernel edits. ``--max-children`` (default 1) keeps the
run to one core.
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Kernel mutants that survive and change no observable behaviour, with the reason.
EQUIVALENT: dict[str, str] = {
    **{
        f"invocation_store.kernel._ijson.x__constant__mutmut_{n}": (
            "the text of an internal rejection, caught and answered with INVALID_ARGUMENTS; never seen"
        )
        for n in (1, 2, 3, 4)
    },
    **{
        f"invocation_store.kernel._ijson.x__float__mutmut_{n}": (
            "the text of an internal rejection, caught and answered with INVALID_ARGUMENTS; never seen"
        )
        for n in (5, 6, 7)
    },
    "invocation_store.kernel._models.x__positive__mutmut_9": (
        "getattr's default for a missing 'name': attrs always passes an Attribute that has one"
    ),
    "invocation_store.kernel._models.x__positive__mutmut_12": (
        "getattr without a default for 'name': attrs always passes an Attribute that has one"
    ),
    "invocation_store.kernel._models.x__positive__mutmut_15": (
        "getattr's default for a missing 'name': attrs always passes an Attribute that has one"
    ),
    "invocation_store.kernel._preflight.x_preflight__mutmut_25": (
        "None instead of the (empty) token: preflight returns only the code, and admit treats every "
        "falsy token alike (it never replays)"
    ),
    "invocation_store.kernel._refs.x_project_progress__mutmut_7": (
        "the 'list is full' flag starts as None instead of False: only its truth is read"
    ),
    "invocation_store.kernel._admission.x_run_usage_after__mutmut_5": (
        "a zero charge builds an equal RunState instead of returning the same one: equal values"
    ),
    "invocation_store.kernel._ijson.x__valid_unicode__mutmut_4": (
        "'UTF-8' for 'utf-8': codec names are case-insensitive, the same codec"
    ),
    **{
        f"invocation_store.kernel._sizes.x_text_exceeds__mutmut_{n}": (
            "a narrower 'surely within' shortcut (5 * length, or < for <=): the texts it no longer "
            "short-cuts are measured and get the same answer; only the cost differs"
        )
        for n in (6, 7)
    },
    "invocation_store.kernel._admission.x_check_begin__mutmut_10": (
        "the probe record's token becomes None: no Begin check and not record_bytes reads the token, "
        "and check_begin returns only the code"
    ),
    **{
        f"invocation_store.kernel._admission.x_check_begin__mutmut_{n}": (
            "the probe record's sequence (None or 2 for 1): no Begin check and not record_bytes reads it, "
            "and check_begin returns only the code"
        )
        for n in (11, 22)
    },
    "invocation_store.kernel._admission.x_check_begin__mutmut_23": (
        "the probe's ttl_ms 2 for 1: Begin checks only that it is a positive int, and the expiry it "
        "gives is discarded with the probe record"
    ),
}

#: Adapter mutants met in samples that change no observable behaviour, with the reason.
#: (mutmut names methods ``x<sep><Class><sep><method>``; the separator is U+01C1.)
_SEP = "\u01c1"
EQUIVALENT.update(
    {
        "invocation_store.adapters._redis_keys.x_check_prefix__mutmut_6": (
            "the prefix is validated with another safe probe run id ('X' for 'x')"
        ),
        # Judged before _redis_core.py was split per operation; plan_open moved to
        # _redis_runs.py (its mutant numbers are to be judged again on the next sample).
        "invocation_store.adapters._redis_runs.x_plan_open__mutmut_8": (
            "deadline_ms left out of the 2**53 check: deadline + ttl is checked (ttl >= 1) and the "
            "kernel refuses a negative deadline, so the same ValueError is raised"
        ),
        f"invocation_store.adapters._sync.redis.x{_SEP}RedisStore{_SEP}__init____mutmut_8": (
            "the 'scripts loaded' flag starts as None instead of False: only its truth is read"
        ),
        f"invocation_store.adapters._sync.redis.x{_SEP}RedisStore{_SEP}_send_complete__mutmut_1": (
            "a CompleteCall's staged text and staging key are set together or not at all"
        ),
        f"invocation_store.adapters._async.redis.x{_SEP}AsyncRedisStore{_SEP}_send_complete__mutmut_22": (
            "SET NX on a staging key named with a fresh random nonce: it never exists before"
        ),
        f"invocation_store.adapters.memory.x{_SEP}MemoryStore{_SEP}close_run__mutmut_2": (
            "cancel=None instead of False: only its truth is read"
        ),
    }
)

#: The ``[tool.mutmut]`` table of the adapters run (written into the scratch copy).
ADAPTERS_TABLE = """[tool.mutmut]
source_paths = ["invocation_store/"]
only_mutate = [
    "invocation_store/adapters/memory.py",
    "invocation_store/adapters/_async/redis.py",
    "invocation_store/adapters/_sync/redis.py",
    "invocation_store/adapters/_redis_keys.py",
    "invocation_store/adapters/_redis_decode.py",
    "invocation_store/adapters/_redis_runs.py",
    "invocation_store/adapters/_redis_create.py",
    "invocation_store/adapters/_redis_complete.py",
    "invocation_store/adapters/_redis_clock.py",
]
also_copy = ["conftest.py", "spec/", "examples/"]
pytest_add_cli_args = ["-p", "no:xdist", "-p", "no:cacheprovider", "-q", "-x"]
pytest_add_cli_args_test_selection = ["tests/stores/"]
"""


def _mutmut(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - our own interpreter, fixed arguments
        [sys.executable, "-m", "mutmut", *args], cwd=workdir, capture_output=True, text=True, check=False
    )


def _statuses(workdir: Path) -> dict[str, str]:
    """Mutant name -> mutmut status (killed, survived, ...), from ``mutmut results --all``."""
    listing = _mutmut(workdir, "results", "--all", "true").stdout
    found = {}
    for line in listing.splitlines():
        name, sep, status = line.strip().rpartition(": ")
        if sep and name:
            found[name] = status.strip()
    return found


def _report(target: str, statuses: dict[str, str]) -> int:
    total = len(statuses)
    killed = sum(status in {"killed", "timeout"} for status in statuses.values())
    survivors = sorted(name for name, status in statuses.items() if status == "survived")
    equivalent = [name for name in survivors if name in EQUIVALENT]
    unexplained = [name for name in survivors if name not in EQUIVALENT]
    other = total - killed - len(survivors)
    judged = total - len(equivalent)
    score = 100.0 * killed / judged if judged else 100.0
    print(
        f"{target}: {total} mutants, {killed} killed, {len(survivors)} survived "
        f"({len(equivalent)} equivalent), score {score:.1f}%" + (f", {other} not run" if other else "")
    )
    for name in unexplained:
        print(f"  survived, not judged equivalent: {name}")
    return 0


def run_kernel(max_children: int) -> int:
    """Every kernel mutant, in the repository (mutmut writes ``mutants/``, git-ignored)."""
    done = _mutmut(ROOT, "run", "--max-children", str(max_children))
    if done.returncode != 0:
        print(done.stdout[-2000:], done.stderr[-2000:], sep="\n")
        return done.returncode
    return _report("kernel", _statuses(ROOT))


def _scratch_copy(destination: Path) -> None:
    files = subprocess.run(
        ["git", "ls-files", "-z"],  # noqa: S607 - git from PATH, as a developer runs it
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for raw in files:
        if not raw:
            continue
        name = raw.decode()
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    pyproject = destination / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8")
    table = re.compile(r"^\[tool\.mutmut\]\n(?:(?!^\[).*\n?)*", re.MULTILINE)
    pyproject.write_text(table.sub(ADAPTERS_TABLE + "\n", text), encoding="utf-8")


def run_adapters(sample: int, seed: int, max_children: int, keep: Path | None = None) -> int:
    """A seeded sample of adapter mutants, in a scratch copy of the tracked files.

    ``keep`` names a directory to hold the copy (kept afterwards, for ``mutmut show``);
    by default a temporary one is removed at the end.
    """
    with tempfile.TemporaryDirectory(prefix="cis-mutation-") as scratch:
        workdir = Path(scratch) if keep is None else keep
        if keep is not None and keep.exists():
            shutil.rmtree(keep)
        _scratch_copy(workdir)
        # A first run with a name matching nothing generates every mutant and the test map.
        first = _mutmut(workdir, "run", "--max-children", str(max_children), "no-such-mutant")
        if "failed to collect stats" in first.stdout + first.stderr:
            # The unmutated tests failed in the copy (a file they read was not copied?).
            print("adapters: the tests fail on the unmutated copy", first.stdout[-2000:], sep="\n")
            return 1
        names = sorted(_statuses(workdir))
        if not names:
            print("adapters: mutmut generated no mutants")
            return 1
        draw = random.Random(seed)  # noqa: S311 - a reproducible sample, not a secret
        chosen = sorted(draw.sample(names, min(sample, len(names))))
        done = _mutmut(workdir, "run", "--max-children", str(max_children), *chosen)
        if done.returncode != 0:
            print(done.stdout[-2000:], done.stderr[-2000:], sep="\n")
        statuses = _statuses(workdir)
        return _report(
            f"adapters (sample of {len(chosen)} of {len(names)}, seed {seed})",
            {name: statuses.get(name, "not run") for name in chosen},
        )


def main(argv: list[str] | None = None) -> int:
    """Parse arguments and run; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("target", choices=("kernel", "adapters"))
    parser.add_argument("--sample", type=int, default=60, help="adapter mutants to run (default 60)")
    parser.add_argument("--seed", type=int, default=16, help="seed of the adapter sample (default 16)")
    parser.add_argument("--max-children", type=int, default=1, help="parallel mutants (default 1)")
    parser.add_argument("--keep", type=Path, help="adapters: keep the scratch copy here (emptied first)")
    args = parser.parse_args(argv)
    if args.target == "kernel":
        return run_kernel(args.max_children)
    return run_adapters(args.sample, args.seed, args.max_children, args.keep)


if __name__ == "__main__":
    sys.exit(main())
