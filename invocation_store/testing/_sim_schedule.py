"""A simulation's schedule: the deployment, the hosts and their clocks, and every step, fixed by one seed.

A :class:`Schedule` is plain data: :func:`generate` draws one from a seed (the same seed,
hosts and steps give the same schedule, on every machine), :func:`schedules` is the
Hypothesis strategy of the same space (Hypothesis shrinks what it finds), and
:func:`shrink` reduces a failing schedule to a minimal one by deleting steps and hosts
and by zeroing clock offsets, keeping each change only while the failure stays.
:func:`encode` / :func:`decode` turn a schedule into one line of text, so that a
shrunk schedule replays from the command line (``invocation-store simulate
--schedule TEXT``).

A step is an action of one host's harness (open a run, make a call, re-send it, sweep,
read progress, cite, close, crash and come back), a network fault on one host's link, or
a store fault (restart, failover, eviction, memory full, a configuration change, a cut
replication link). Times are integer simulated ms from the start.
"""

from __future__ import annotations

import base64
import json
import random
import zlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final

from attrs import evolve, field, frozen

__all__ = [
    "ACTIONS",
    "DEPLOYMENTS",
    "HARNESS_ACTIONS",
    "NETWORK_FAULTS",
    "STORE_FAULTS",
    "Deployment",
    "HostSpec",
    "RunSpec",
    "Schedule",
    "Step",
    "decode",
    "encode",
    "generate",
    "render",
    "schedules",
    "shrink",
]

#: What a host's harness does.
HARNESS_ACTIONS: Final = ("open", "call", "resend", "sweep", "progress", "cite", "close", "crash")
#: Faults of one host's link to the store.
NETWORK_FAULTS: Final = ("lose-request", "lose-reply", "reset", "partition", "slow")
#: Faults of the store's servers (Redis deployments only).
STORE_FAULTS: Final = ("restart", "failover", "evict", "policy", "oom", "repl-cut")
ACTIONS: Final = (*HARNESS_ACTIONS, *NETWORK_FAULTS, *STORE_FAULTS)


@frozen(kw_only=True)
class Deployment:
    """The store a simulation runs against.

    ``store``: ``memory`` (a shared MemoryStore behind a lossy link) or ``redis`` (the
    Redis store over a simulated network to simulated servers). For Redis:
    ``durability`` (``none``, ``replicas``: ``Durability(replicas=1)``, ``aof``:
    ``Durability(aof=True)``), ``persistence`` (``none``, ``everysec``, ``always``),
    ``replica`` (a replica follows the master), ``flavour`` (``redis`` or ``valkey``:
    how ``WAIT`` counts a connection's writes).
    """

    store: str = "memory"
    durability: str = "none"
    persistence: str = "none"
    replica: bool = False
    flavour: str = "valkey"

    def label(self) -> str:
        """A short name: ``memory``, ``redis/replicas/valkey`` ..."""
        if self.store == "memory":
            return "memory"
        parts = [self.store, f"durability={self.durability}", f"persistence={self.persistence}"]
        if self.replica:
            parts.append("replica")
        parts.append(self.flavour)
        return "/".join(parts)


#: Named deployments (``--deployment``); ``mixed`` draws one per seed.
DEPLOYMENTS: Final[dict[str, Deployment]] = {
    "memory": Deployment(),
    "redis": Deployment(store="redis", persistence="always"),
    "redis-volatile": Deployment(store="redis", persistence="none"),
    "redis-replicas": Deployment(store="redis", durability="replicas", persistence="everysec", replica=True),
    "redis-replicas-redis": Deployment(
        store="redis", durability="replicas", persistence="everysec", replica=True, flavour="redis"
    ),
    "redis-aof": Deployment(store="redis", durability="aof", persistence="everysec"),
    "redis-replicated": Deployment(store="redis", persistence="none", replica=True),
}


@frozen(kw_only=True)
class HostSpec:
    """A harness host whose clock reads ``offset_ms`` ahead of the reference clock, drifting ``drift_ppm``."""

    offset_ms: int = 0
    drift_ppm: int = 0


@frozen(kw_only=True)
class RunSpec:
    """One run's parameters: every record's TTL, and the tool-call and byte budgets."""

    ttl_ms: int = 20_000
    budget: int = 6
    byte_budget: int = 4_000


@frozen(kw_only=True)
class Step:
    """One step at ``at_ms``: ``action`` by (or on the link of) ``host``, on run ``run``, call ``call``.

    ``arg``: the action's parameter: ``open`` the deadline (ms after the host's now);
    ``sweep`` the age; ``lose-request`` / ``lose-reply`` how many messages;
    ``partition``, ``oom``, ``repl-cut`` how long (ms); ``slow`` the extra delay (ms);
    ``restart`` / ``failover`` how long the server is down (ms).
    """

    at_ms: int
    host: int = 0
    action: str = "call"
    run: int = 0
    call: int = 0
    arg: int = 0


@frozen(kw_only=True)
class Schedule:
    """Everything one simulation does (module docstring); ``seed`` also fixes network delays."""

    seed: int
    deployment: Deployment = field(factory=Deployment)
    hosts: tuple[HostSpec, ...] = (HostSpec(),)
    runs: tuple[RunSpec, ...] = (RunSpec(),)
    steps: tuple[Step, ...] = ()
    calls_per_run: int = 8

    def describe(self) -> str:
        """One line: seed, deployment, hosts with clock offsets, steps and faults."""
        faults = sum(step.action in (*NETWORK_FAULTS, *STORE_FAULTS) for step in self.steps)
        clocks = ", ".join(f"{h.offset_ms:+d} ms/{h.drift_ppm:+d} ppm" for h in self.hosts)
        return (
            f"seed {self.seed}: {self.deployment.label()}, {len(self.hosts)} hosts (clocks {clocks}), "
            f"{len(self.runs)} runs, {len(self.steps)} steps ({faults} faults)"
        )


def _pick(rng: random.Random, weighted: Sequence[tuple[str, int]]) -> str:
    names = [name for name, _ in weighted]
    weights = [weight for _, weight in weighted]
    return rng.choices(names, weights)[0]


_HARNESS_WEIGHTS: Final = (
    ("call", 50),
    ("resend", 14),
    ("open", 3),
    ("sweep", 4),
    ("progress", 4),
    ("cite", 4),
    ("close", 1),
    ("crash", 2),
)
_NETWORK_WEIGHTS: Final = (
    ("lose-request", 3),
    ("lose-reply", 4),
    ("reset", 2),
    ("partition", 2),
    ("slow", 2),
)
_STORE_WEIGHTS: Final = (
    ("restart", 2),
    ("failover", 3),
    ("evict", 1),
    ("policy", 1),
    ("oom", 1),
    ("repl-cut", 3),
)


def generate(
    seed: int,
    *,
    hosts: int = 3,
    steps: int = 200,
    deployment: Deployment | None = None,
    max_skew_ms: int = 12_000,
    max_drift_ppm: int = 200,
    fault_rate: float = 0.06,
) -> Schedule:
    """The schedule of ``seed`` (module docstring): deterministic in all its arguments.

    ``deployment`` None draws one of :data:`DEPLOYMENTS` from the seed. Host 0's clock
    is the reference; the others are skewed by up to ``max_skew_ms`` either way and
    drift by up to ``max_drift_ppm``. About ``fault_rate`` of the steps are faults
    (store faults only on Redis). Raises ``ValueError`` for fewer than one host or step.
    """
    if hosts < 1 or steps < 1:
        raise ValueError("a schedule needs at least one host and one step")
    rng = random.Random(seed)  # noqa: S311 - a repeatable schedule, not security
    if deployment is None:
        deployment = DEPLOYMENTS[rng.choice(sorted(DEPLOYMENTS))]
    host_specs = [HostSpec()]
    for _ in range(hosts - 1):
        skewed = rng.random() < 0.8
        host_specs.append(
            HostSpec(
                offset_ms=rng.randint(-max_skew_ms, max_skew_ms) if skewed else 0,
                drift_ppm=rng.randint(-max_drift_ppm, max_drift_ppm),
            )
        )
    run_count = max(1, min(4, steps // 40 + 1))
    runs = tuple(
        RunSpec(
            ttl_ms=rng.choice((6_000, 15_000, 30_000, 60_000)),
            budget=rng.choice((4, 8, 12, 20)),
            byte_budget=rng.choice((1_500, 10_000, 40_000)),
        )
        for _ in range(run_count)
    )
    calls_per_run = 8
    out = [Step(at_ms=0, host=0, action="open", run=r, arg=_deadline(rng)) for r in range(run_count)]
    usable_until = [run.ttl_ms for run in runs]  # when each run ends (as the reference clock sees it)
    now = 5
    made: list[tuple[int, int, int]] = []  # (host, run, call) made so far, for re-sends
    for _ in range(steps):
        now += int(rng.expovariate(1 / 60)) + 1
        host = rng.randrange(hosts)
        if rng.random() < fault_rate / 2:
            run, call = rng.randrange(run_count), rng.randrange(calls_per_run)
            scenario = _scenario(rng, deployment, now=now, host=host, run=run, call=call)
            out.extend(scenario)
            made.extend((s.host, s.run, s.call) for s in scenario if s.action == "call")
            now = max(s.at_ms for s in scenario)
            continue
        if rng.random() < fault_rate:
            weights = _NETWORK_WEIGHTS + (_STORE_WEIGHTS if deployment.store == "redis" else ())
            action = _pick(rng, weights)
            out.append(Step(at_ms=now, host=host, action=action, arg=_fault_arg(rng, action)))
            continue
        action = _pick(rng, _HARNESS_WEIGHTS)
        run = rng.randrange(run_count)
        call = rng.randrange(calls_per_run)
        if action == "resend" and made:
            host, run, call = rng.choice(made[-12:])
        elif action == "resend":
            action = "call"
        arg = 0
        if action == "open":
            arg = _deadline(rng)
        elif action == "sweep":
            arg = rng.choice((0, 500, 3_000))
        if action in ("call", "resend"):
            made.append((host, run, call))
            if now > usable_until[run]:  # a harness opens the run again once it is over
                out.append(Step(at_ms=now, host=host, action="open", run=run, arg=_deadline(rng)))
                usable_until[run] = now + runs[run].ttl_ms
                now += 1
        out.append(Step(at_ms=now, host=host, action=action, run=run, call=call, arg=arg))
    return Schedule(
        seed=seed,
        deployment=deployment,
        hosts=tuple(host_specs),
        runs=runs,
        steps=tuple(out),
        calls_per_run=calls_per_run,
    )


#: Fault scenarios (Jepsen's nemesis: faults scheduled where they bite): name -> weight per store.
SCENARIOS: Final = {
    "lost-reply": {"memory": 3, "redis": 3},
    "outage-during-completion": {"memory": 2, "redis": 3},
    "unreplicated-failover": {"memory": 0, "redis": 6},
    "restart-after-call": {"memory": 0, "redis": 2},
}


def _scenario(
    rng: random.Random, deployment: Deployment, *, now: int, host: int, run: int, call: int
) -> list[Step]:
    """A few steps around one call that put a fault where it bites (the call itself included).

    ``lost-reply``: every reply to the host is lost from just before its call until its
    store gives up, then the link heals: the create ran, its caller never learned it.
    ``outage-during-completion``: the host is cut off while its tool runs, for longer
    than the completion budget. ``unreplicated-failover``: replication is cut, the
    call's replies are lost, and the master fails over before replication resumes.
    ``restart-after-call``: the server restarts right after the call's create.
    """
    weights = [(name, w[deployment.store]) for name, w in SCENARIOS.items() if w[deployment.store]]
    if not deployment.replica:
        weights = [(name, w) for name, w in weights if name != "unreplicated-failover"]
    name = _pick(rng, weights)
    call_step = Step(at_ms=now + 1, host=host, action="call", run=run, call=call)
    if name == "lost-reply":
        losses = 1 if deployment.store == "memory" else rng.choice((3, 8, 12))
        return [Step(at_ms=now, host=host, action="lose-reply", arg=losses), call_step]
    if name == "outage-during-completion":
        start = now + 1 + rng.randint(2, 300)
        return [
            call_step,
            Step(at_ms=start, host=host, action="partition", arg=rng.choice((2_600, 3_500, 5_000))),
        ]
    if name == "unreplicated-failover":
        return [
            Step(at_ms=now, host=host, action="repl-cut", arg=6_000),
            Step(at_ms=now, host=host, action="lose-reply", arg=rng.choice((1, 3, 6))),
            call_step,
            Step(
                at_ms=now + rng.randint(1_500, 5_000),
                host=host,
                action="failover",
                arg=rng.choice((100, 800)),
            ),
        ]
    return [
        call_step,
        Step(at_ms=now + rng.randint(2, 40), host=host, action="restart", arg=rng.choice((100, 800))),
    ]


def _deadline(rng: random.Random) -> int:
    return rng.choice((5_000, 12_000, 25_000, 50_000))


def _fault_arg(rng: random.Random, action: str) -> int:
    if action in ("lose-request", "lose-reply"):
        return rng.choice((1, 1, 2, 3))
    if action in ("partition", "oom", "repl-cut"):
        return rng.choice((300, 1_500, 3_500))
    if action == "slow":
        return rng.choice((50, 150, 300))
    if action in ("restart", "failover"):
        return rng.choice((100, 800, 2_500))
    return 0


def _clamp(action: str, arg: int) -> int:
    """A drawn parameter brought into its action's range (message counts stay small)."""
    if action in ("lose-request", "lose-reply"):
        return min(max(arg, 1), 8)
    if action == "slow":
        return min(arg, 600)
    if action == "open":
        return max(arg, 3_000)
    return arg


def schedules(
    *, max_hosts: int = 3, max_steps: int = 60, deployments: Sequence[Deployment] | None = None
) -> Any:
    """A Hypothesis strategy of schedules (the space :func:`generate` draws from); Hypothesis shrinks them.

    Imported lazily: Hypothesis is needed only here.
    """
    from hypothesis import strategies as st  # noqa: PLC0415 - Hypothesis is needed for this strategy only

    choices = (
        list(deployments) if deployments is not None else [DEPLOYMENTS[name] for name in sorted(DEPLOYMENTS)]
    )

    @st.composite
    def build(draw: Callable[..., Any]) -> Schedule:
        deployment = draw(st.sampled_from(choices))
        hosts = draw(
            st.lists(
                st.builds(
                    HostSpec,
                    offset_ms=st.sampled_from((0, 2_000, -2_000, 9_000, -9_000, 15_000, -15_000)),
                    drift_ppm=st.integers(-200, 200),
                ),
                min_size=0,
                max_size=max_hosts - 1,
            )
        )
        host_specs = (HostSpec(), *hosts)
        runs = tuple(
            draw(
                st.lists(
                    st.builds(
                        RunSpec,
                        ttl_ms=st.sampled_from((4_000, 8_000, 15_000, 30_000)),
                        budget=st.integers(1, 12),
                        byte_budget=st.sampled_from((600, 1_500, 10_000)),
                    ),
                    min_size=1,
                    max_size=2,
                )
            )
        )
        # Calls weigh most (as in :func:`generate`); a call may open its run first, as a
        # harness does when it starts work on a run (a no-op while the run lives).
        actions = (
            ("call",) * 6
            + ("resend",) * 2
            + HARNESS_ACTIONS
            + NETWORK_FAULTS
            + (STORE_FAULTS if deployment.store == "redis" else ())
        )
        raw_steps = draw(
            st.lists(
                st.tuples(
                    st.integers(1, 1_500),
                    st.integers(0, len(host_specs) - 1),
                    st.sampled_from(actions),
                    st.integers(0, len(runs) - 1),
                    st.integers(0, 3),
                    st.sampled_from((0, 1, 2, 4, 300, 1_500, 3_500, 12_000)),
                    st.booleans(),
                ),
                min_size=2,
                max_size=max_steps,
            )
        )
        steps = [Step(at_ms=0, action="open", run=r, arg=12_000) for r in range(len(runs))]
        now = 0
        for gap, host, action, run, call, arg, opens in raw_steps:
            now += gap
            if opens and action in ("call", "resend"):
                steps.append(Step(at_ms=now, host=host, action="open", run=run, arg=12_000))
                now += 1
            steps.append(
                Step(at_ms=now, host=host, action=action, run=run, call=call, arg=_clamp(action, arg))
            )
        seed = draw(st.integers(0, 2**31 - 1))
        return Schedule(seed=seed, deployment=deployment, hosts=host_specs, runs=runs, steps=tuple(steps))

    return build()


def shrink(schedule: Schedule, fails: Callable[[Schedule], bool], *, budget: int = 400) -> Schedule:
    """A smaller schedule that still ``fails``: steps deleted (halves, then one by one), hosts
    dropped, clock offsets and drifts zeroed, each kept only if the failure stays.

    Deterministic (a fixed order of attempts); at most ``budget`` calls of ``fails``.
    """
    tries = 0

    def attempt(candidate: Schedule) -> bool:
        nonlocal tries
        if tries >= budget:
            return False
        tries += 1
        return fails(candidate)

    current = schedule
    chunk = max(len(current.steps) // 2, 1)
    while chunk >= 1 and tries < budget:
        index = 0
        changed = False
        while index < len(current.steps) and tries < budget:
            steps = current.steps[:index] + current.steps[index + chunk :]
            candidate = evolve(current, steps=steps)
            if steps != current.steps and attempt(candidate):
                current = candidate
                changed = True
            else:
                index += chunk
        if not changed:
            chunk //= 2
    for host in range(len(current.hosts) - 1, 0, -1):
        if tries >= budget:
            break
        if all(step.host != host for step in current.steps):
            candidate = _without_host(current, host)
            if attempt(candidate):
                current = candidate
    for host in range(len(current.hosts)):
        spec = current.hosts[host]
        for simpler in (HostSpec(offset_ms=spec.offset_ms), HostSpec()):
            if simpler == spec or tries >= budget:
                continue
            candidate = evolve(current, hosts=(*current.hosts[:host], simpler, *current.hosts[host + 1 :]))
            if attempt(candidate):
                current = candidate
                spec = simpler
    return current


def _without_host(schedule: Schedule, host: int) -> Schedule:
    hosts = schedule.hosts[:host] + schedule.hosts[host + 1 :]
    steps = tuple(evolve(step, host=step.host - (step.host > host)) for step in schedule.steps)
    return evolve(schedule, hosts=hosts, steps=steps)


def _as_json(schedule: Schedule) -> dict[str, Any]:
    d = schedule.deployment
    return {
        "seed": schedule.seed,
        "deployment": [d.store, d.durability, d.persistence, int(d.replica), d.flavour],
        "hosts": [[h.offset_ms, h.drift_ppm] for h in schedule.hosts],
        "runs": [[r.ttl_ms, r.budget, r.byte_budget] for r in schedule.runs],
        "steps": [[s.at_ms, s.host, s.action, s.run, s.call, s.arg] for s in schedule.steps],
        "calls": schedule.calls_per_run,
    }


def encode(schedule: Schedule) -> str:
    """One line of URL-safe text (compressed JSON) that :func:`decode` turns back into ``schedule``."""
    data = json.dumps(_as_json(schedule), separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(zlib.compress(data, 9)).decode().rstrip("=")


def decode(text: str) -> Schedule:
    """The schedule :func:`encode` wrote; ``ValueError`` for anything else."""
    try:
        padded = text.strip() + "=" * (-len(text.strip()) % 4)
        obj = json.loads(zlib.decompress(base64.urlsafe_b64decode(padded)))
        store, durability, persistence, replica, flavour = obj["deployment"]
        schedule = Schedule(
            seed=int(obj["seed"]),
            deployment=Deployment(
                store=store,
                durability=durability,
                persistence=persistence,
                replica=bool(replica),
                flavour=flavour,
            ),
            hosts=tuple(HostSpec(offset_ms=int(a), drift_ppm=int(b)) for a, b in obj["hosts"]),
            runs=tuple(RunSpec(ttl_ms=int(a), budget=int(b), byte_budget=int(c)) for a, b, c in obj["runs"]),
            steps=tuple(
                Step(at_ms=int(t), host=int(h), action=str(a), run=int(r), call=int(c), arg=int(g))
                for t, h, a, r, c, g in obj["steps"]
            ),
            calls_per_run=int(obj["calls"]),
        )
    except (ValueError, KeyError, TypeError, zlib.error) as exc:
        raise ValueError(f"not a simulation schedule ({type(exc).__name__})") from None
    for step in schedule.steps:
        if step.action not in ACTIONS or not 0 <= step.host < len(schedule.hosts):
            raise ValueError("not a simulation schedule (unknown action or host)")
    return schedule


def render(schedule: Schedule) -> Iterator[str]:
    """The schedule as text, one line per host, run and step."""
    yield schedule.describe()
    for index, host in enumerate(schedule.hosts):
        yield f"  host {index}: clock {host.offset_ms:+d} ms, drift {host.drift_ppm:+d} ppm"
    for index, run in enumerate(schedule.runs):
        yield f"  run-{index}: ttl {run.ttl_ms} ms, budget {run.budget} calls / {run.byte_budget} bytes"
    for step in schedule.steps:
        yield "  " + describe_step(step)


def describe_step(step: Step) -> str:
    """``t=1234ms host 1 call run-0/call_3`` and the like."""
    where = f"t={step.at_ms}ms"
    if step.action in HARNESS_ACTIONS:
        target = f"run-{step.run}"
        if step.action in ("call", "resend", "cite"):
            target += f"/call_{step.call}"
        extra = f" ({step.arg} ms)" if step.action in ("open", "sweep") else ""
        if step.action == "crash":
            return f"{where} host {step.host} crashes and restarts"
        return f"{where} host {step.host} {step.action} {target}{extra}"
    if step.action in NETWORK_FAULTS:
        return f"{where} network: {step.action} on host {step.host}'s link (arg {step.arg})"
    return f"{where} store: {step.action} (arg {step.arg})"
