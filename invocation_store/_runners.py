"""Where tool code runs: inline, or on persistent workers (CIS-PERF-1, CIS-FAIL-2, CIS-FAIL-3).

Theory of operation
-------------------
The boundary calls executors and projectors through this module only. Starting a
thread per call costs more than a whole in-memory invocation (about 60 us of a
90 us call on a two-core machine), so no call starts one in the steady state:

- **Inline** (:func:`call_inline`): a sync callable without a time limit runs in the
  calling thread. This is the sync boundary's path for tools declared with
  ``timeout_ms=None`` and for every projector (projectors have no time limit).
- **Persistent workers** (:class:`WorkerPool`, one per process: :data:`WORKERS`): a
  sync callable with a time limit is handed to an idle worker thread, which runs it
  in a copy of the caller's context variables and hands the outcome back through a
  lock (sync boundary, :func:`call_with_timeout`) or the caller's event loop
  (async boundary, :func:`acall`). When no worker is idle a new one is started, so a
  call never waits for another call: a hung tool holds only its own worker. A worker
  whose caller stopped waiting (the timeout passed, or the awaiting task was
  cancelled) is *hung*: it is counted (:attr:`PoolStats.hung`,
  :attr:`PoolStats.hung_total`, and a warning of logger ``invocation_store.workers``
  with the two counts), no longer belongs to the pool, and the next call
  that finds no idle worker starts its replacement. Python cannot kill a thread: a
  hung worker runs on until the tool returns by itself; its outcome is discarded and
  the worker then rejoins the pool (or ends, if the pool already keeps
  ``max_idle`` idle workers). Workers are daemon threads: they never delay
  interpreter exit nor the end of ``asyncio.run``. After ``os.fork`` the child starts
  with an empty pool.
- **Tasks** (:func:`acall`): a coroutine callable runs as a task of its own in the
  loop, awaited under its time limit (one waiter future, woken by the task's end or a
  timer: :func:`asyncio.wait` without its set bookkeeping); over it the task is
  cancelled but never awaited, so a tool that ignores cancellation cannot stretch
  the call. An abandoned task stays referenced until it ends; its outcome is then
  retrieved and discarded.

BaseException policy (the boundary's, CIS-FAIL-2): whatever tool code raises,
``SystemExit`` and ``KeyboardInterrupt`` included, is the tool's failure, reported
as its safe type name (:func:`type_name`, CIS-ERR-2), never re-raised. Inline,
a real Ctrl-C landing while the tool runs cannot be told from one it raised: it is
the tool's failure too.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
import os
import threading
from collections.abc import Callable
from typing import Final, NamedTuple

from attrs import frozen

from ._logs import package_logger
from .kernel import Projection

__all__ = [
    "WORKERS",
    "Outcome",
    "PoolStats",
    "WorkerPool",
    "acall",
    "call_inline",
    "call_with_timeout",
    "is_async_callable",
    "safe_name",
    "type_name",
]

_UNPRINTABLE_TYPE: Final = "UnprintableType"
#: Counts only, never tool names or payloads (CIS-ERR-2); records carry the call's ids (CIS-OBS-2).
_LOG: Final = package_logger("invocation_store.workers")


def safe_name(name: object) -> str:
    """``name`` if it is a short ASCII identifier (at most 64 characters), else
    ``UnprintableType``: a hostile class name could carry text into logs (CIS-ERR-2)."""
    if type(name) is str and len(name) <= 64 and name.isascii() and name.isidentifier():
        return name
    return _UNPRINTABLE_TYPE


def type_name(obj: object) -> str:
    """The safe name (:func:`safe_name`) of ``type(obj).__name__`` (CIS-ERR-2)."""
    return safe_name(type(obj).__name__)


class Outcome(NamedTuple):
    """What a guarded tool call produced: a ``value``, a ``failure`` (the safe type
    name of what it raised, for logs only), or ``timed_out`` (CIS-FAIL-2, CIS-FAIL-3).
    A named tuple: two are built per invocation, where a frozen attrs class costs
    several times more."""

    value: object = None
    failure: str | None = None
    timed_out: bool = False


class _ToolExit(Exception):  # noqa: N818 - carries a BaseException's type name, not an error of ours
    """Tool code's ``SystemExit``/``KeyboardInterrupt`` (any BaseException but an
    asyncio cancellation) inside a task, kept as that task's plain failure."""


def _failure_name(exc: BaseException) -> str:
    if isinstance(exc, _ToolExit) and exc.args:
        return safe_name(exc.args[0])
    return type_name(exc)


#: Return types that are never awaitable: no ``inspect.isawaitable`` call for them.
_PLAIN: Final = frozenset({str, bytes, int, float, bool, dict, list, tuple, type(None), Projection})


def _value(value: object) -> Outcome:
    """A sync callable's return value; an awaitable is a failure (nothing can await it)."""
    if type(value) in _PLAIN:
        return Outcome(value=value)
    if inspect.isawaitable(value):
        if inspect.iscoroutine(value):
            value.close()
        return Outcome(failure="AwaitableOnSyncBoundary")
    return Outcome(value=value)


def call_inline(fn: Callable[..., object], *args: object) -> Outcome:
    """Call ``fn(*args)`` in the calling thread; whatever it raises is its failure (CIS-BND-2)."""
    try:
        value = fn(*args)
    except BaseException as exc:  # noqa: BLE001 - every tool failure is a code
        return Outcome(failure=type_name(exc))
    return _value(value)


def is_async_callable(fn: object) -> bool:
    """True for coroutine functions, partials of them and objects with an async ``__call__``."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - looking for an async __call__, not callability
    return call is not None and not inspect.isfunction(fn) and inspect.iscoroutinefunction(call)


def _seconds(timeout_ms: int) -> float:
    """``timeout_ms`` in seconds, capped where thread waits would overflow."""
    return min(timeout_ms / 1000, threading.TIMEOUT_MAX)


# ---------------------------------------------------------------------------
# Persistent workers


@frozen(kw_only=True)
class PoolStats:
    """A snapshot of a :class:`WorkerPool` (counts of threads).

    ``idle``: workers waiting for a call; ``busy``: workers running a call someone
    waits for; ``hung``: workers still running a call nobody waits for any more
    (timed out or cancelled), no longer part of the pool; ``started``: worker threads
    started since the pool was created (or since ``fork``); ``hung_total``: calls
    abandoned so far, each of which cost the pool one worker, replaced on demand.
    """

    idle: int
    busy: int
    hung: int
    started: int
    hung_total: int


class _Job:
    """One call handed to a worker. ``notify`` is called by the worker when the call
    ends (unless abandoned); ``finished``/``abandoned`` change under the pool lock."""

    __slots__ = ("abandoned", "args", "context", "error", "finished", "fn", "notify", "value")

    def __init__(
        self, fn: Callable[..., object], args: tuple[object, ...], notify: Callable[[], object]
    ) -> None:
        self.fn = fn
        self.args = args
        self.context = contextvars.copy_context()
        self.notify = notify
        self.value: object = None
        self.error: str | None = None
        self.finished = False
        self.abandoned = False

    def outcome(self) -> Outcome:
        return Outcome(failure=self.error) if self.error is not None else _value(self.value)


class _Worker:
    """A daemon thread that runs one job after another; it waits on its own lock."""

    __slots__ = ("job", "pool", "wake")

    def __init__(self, pool: WorkerPool, job: _Job) -> None:
        self.pool = pool
        self.job: _Job | None = job
        self.wake = threading.Lock()
        self.wake.acquire()
        threading.Thread(target=self.run, name="invocation-store-tool", daemon=True).start()

    def run(self) -> None:
        pool = self.pool
        while True:
            job = self.job
            assert job is not None
            self.job = None
            try:
                job.value = job.context.run(job.fn, *job.args)
            except BaseException as exc:  # noqa: BLE001 - the tool's failure, never re-raised here
                job.error = type_name(exc)
            stay = pool.finished(self, job)
            if not job.abandoned:
                with contextlib.suppress(RuntimeError):  # an event loop closed meanwhile
                    job.notify()
            del job  # an idle worker keeps nothing of its last call (its raw response, say)
            if not stay:
                return
            self.wake.acquire()


class WorkerPool:
    """Persistent worker threads for sync tool calls with a time limit (CIS-PERF-1).

    At most ``max_idle`` idle workers are kept; a call that finds none idle starts a
    new worker, so calls never queue behind each other or behind a hung tool. See the
    module docstring for hung workers. Thread-safe; fork-safe (the child's pool
    starts empty). Raises ``ValueError`` for ``max_idle < 1``.
    """

    def __init__(self, max_idle: int = 32) -> None:
        if max_idle < 1:
            raise ValueError("max_idle must be at least 1")
        self.max_idle = max_idle
        self._reset()
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []
        self._busy = 0
        self._hung = 0
        self._started = 0
        self._hung_total = 0

    def stats(self) -> PoolStats:
        """A consistent snapshot of the pool's counts."""
        with self._lock:
            return PoolStats(
                idle=len(self._idle),
                busy=self._busy,
                hung=self._hung,
                started=self._started,
                hung_total=self._hung_total,
            )

    def submit(
        self, fn: Callable[..., object], args: tuple[object, ...], notify: Callable[[], object]
    ) -> _Job:
        """Hand ``fn(*args)`` to a worker; ``notify()`` runs in the worker when it ends."""
        job = _Job(fn, args, notify)
        with self._lock:
            self._busy += 1
            worker = self._idle.pop() if self._idle else None
            if worker is None:
                self._started += 1
        if worker is None:
            _Worker(self, job)
        else:
            worker.job = job
            worker.wake.release()
        return job

    def abandon(self, job: _Job) -> bool:
        """The caller stops waiting for ``job``: its worker is hung from now on.

        Returns False (nothing abandoned) if the job already finished.
        """
        with self._lock:
            if job.finished:
                return False
            job.abandoned = True
            self._busy -= 1
            self._hung += 1
            self._hung_total += 1
            hung, total = self._hung, self._hung_total
        _LOG.warning("tool worker hung: %d hung now, %d since start", hung, total)
        return True

    def call(self, fn: Callable[..., object], timeout_ms: int, *args: object) -> Outcome:
        """Run ``fn(*args)`` on a worker, waiting at most ``timeout_ms`` (CIS-FAIL-3).

        Over the limit the call is ``timed_out`` and its worker hung (see the module
        docstring); the tool sees the caller's context variables (CIS-BND-5). A
        ``KeyboardInterrupt`` delivered to the calling thread while it waits
        propagates (the worker is then hung too).
        """
        done = threading.Lock()
        done.acquire()
        job = self.submit(fn, args, done.release)
        try:
            if done.acquire(timeout=_seconds(timeout_ms)):
                return job.outcome()
        except BaseException:  # interrupted while waiting: nobody waits for the tool any more
            self.abandon(job)
            raise
        if self.abandon(job):
            return Outcome(timed_out=True)
        done.acquire()  # it finished at the last moment: the worker releases ``done`` right after
        return job.outcome()

    def finished(self, worker: _Worker, job: _Job) -> bool:
        """Called by ``worker`` when ``job`` ended: True if the worker stays in the pool."""
        with self._lock:
            job.finished = True
            if job.abandoned:
                self._hung -= 1
            else:
                self._busy -= 1
            if len(self._idle) >= self.max_idle:
                return False
            self._idle.append(worker)
            return True


#: The process's pool, shared by every boundary.
WORKERS: Final = WorkerPool()


def call_with_timeout(fn: Callable[..., object], timeout_ms: int, *args: object) -> Outcome:
    """``WORKERS.call(fn, timeout_ms, *args)``: see :meth:`WorkerPool.call` (CIS-FAIL-3)."""
    return WORKERS.call(fn, timeout_ms, *args)


# ---------------------------------------------------------------------------
# asyncio

#: Tool tasks abandoned after a timeout or a cancellation of their caller, kept
#: referenced until they end (the loop holds tasks only weakly).
_ABANDONED: Final[set[asyncio.Task[object]]] = set()


async def _on_worker(fn: Callable[..., object], args: tuple[object, ...]) -> object:
    """A sync callable on a persistent worker, awaited from the loop."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[None] = loop.create_future()

    def resolve() -> None:
        if not future.done():
            future.set_result(None)

    job = WORKERS.submit(fn, args, functools.partial(loop.call_soon_threadsafe, resolve))
    try:
        await future
    except asyncio.CancelledError:
        WORKERS.abandon(job)
        raise
    if job.error is not None:
        raise _ToolExit(job.error)
    return job.value


async def _settle(fn: Callable[..., object], args: tuple[object, ...]) -> object:
    """The tool call inside its own task: an async callable in the loop, a sync one on
    a persistent worker; an awaitable it returns is awaited. A non-cancellation
    BaseException becomes :class:`_ToolExit` so it stays this task's outcome instead
    of stopping the event loop."""
    try:
        value = fn(*args) if is_async_callable(fn) else await _on_worker(fn, args)
        if type(value) not in _PLAIN and inspect.isawaitable(value):
            value = await value
    except (Exception, asyncio.CancelledError):
        raise
    except BaseException as exc:  # noqa: BLE001 - SystemExit, KeyboardInterrupt: the tool's failure
        raise _ToolExit(type_name(exc)) from None
    return value


def _reap(task: asyncio.Task[object]) -> None:
    """Done callback of an abandoned task: drop it and retrieve (discard) its outcome."""
    _ABANDONED.discard(task)
    if not task.cancelled():
        task.exception()


def _abandon(task: asyncio.Task[object]) -> None:
    """Cancel ``task`` without awaiting it; keep it referenced until it ends."""
    task.cancel()
    if not task.done():
        _ABANDONED.add(task)
    task.add_done_callback(_reap)


async def acall(fn: Callable[..., object], timeout_ms: int | None, *args: object) -> Outcome:
    """Run a tool call in a task of its own, waiting at most ``timeout_ms`` (CIS-FAIL-3).

    Over the timeout the task is cancelled and abandoned, never awaited: a tool that
    ignores cancellation cannot stretch the call (``timed_out``), and a sync tool's
    worker is counted hung. A CancelledError the tool raises while the awaiting task
    is not being cancelled is a failure like any other (CIS-FAIL-2); a real
    cancellation of the awaiting task cancels the tool's task and propagates.
    """
    loop = asyncio.get_running_loop()
    task: asyncio.Task[object] = loop.create_task(_settle(fn, args))
    # asyncio.wait((task,), timeout=...) without its set bookkeeping: one waiter,
    # woken by the task's end or by the timer, whichever comes first.
    waiter: asyncio.Future[None] = loop.create_future()

    def wake(_: object = None) -> None:
        if not waiter.done():
            waiter.set_result(None)

    task.add_done_callback(wake)
    timer = None if timeout_ms is None else loop.call_later(_seconds(timeout_ms), wake)
    try:
        await waiter
    except BaseException:  # the caller is cancelled: so is the tool, unawaited
        task.remove_done_callback(wake)
        _abandon(task)
        raise
    finally:
        if timer is not None:
            timer.cancel()
    if not task.done():
        task.remove_done_callback(wake)
        _abandon(task)
        return Outcome(timed_out=True)
    if task.cancelled():
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise asyncio.CancelledError
        return Outcome(failure="CancelledError")
    exc = task.exception()
    if exc is not None:
        return Outcome(failure=_failure_name(exc))
    return Outcome(value=task.result())
