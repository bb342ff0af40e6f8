"""What the boundary logs, line for line: every event an operator reads, sync and async (CIS-ERR-2).

Each scenario drives one boundary through one event and compares the whole list of
(logger, level, message) it logged with the line written here, so that a changed
text, a dropped argument, a wrong level or a line logged twice fails. The same
scenarios run on ``ToolBoundary`` and ``AsyncToolBoundary`` (two modules, one text).
No line holds a payload, a key or a credential (the leaky store error carries all three).
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from invocation_store import (
    AsyncMemoryStore,
    AsyncToolBoundary,
    ErrorCode,
    EvidenceStatus,
    MemoryStore,
    Projection,
    RunContext,
    StoreUnavailableError,
    ToolBoundary,
    ToolRegistry,
    ToolSpec,
)
from invocation_store.adapters import CorruptRecordError, UnsafeServerError
from invocation_store.testing import FakeClock

from ._fakes import (
    MARKER,
    PASSWORD,
    RUN,
    SECRET_KEY,
    FailingStore,
    FakeProjector,
    LeakyStoreError,
    envelope,
)

BOUNDARY = "invocation_store.boundary"
INFO, WARNING, ERROR = logging.INFO, logging.WARNING, logging.ERROR


class Harness:
    """One boundary of either flavour behind one awaitable face, over a memory store and a FakeClock."""

    def __init__(
        self, flavour: str, *specs: ToolSpec | Callable[[Harness], ToolSpec], budget: int = 5
    ) -> None:
        self.flavour = flavour
        self.clock = FakeClock(1_000_000)
        built = [spec if isinstance(spec, ToolSpec) else spec(self) for spec in specs]
        registry = ToolRegistry(built or [tool()])
        if flavour == "sync":
            self.inner: Any = MemoryStore(self.clock)
            self.boundary: Any = ToolBoundary(self.inner, registry)
        else:
            self.inner = AsyncMemoryStore(clock=self.clock)
            self.boundary = AsyncToolBoundary(self.inner, registry)
        self.budget = budget
        self.context: RunContext | None = None
        #: Every result's ids, in order: (how it was asked, the envelope's id or None, the result's
        #: tool_call_id, tool_name, envelope_tool_call_id).
        self.ids: list[tuple[str, object, Any, Any, Any]] = []

    def rebuild(self, **options: Any) -> None:
        """The same store and tools behind a new boundary built with ``options``."""
        kind = ToolBoundary if self.flavour == "sync" else AsyncToolBoundary
        self.boundary = kind(self.inner, self.boundary.registry, **options)

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        answer = getattr(self.boundary, method)(*args, **kwargs)
        return await answer if self.flavour == "async" else answer

    def fail(self, *methods: str, error: Callable[[], BaseException] | None = None) -> None:
        """From now on the store raises from ``methods`` (a leaky ConnectionError by default)."""
        options: dict[str, Any] = {} if error is None else {"error": error}
        self.boundary.store = FailingStore(self.inner, methods, is_async=self.flavour == "async", **options)

    def heal(self) -> None:
        self.boundary.store = self.inner

    async def open(self) -> RunContext:
        context = await self._call(
            "open_run",
            RUN,
            deadline_ms=self.clock() + 60_000,
            ttl_ms=60_000,
            tool_call_budget=self.budget,
            byte_budget=1 << 20,
        )
        assert isinstance(context, RunContext), context
        self.context = context
        return context

    async def invoke(self, tool_call_id: object, **fields: Any) -> ErrorCode | None:
        assert self.context is not None
        result = await self._call("invoke", self.context, envelope(tool_call_id, **fields))
        self.ids.append(
            ("invoke", tool_call_id, result.tool_call_id, result.tool_name, result.envelope_tool_call_id)
        )
        return result.code  # type: ignore[no-any-return]

    async def sweep(self, older_than_ms: int) -> int:
        assert self.context is not None
        return await self._call("sweep_stale", self.context, older_than_ms)  # type: ignore[no-any-return]

    async def progress(self) -> Any:
        assert self.context is not None
        return await self._call("project_progress", self.context)

    async def finish_pending(self) -> dict[str, Any]:
        assert self.context is not None
        results = await self._call("finish_pending", self.context)
        for call, result in results.items():
            self.ids.append(
                ("finish_pending", call, result.tool_call_id, result.tool_name, result.envelope_tool_call_id)
            )
        return {
            call: (result.code, result.tool_call_id, result.tool_name) for call, result in results.items()
        }


def tool(**fields: Any) -> ToolSpec:
    """The ``search`` tool, inline, with a valid projection unless ``fields`` say otherwise."""
    base: dict[str, Any] = {
        "name": "search",
        "executor": lambda arguments: '{"hits":[]}',
        "projector": FakeProjector(),
        "timeout_ms": None,
    }
    return ToolSpec(**{**base, **fields})


def _slow(arguments: Any) -> str:
    time.sleep(0.3)
    return "late"


def _sweeping_tool(h: Harness) -> ToolSpec:
    """A tool whose run sweeps its own record first (as a janitor would meanwhile)."""
    if h.flavour == "sync":

        def executor(arguments: Any) -> str:
            assert h.context is not None
            assert h.boundary.sweep_stale(h.context, 0) == 1
            return "raw"

        return tool(executor=executor)

    async def async_executor(arguments: Any) -> str:
        assert h.context is not None
        assert await h.boundary.sweep_stale(h.context, 0) == 1
        return "raw"

    return tool(executor=async_executor)


class _Unreadable(Projection):
    """A Projection whose content cannot be read (a hostile subclass)."""

    def __getattribute__(self, name: str) -> Any:
        if name == "content":
            raise RuntimeError(MARKER)
        return super().__getattribute__(name)


class _After:
    """A store whose ``name`` runs on ``inner`` as usual, then hands its args and answer to ``after``
    (which raises, or returns the answer the caller gets), sync or async alike."""

    def __init__(
        self, inner: Any, is_async: bool, name: str, after: Callable[[tuple[Any, ...], Any], Any]
    ) -> None:
        self.inner = inner
        self.is_async = is_async
        self.name = name
        self.after = after

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name != self.name:
            return attr
        if self.is_async:

            async def call_async(*args: Any) -> Any:
                return self.after(args, await attr(*args))

            return call_async
        return lambda *args: self.after(args, attr(*args))


def _lose_reply(args: tuple[Any, ...], answer: Any) -> Any:
    raise LeakyStoreError  # applied, then the connection drops: the reply is lost


def _LostReply(inner: Any, is_async: bool) -> _After:
    """A store that applies a create and then loses its reply (the connection drops)."""
    return _After(inner, is_async, "create", _lose_reply)


def _call_9_corrupt(args: tuple[Any, ...], answer: Any) -> Any:
    raise CorruptRecordError(args[0], {"call_9": "NoTTL"}, answer)


def _CorruptReads(inner: Any, is_async: bool) -> _After:
    """A store whose batched read finds ``call_9`` corrupt (no TTL) and the rest as they are."""
    return _After(inner, is_async, "get_many", _call_9_corrupt)


async def preflight(h: Harness) -> list[Any]:
    await h.open()
    return [
        await h.invoke("call_1", arguments="{not json"),
        await h.invoke("call_2", tool_name="delete_everything"),
    ]


async def admission(h: Harness) -> list[Any]:
    h.budget = 1
    await h.open()
    return [await h.invoke("call_1"), await h.invoke("call_2"), await h.invoke("call_1")]


async def executor_timed_out(h: Harness) -> list[Any]:
    await h.open()
    return [await h.invoke("call_1")]


async def unserializable(h: Harness) -> list[Any]:
    await h.open()
    return [await h.invoke("call_1")]


async def projector_returned_text(h: Harness) -> list[Any]:
    await h.open()
    return [await h.invoke("call_1")]


async def complete_failed_then_swept(h: Harness) -> list[Any]:
    await h.open()
    h.fail("complete")
    first = await h.invoke("call_1")
    h.heal()
    h.clock.advance(10_000)
    return [first, await h.sweep(1_000), await h.sweep(1_000)]


async def clock_failed_before_create(h: Harness) -> list[Any]:
    await h.open()
    h.fail("now_ms")
    first = await h.invoke("call_1")
    h.heal()
    return [first, await h.invoke("call_1")]


async def store_names_its_own_code(h: Harness) -> list[Any]:
    await h.open()
    h.fail(
        "create", error=lambda: StoreUnavailableError("NotReplicated", code=ErrorCode.DURABILITY_NOT_REACHED)
    )
    return [await h.invoke("call_1"), await h.invoke(17)]


class ThirdPartyUnavailable(StoreUnavailableError):
    """A third-party store's own failure type: its cause is foreign text, logged only as a safe name."""


async def store_failures_as_logged(h: Harness) -> list[Any]:
    await h.open()
    answers: list[Any] = []
    for error in (
        lambda: ThirdPartyUnavailable("Busy"),  # a safe name: kept
        lambda: ThirdPartyUnavailable(f"key {SECRET_KEY} of {MARKER}"),  # foreign text: reduced
        lambda: UnsafeServerError("maxmemory-policy allkeys-lru can evict the store's keys"),  # ours: kept
    ):
        h.fail("create", error=error)
        answers.append(await h.invoke(f"call_{len(answers) + 1}"))
    return answers


async def create_failed_then_sent_again(h: Harness) -> list[Any]:
    await h.open()
    h.fail("create")
    first = await h.invoke("call_1")
    h.heal()
    return [first, await h.invoke("call_1")]


async def sweep_meets_a_corrupt_record(h: Harness) -> list[Any]:
    await h.open()
    done = await h.invoke("call_1")
    h.boundary.store = _CorruptReads(h.inner, h.flavour == "async")
    return [done, await h.sweep(0)]


async def swept_while_running(h: Harness) -> list[Any]:
    await h.open()
    assert h.context is not None
    return [await h.invoke("call_1")]


async def held_completion_refused(h: Harness) -> list[Any]:
    await h.open()
    h.fail("complete")
    first = await h.invoke("call_1")
    h.heal()
    swept = await h.sweep(0)
    return [first, swept, await h.finish_pending(), await h.finish_pending()]


async def held_completion_still_failing(h: Harness) -> list[Any]:
    await h.open()
    h.fail("complete")
    first = await h.invoke("call_1")
    return [first, await h.finish_pending()]


async def projection_unreadable(h: Harness) -> list[Any]:
    await h.open()
    return [await h.invoke("call_1")]


async def lost_create_reply_recognised(h: Harness) -> list[Any]:
    await h.open()
    h.boundary.store = _LostReply(h.inner, h.flavour == "async")
    first = await h.invoke("call_1")
    h.heal()
    return [first, await h.invoke("call_1")]


class _Gate:
    """A store whose creates wait until the gate opens (``entered`` is set while one waits)."""

    def __init__(self, inner: Any, is_async: bool) -> None:
        self.inner = inner
        self.is_async = is_async
        self.entered = threading.Event()
        self.opened = threading.Event()
        self.entered_async: asyncio.Event | None = None
        self.opened_async: asyncio.Event | None = None

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name != "create":
            return attr
        if self.is_async:

            async def create_async(*args: Any) -> Any:
                assert self.entered_async is not None
                assert self.opened_async is not None
                self.entered_async.set()
                await self.opened_async.wait()
                return await attr(*args)

            return create_async

        def create(*args: Any) -> Any:
            self.entered.set()
            assert self.opened.wait(10)
            return attr(*args)

        return create


async def _while_a_create_waits(h: Harness, tool_call_id: str) -> tuple[Any, Any]:
    """Send ``tool_call_id`` and, while its create waits at the gate, send it again; both answers."""
    gate = _Gate(h.inner, h.flavour == "async")
    h.boundary.store = gate
    if h.flavour == "async":
        gate.entered_async, gate.opened_async = asyncio.Event(), asyncio.Event()
        waiting = asyncio.ensure_future(h.invoke(tool_call_id))
        await gate.entered_async.wait()
        second = await h.invoke(tool_call_id)
        gate.opened_async.set()
        return await waiting, second
    answers: list[Any] = []
    thread = threading.Thread(target=lambda: answers.append(asyncio.run(h.invoke(tool_call_id))))
    thread.start()
    assert gate.entered.wait(10)
    second = await h.invoke(tool_call_id)
    gate.opened.set()
    thread.join(10)
    return answers[0], second


class _ClockGate:
    """A store whose first two clock reads each wait for their own go, and whose creates wait too.

    Two sends of one call can then both find nothing held (each reads the clock before either
    begins its create): the first begins and sends, the second then finds it begun.
    """

    def __init__(self, inner: Any, is_async: bool) -> None:
        self.inner = inner
        self.is_async = is_async
        self.reads = 0
        self.read_in = [threading.Event(), threading.Event()]
        self.read_go = [threading.Event(), threading.Event()]
        self.create_in = threading.Event()
        self.create_go = threading.Event()

    async def _wait_async(self, event: threading.Event) -> None:
        while not event.is_set():
            await asyncio.sleep(0.001)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name == "create":
            if self.is_async:

                async def create_async(*args: Any) -> Any:
                    self.create_in.set()
                    await self._wait_async(self.create_go)
                    return await attr(*args)

                return create_async

            def create(*args: Any) -> Any:
                self.create_in.set()
                assert self.create_go.wait(10)
                return attr(*args)

            return create
        # The clock a create's decision reads: synced_now_ms where the store has one, else now_ms.
        if name == ("synced_now_ms" if hasattr(self.inner, "synced_now_ms") else "now_ms"):
            index = self.reads
            self.reads += 1
            if self.is_async:

                async def read_async() -> int:
                    if index < 2:
                        self.read_in[index].set()
                        await self._wait_async(self.read_go[index])
                    return int(self.inner.now_ms())

                return read_async

            def read() -> int:
                if index < 2:
                    self.read_in[index].set()
                    assert self.read_go[index].wait(10)
                    return int(self.inner.now_ms())
                return int(self.inner.now_ms())

            return read
        return attr


async def begun_while_the_clock_was_read(h: Harness) -> list[Any]:
    await h.open()
    gate = _ClockGate(h.inner, h.flavour == "async")
    h.boundary.store = gate
    answers: dict[str, Any] = {}

    def send(label: str) -> Any:
        async def one() -> None:
            answers[label] = await h.invoke("call_1")

        if h.flavour == "async":
            return asyncio.ensure_future(one())
        thread = threading.Thread(target=lambda: asyncio.run(one()))
        thread.start()
        return thread

    async def until(event: threading.Event) -> None:
        while not event.is_set():
            await asyncio.sleep(0.001)

    first = send("first")
    await until(gate.read_in[0])
    second = send("second")
    await until(gate.read_in[1])
    gate.read_go[0].set()
    await until(gate.create_in)  # the first send has begun its create
    gate.read_go[1].set()
    while "second" not in answers:
        await asyncio.sleep(0.001)
    gate.create_go.set()
    for sender in (first, second):
        if h.flavour == "async":
            await sender
        else:
            sender.join(10)
    return [answers["first"], answers["second"]]


async def sent_twice_at_once(h: Harness) -> list[Any]:
    await h.open()
    return list(await _while_a_create_waits(h, "call_1"))


async def resent_twice_at_once(h: Harness) -> list[Any]:
    await h.open()
    h.fail("create")
    first = await h.invoke("call_1")
    return [first, *await _while_a_create_waits(h, "call_1")]


async def resend_finds_its_record_moved_on(h: Harness) -> list[Any]:
    await h.open()
    h.boundary.store = _LostReply(h.inner, h.flavour == "async")
    first = await h.invoke("call_1")
    h.heal()
    return [first, await h.sweep(0), await h.invoke("call_1")]


async def token_reused(h: Harness) -> list[Any]:
    h.rebuild(token_factory=lambda: "one-token-for-every-call")
    await h.open()
    return [await h.invoke("call_1"), await h.invoke("call_1")]


async def sweep_and_progress_fail(h: Harness) -> list[Any]:
    await h.open()
    await h.invoke("call_1")
    h.fail("calls", "get_many", "get_progress", "completed")
    outcomes = []
    for step in (h.sweep(0), h.progress()):
        try:
            await step
        except StoreUnavailableError as exc:
            outcomes.append(exc.code)
    return outcomes


Scenario = Callable[[Harness], Coroutine[Any, Any, list[Any]]]

#: (scenario, tools (or factories of a tool given the harness), what it answers, every line it logs).
CATALOGUE: list[tuple[Scenario, list[Any], list[Any], list[Any]]] = [
    (
        preflight,
        [],
        [ErrorCode.INVALID_ARGUMENTS, ErrorCode.UNAUTHORIZED],
        [
            (BOUNDARY, INFO, "tool call rejected at preflight: INVALID_ARGUMENTS"),
            (BOUNDARY, INFO, "tool call rejected at preflight: UNAUTHORIZED"),
        ],
    ),
    (
        admission,
        [],
        [None, ErrorCode.TOOL_BUDGET_EXHAUSTED, ErrorCode.DUPLICATE_TOOL_CALL],
        [
            (BOUNDARY, INFO, "tool call refused at admission: TOOL_BUDGET_EXHAUSTED"),
            (BOUNDARY, INFO, "tool call refused at admission: DUPLICATE_TOOL_CALL"),
        ],
    ),
    (
        executor_timed_out,
        [tool(executor=_slow, timeout_ms=20)],
        [ErrorCode.EXECUTION_TIMEOUT],
        [
            # The pool is the process's: its counts include other tests' hung workers.
            (
                "invocation_store.workers",
                WARNING,
                re.compile(r"tool worker hung: [1-9]\d* hung now, [1-9]\d* since start"),
            ),
            (BOUNDARY, WARNING, "tool search executor timed out: EXECUTION_TIMEOUT"),
        ],
    ),
    (
        unserializable,
        [tool(executor=lambda arguments: object())],
        [ErrorCode.SERIALIZATION_FAILED],
        [(BOUNDARY, WARNING, "tool search executor returned an unserializable object: SERIALIZATION_FAILED")],
    ),
    (
        projector_returned_text,
        [tool(projector=lambda raw, arguments: "text")],
        [ErrorCode.PROJECTION_INVALID],
        [(BOUNDARY, WARNING, "tool search projector returned a str: PROJECTION_INVALID")],
    ),
    (
        complete_failed_then_swept,
        [],
        [ErrorCode.STORE_UNAVAILABLE, 1, 0],
        [
            (
                BOUNDARY,
                ERROR,
                "store complete failed with StoreUnavailableError(LeakyStoreError): STORE_UNAVAILABLE",
            ),
            (BOUNDARY, INFO, "swept 1 records: STALE_PROJECTION"),
        ],
    ),
    (
        clock_failed_before_create,
        [],
        [ErrorCode.STORE_UNAVAILABLE, None],
        [
            (
                BOUNDARY,
                ERROR,
                "store create failed with StoreUnavailableError(LeakyStoreError): STORE_UNAVAILABLE",
            )
        ],
    ),
    (
        store_names_its_own_code,
        [],
        [ErrorCode.DURABILITY_NOT_REACHED, ErrorCode.MISSING_TOOL_CALL_ID],
        [
            (
                BOUNDARY,
                ERROR,
                "store create failed with StoreUnavailableError(NotReplicated): DURABILITY_NOT_REACHED",
            ),
            (BOUNDARY, INFO, "tool call rejected at preflight: MISSING_TOOL_CALL_ID"),
        ],
    ),
    (
        store_failures_as_logged,
        [],
        [ErrorCode.STORE_UNAVAILABLE] * 3,
        [
            (BOUNDARY, ERROR, "store create failed with ThirdPartyUnavailable(Busy): STORE_UNAVAILABLE"),
            (
                BOUNDARY,
                ERROR,
                "store create failed with ThirdPartyUnavailable(UnprintableType): STORE_UNAVAILABLE",
            ),
            (
                BOUNDARY,
                ERROR,
                "store create failed with UnsafeServerError: maxmemory-policy allkeys-lru can evict the "
                "store's keys: STORE_UNAVAILABLE",
            ),
        ],
    ),
    (
        create_failed_then_sent_again,
        [],
        [ErrorCode.STORE_UNAVAILABLE, None],
        [
            (
                BOUNDARY,
                ERROR,
                "store create failed with StoreUnavailableError(LeakyStoreError): STORE_UNAVAILABLE",
            ),
            (BOUNDARY, INFO, "create of unknown outcome sent again with its invocation token"),
        ],
    ),
    (
        sweep_meets_a_corrupt_record,
        [],
        [None, 0],
        [
            (
                BOUNDARY,
                WARNING,
                "sweep of run run-1 left corrupt record call_9 as it is (NoTTL): STORE_UNAVAILABLE",
            )
        ],
    ),
    (
        swept_while_running,
        [_sweeping_tool],
        [ErrorCode.INVALID_TRANSITION],
        [
            (BOUNDARY, INFO, "swept 1 records: STALE_PROJECTION"),
            (BOUNDARY, WARNING, "tool search completion refused: INVALID_TRANSITION"),
        ],
    ),
    (
        held_completion_refused,
        [],
        [
            ErrorCode.STORE_UNAVAILABLE,
            1,
            {"call_1": (ErrorCode.INVALID_TRANSITION, "call_1", None)},
            {},
        ],
        [
            (
                BOUNDARY,
                ERROR,
                "store complete failed with StoreUnavailableError(LeakyStoreError): STORE_UNAVAILABLE",
            ),
            (BOUNDARY, INFO, "swept 1 records: STALE_PROJECTION"),
            (BOUNDARY, WARNING, "tool search completion refused: INVALID_TRANSITION"),
        ],
    ),
    (
        held_completion_still_failing,
        [],
        [ErrorCode.STORE_UNAVAILABLE, {"call_1": (ErrorCode.STORE_UNAVAILABLE, "call_1", None)}],
        [
            (
                BOUNDARY,
                ERROR,
                "store complete failed with StoreUnavailableError(LeakyStoreError): STORE_UNAVAILABLE",
            ),
            (
                BOUNDARY,
                ERROR,
                "store complete failed with StoreUnavailableError(LeakyStoreError): STORE_UNAVAILABLE",
            ),
        ],
    ),
    (
        projection_unreadable,
        [
            tool(
                projector=lambda raw, arguments: _Unreadable(
                    evidence_status=EvidenceStatus.EVIDENCE_FOUND, content="c", scope="s"
                )
            )
        ],
        [ErrorCode.PROJECTION_INVALID],
        [(BOUNDARY, WARNING, "tool search projection unreadable (RuntimeError): PROJECTION_INVALID")],
    ),
    (
        lost_create_reply_recognised,
        [],
        [ErrorCode.STORE_UNAVAILABLE, None],
        [
            (
                BOUNDARY,
                ERROR,
                "store create failed with StoreUnavailableError(LeakyStoreError): STORE_UNAVAILABLE",
            ),
            (BOUNDARY, INFO, "create of unknown outcome sent again with its invocation token"),
            (BOUNDARY, INFO, "create replayed by the store: recognised as this invocation"),
        ],
    ),
    (
        begun_while_the_clock_was_read,
        [],
        [None, ErrorCode.CALL_IN_PROGRESS],
        [(BOUNDARY, INFO, "create of this call already in flight: CALL_IN_PROGRESS")],
    ),
    (
        sent_twice_at_once,
        [],
        [None, ErrorCode.CALL_IN_PROGRESS],
        [(BOUNDARY, INFO, "create of this call already in flight: CALL_IN_PROGRESS")],
    ),
    (
        resent_twice_at_once,
        [],
        [ErrorCode.STORE_UNAVAILABLE, None, ErrorCode.STORE_UNAVAILABLE],
        [
            (
                BOUNDARY,
                ERROR,
                "store create failed with StoreUnavailableError(LeakyStoreError): STORE_UNAVAILABLE",
            ),
            (BOUNDARY, INFO, "create of unknown outcome sent again with its invocation token"),
            (BOUNDARY, INFO, "create of unknown outcome already being sent again: STORE_UNAVAILABLE"),
        ],
    ),
    (
        resend_finds_its_record_moved_on,
        [],
        [ErrorCode.STORE_UNAVAILABLE, 1, ErrorCode.STALE_PROJECTION],
        [
            (
                BOUNDARY,
                ERROR,
                "store create failed with StoreUnavailableError(LeakyStoreError): STORE_UNAVAILABLE",
            ),
            (BOUNDARY, INFO, "swept 1 records: STALE_PROJECTION"),
            (BOUNDARY, INFO, "create of unknown outcome sent again with its invocation token"),
            (BOUNDARY, WARNING, "create sent again found its record moved on: STALE_PROJECTION"),
        ],
    ),
    (
        token_reused,
        [],
        [None, ErrorCode.DUPLICATE_TOOL_CALL],
        [(BOUNDARY, WARNING, "invocation token reused: DUPLICATE_TOOL_CALL")],
    ),
    (
        sweep_and_progress_fail,
        [],
        [ErrorCode.STORE_UNAVAILABLE, ErrorCode.STORE_UNAVAILABLE],
        [
            (BOUNDARY, ERROR, "store sweep failed with StoreUnavailableError(LeakyStoreError)"),
            (BOUNDARY, ERROR, "store progress failed with StoreUnavailableError(LeakyStoreError)"),
        ],
    ),
]


@pytest.mark.parametrize("flavour", ["sync", "async"])
@pytest.mark.parametrize(
    ("scenario", "specs", "answers", "lines"), CATALOGUE, ids=[entry[0].__name__ for entry in CATALOGUE]
)
def test_each_event_logs_exactly_its_line(
    caplog: pytest.LogCaptureFixture,
    flavour: str,
    scenario: Scenario,
    specs: list[Any],
    answers: list[Any],
    lines: list[Any],
) -> None:
    """CIS-ERR-2: the answers, then every line logged under ``invocation_store``, exactly."""
    caplog.set_level(logging.DEBUG, logger="invocation_store")
    harness = Harness(flavour, *specs)
    assert asyncio.run(scenario(harness)) == answers
    # Every result names its call: an invoke's carries the envelope's id (as tool_call_id and
    # envelope_tool_call_id) and the registered tool's name (None for the one call to a tool that
    # is not registered); a held completion's, its id only.
    unregistered = {(preflight, "call_2")}
    for asked, envelope_id, tool_call_id, tool_name, echoed in harness.ids:
        if asked == "invoke":
            # an id that is not text (a provider's int) is neither kept nor echoed
            kept = envelope_id if type(envelope_id) is str else None
            assert (tool_call_id, echoed) == (kept, kept)
            assert tool_name == (None if (scenario, envelope_id) in unregistered else "search")
        else:
            assert (tool_call_id, tool_name, echoed) == (envelope_id, None, None)
    logged = [
        (record.name, record.levelno, record.getMessage())
        for record in caplog.records
        if record.name.startswith("invocation_store")
    ]
    # The boundary's own lines in order; a worker's line (another thread) anywhere among them.
    assert [line for line in logged if line[0] == BOUNDARY] == [line for line in lines if line[0] == BOUNDARY]
    others = [line for line in logged if line[0] != BOUNDARY]
    expected = [line for line in lines if line[0] != BOUNDARY]
    assert len(others) == len(expected), others
    for (name, level, message), (want_name, want_level, pattern) in zip(others, expected, strict=True):
        assert (name, level) == (want_name, want_level)
        assert pattern.fullmatch(message), message
    for _name, _level, message in logged:
        assert PASSWORD not in message
        assert SECRET_KEY not in message
        assert MARKER not in message
