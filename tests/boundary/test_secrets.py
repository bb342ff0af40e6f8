"""No secret, payload, key or traceback ever reaches the agent, the caller or a log.

Every failure path runs with a raw response (and request) holding a marker string,
and with store errors whose text holds a Redis URL with a password and a Redis key,
as a careless driver's would. Then every BoundaryResult (repr and every field),
every exception message reaching the caller, every log record (captured at
DEBUG, with its ``run_id``/``tool_call_id`` extras) and every OpenTelemetry span
(name, attributes, status, events; CIS-OBS-3) is searched for the marker, the
password, the URL, key-looking text (``:{``) and ``Traceback``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from attrs import evolve
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.retry import Retry

from invocation_store import (
    AsyncToolBoundary,
    BoundaryResult,
    ErrorCode,
    EvidenceStatus,
    Limits,
    Projection,
    RunContext,
    RunStatus,
    StoreUnavailableError,
    ToolBoundary,
    ToolRegistry,
    ToolSpec,
)
from invocation_store.adapters.redis import AsyncRedisStore, RedisStore
from invocation_store.testing import FakeClock

from ._fakes import (
    MARKER,
    OTHER_RUN,
    PASSWORD,
    RUN,
    SECRET_KEY,
    SECRET_URL,
    FailingStore,
    FakeExecutor,
    FakeProjector,
    LeakyStoreError,
    envelope,
)
from ._otel import recording

FORBIDDEN = (MARKER, PASSWORD, SECRET_URL, SECRET_KEY, ":{", "Traceback", "hunter2")
LIMITS = Limits(raw_bytes=200, agent_result_bytes=64, request_bytes=512)


class Unserializable:
    def __repr__(self) -> str:
        return f"<Unserializable {MARKER} {SECRET_URL}>"


def leaky(message: str = "") -> Exception:
    """An executor/projector error whose text holds everything that must never leak."""
    return RuntimeError(f"{message} {MARKER} {SECRET_URL} {SECRET_KEY}")


def registry() -> ToolRegistry:
    """One tool per failure path; each name says what goes wrong."""
    raw = json.dumps({"secret": MARKER, "dsn": SECRET_URL})
    big_raw = MARKER * 50
    return ToolRegistry(
        [
            ToolSpec(name="ok", executor=FakeExecutor(raw), projector=FakeProjector()),
            ToolSpec(name="exec_raises", executor=FakeExecutor(raises=leaky()), projector=FakeProjector()),
            ToolSpec(
                name="exec_slow", executor=FakeExecutor(block=True), projector=FakeProjector(), timeout_ms=30
            ),
            ToolSpec(
                name="unserializable", executor=FakeExecutor(Unserializable()), projector=FakeProjector()
            ),
            ToolSpec(name="raw_too_large", executor=FakeExecutor(big_raw), projector=FakeProjector()),
            ToolSpec(name="proj_raises", executor=FakeExecutor(raw), projector=FakeProjector(raises=leaky())),
            ToolSpec(
                name="proj_invalid",
                executor=FakeExecutor(raw),
                projector=FakeProjector(Projection(evidence_status=MARKER, content=MARKER, scope=SECRET_URL)),
            ),
            ToolSpec(
                name="proj_not_projection",
                executor=FakeExecutor(raw),
                projector=FakeProjector({"content": MARKER}),
            ),
            ToolSpec(
                name="proj_too_large",
                executor=FakeExecutor(raw),
                projector=FakeProjector(
                    Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content=MARKER * 9, scope="s")
                ),
            ),
            ToolSpec(
                name="unauthorized", executor=FakeExecutor(raw), projector=FakeProjector(), authorized=False
            ),
            ToolSpec(name="writable", executor=FakeExecutor(raw), projector=FakeProjector(), read_only=False),
        ]
    )


ARGS = json.dumps({"q": MARKER, "dsn": SECRET_URL})

#: (tool_call_id, tool_name, arguments, run_id) of each call; all fail somewhere.
CALLS: list[tuple[Any, Any, Any, str]] = [
    (None, "ok", ARGS, RUN),
    (f"call_{{{MARKER}", "ok", ARGS, RUN),  # unsafe id holding the marker: never echoed
    (f" {SECRET_KEY}", "ok", ARGS, RUN),
    ("c_mismatch", "ok", ARGS, OTHER_RUN),
    ("c_badjson", "ok", f'{{"q":"{MARKER}",', RUN),
    ("c_dupkey", "ok", f'{{"q":"{MARKER}","q":"{SECRET_URL}"}}', RUN),
    ("c_toolarge", "ok", json.dumps({"q": MARKER * 40}), RUN),
    ("c_unknown", MARKER, ARGS, RUN),
    ("c_unauth", "unauthorized", ARGS, RUN),
    ("c_writable", "writable", ARGS, RUN),
    ("c_exec", "exec_raises", ARGS, RUN),
    ("c_slow", "exec_slow", ARGS, RUN),
    ("c_unser", "unserializable", ARGS, RUN),
    ("c_rawbig", "raw_too_large", ARGS, RUN),
    ("c_projraise", "proj_raises", ARGS, RUN),
    ("c_projinvalid", "proj_invalid", ARGS, RUN),
    ("c_projnotproj", "proj_not_projection", ARGS, RUN),
    ("c_projbig", "proj_too_large", ARGS, RUN),
    ("c_ok", "ok", ARGS, RUN),
    ("c_ok", "ok", ARGS, RUN),  # duplicate
]


def texts_of_result(result: BoundaryResult) -> Iterator[str]:
    yield repr(result)
    yield json.dumps(result.as_dict())
    for name in ("tool_call_id", "code", "message", "evidence_status", "content", "scope"):
        yield str(getattr(result, name))


def texts_of_exception(exc: BaseException) -> Iterator[str]:
    yield str(exc)
    yield repr(exc)
    yield str(exc.args)
    # The chain a caller would print: the original, leaky exception is not part of it.
    yield "".join(traceback.format_exception(exc)).replace("Traceback", "")


def texts_of_spans(spans: Any) -> Iterator[str]:
    """Everything an exported span holds: name, attribute names and values, status, events."""
    finished = spans.get_finished_spans()
    assert finished, "every invoke is a span"
    for span in finished:
        yield span.name
        yield repr(dict(span.attributes or {}))
        yield str(span.status.description)
        for event in span.events:
            yield event.name
            yield repr(dict(event.attributes or {}))


def assert_clean(texts: list[str], caplog: pytest.LogCaptureFixture) -> None:
    for text in texts:
        for forbidden in FORBIDDEN:
            assert forbidden not in text, (forbidden, text[:300])
    assert caplog.records, "the failure paths log"
    for record in caplog.records:
        message = record.getMessage()
        ids = f"{record.__dict__.get('run_id')} {record.__dict__.get('tool_call_id')}"
        for forbidden in FORBIDDEN:
            assert forbidden not in message, (forbidden, message)
            assert forbidden not in ids, (forbidden, ids)
        assert record.exc_info is None
        assert record.exc_text is None
        assert record.stack_info is None


def release_slow(boundary: Any) -> None:
    executor = boundary.registry.get("exec_slow").executor
    executor.release.set()


def run_sync_paths(store: Any, clock: FakeClock) -> list[str]:
    """Every failure path of the sync boundary; returns every text that reached the caller."""
    texts: list[str] = []
    boundary = ToolBoundary(store, registry(), limits=LIMITS)
    context = boundary.open_run(
        RUN, deadline_ms=clock.now + 60_000, ttl_ms=600_000, tool_call_budget=30, byte_budget=1 << 20
    )
    assert isinstance(context, RunContext)
    try:
        results = [
            boundary.invoke(context, envelope(i, tool_name=t, arguments=a, run_id=r)) for i, t, a, r in CALLS
        ]
    finally:
        release_slow(boundary)
    codes = [r.code for r in results]
    assert codes[:-2] == [
        ErrorCode.MISSING_TOOL_CALL_ID,
        ErrorCode.UNSAFE_TOOL_CALL_ID,
        ErrorCode.UNSAFE_TOOL_CALL_ID,
        ErrorCode.RUN_MISMATCH,
        ErrorCode.INVALID_ARGUMENTS,
        ErrorCode.INVALID_ARGUMENTS,
        ErrorCode.REQUEST_TOO_LARGE,
        ErrorCode.UNAUTHORIZED,
        ErrorCode.UNAUTHORIZED,
        ErrorCode.NOT_READ_ONLY,
        ErrorCode.EXECUTION_FAILED,
        ErrorCode.EXECUTION_TIMEOUT,
        ErrorCode.SERIALIZATION_FAILED,
        ErrorCode.RESULT_TOO_LARGE,
        ErrorCode.PROJECTION_FAILED,
        ErrorCode.PROJECTION_INVALID,
        ErrorCode.PROJECTION_INVALID,
        ErrorCode.RESULT_TOO_LARGE,
    ]
    assert results[-2].ok
    assert codes[-1] is ErrorCode.DUPLICATE_TOOL_CALL
    for result in results:
        if not result.ok:
            texts.extend(texts_of_result(result))

    # Store failures, on each operation, with leaky exception text.
    for fail_on in ("create", "complete", "now_ms"):
        failing = ToolBoundary(FailingStore(store, [fail_on]), registry(), limits=LIMITS)
        result = failing.invoke(context, envelope(f"c_store_{fail_on}", tool_name="ok", arguments=ARGS))
        assert result.code is ErrorCode.STORE_UNAVAILABLE
        texts.extend(texts_of_result(result))
    reads = ("completed", "get_many", "get_progress", "get", "calls", "open_run", "cancel_run", "close_run")
    failing = ToolBoundary(FailingStore(store, reads), registry(), limits=LIMITS)
    for call in (
        lambda: failing.project_progress(context),
        lambda: failing.cite(context, "c_ok"),
        lambda: failing.sweep_stale(context, 0),
    ):
        with pytest.raises(StoreUnavailableError) as info:
            call()
        texts.extend(texts_of_exception(info.value))
    params = {"deadline_ms": clock.now + 1, "ttl_ms": 1, "tool_call_budget": 0, "byte_budget": 0}
    assert failing.open_run("run-x", **params) is ErrorCode.STORE_UNAVAILABLE
    assert failing.cancel_run(context) is ErrorCode.STORE_UNAVAILABLE
    assert failing.close_run(context) is ErrorCode.STORE_UNAVAILABLE

    # Admission refusals, then progress and citations of everything above.
    live = store.get_run(context.run_id)
    assert live is not None
    assert boundary.close_run(context) == evolve(live, status=RunStatus.CLOSED)
    closed = boundary.invoke(context, envelope("c_closed", tool_name="ok", arguments=ARGS))
    assert closed.code is ErrorCode.RUN_INACTIVE
    texts.extend(texts_of_result(closed))
    report = boundary.project_progress(context)
    assert [f.tool_call_id for f in report.facts] == ["c_ok"]
    texts.append(repr(report))
    for tool_call_id in ("c_exec", "c_projraise", "c_rawbig", "c_slow", "x*y"):
        citation = boundary.cite(context, tool_call_id)
        assert citation.kind.value == "NOT_REFERENCABLE"
        texts.append(repr(citation))
    return texts


def test_no_secret_reaches_agent_caller_or_log(
    make_store: Any, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """CIS-ERR-1, CIS-ERR-2, CIS-FAIL-5, CIS-BND-4, CIS-REC-3, CIS-PRE-4, CIS-OBS-3: sync paths are clean."""
    caplog.set_level(logging.DEBUG)
    with recording() as spans:
        texts = run_sync_paths(make_store(clock), clock)
    texts.extend(texts_of_spans(spans))
    assert_clean(texts, caplog)


def test_no_secret_reaches_agent_caller_or_log_async(
    make_async_store: Any, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """CIS-ERR-1, CIS-ERR-2, CIS-FAIL-5, CIS-BND-4: the async boundary's failure paths are clean too."""
    caplog.set_level(logging.DEBUG)
    texts: list[str] = []

    async def main() -> None:
        store = make_async_store(clock)
        try:
            boundary = AsyncToolBoundary(store, registry(), limits=LIMITS)
            context = await boundary.open_run(
                RUN, deadline_ms=clock.now + 60_000, ttl_ms=600_000, tool_call_budget=30, byte_budget=1 << 20
            )
            assert isinstance(context, RunContext)
            try:
                for i, t, a, r in CALLS:
                    result = await boundary.invoke(context, envelope(i, tool_name=t, arguments=a, run_id=r))
                    if not result.ok:
                        texts.extend(texts_of_result(result))
            finally:
                release_slow(boundary)
            for fail_on in ("create", "complete"):
                failing = AsyncToolBoundary(FailingStore(store, [fail_on], is_async=True), registry())
                result = await failing.invoke(
                    context, envelope(f"c_s_{fail_on}", tool_name="ok", arguments=ARGS)
                )
                assert result.code is ErrorCode.STORE_UNAVAILABLE
                texts.extend(texts_of_result(result))
            failing = AsyncToolBoundary(
                FailingStore(store, ["completed", "get", "calls"], is_async=True), registry()
            )
            for make_call in (
                lambda: failing.project_progress(context),
                lambda: failing.cite(context, "c_ok"),
                lambda: failing.sweep_stale(context, 0),
            ):
                with pytest.raises(StoreUnavailableError) as info:
                    await make_call()
                texts.extend(texts_of_exception(info.value))
        finally:
            await store.close()

    with recording() as spans:
        asyncio.run(main())
    texts.extend(texts_of_spans(spans))
    assert_clean(texts, caplog)


# ---------------------------------------------------------------------------
# A real RedisStore pointed at a URL with a password, on a port nobody listens on


def closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def unreachable_url() -> str:
    return f"redis://default:{PASSWORD}@127.0.0.1:{closed_port()}/0"


def check_unreachable(
    results: list[BoundaryResult], errors: list[BaseException], url: str, caplog: pytest.LogCaptureFixture
) -> None:
    texts = [text for result in results for text in texts_of_result(result)]
    texts += [text for exc in errors for text in texts_of_exception(exc)]
    for text in texts:
        assert url not in text
    assert_clean(texts, caplog)


def test_unreachable_redis_with_a_password_leaks_nothing(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """CIS-FAIL-5, CIS-ERR-1, CIS-ERR-2: a real RedisStore that cannot connect: codes only, nothing leaked."""
    caplog.set_level(logging.DEBUG)
    url = unreachable_url()
    store = RedisStore.from_url(url, clock=clock, socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0))
    executor = FakeExecutor()
    boundary = ToolBoundary(
        store, ToolRegistry([ToolSpec(name="ok", executor=executor, projector=FakeProjector())])
    )
    try:
        params = {
            "deadline_ms": clock.now + 1_000,
            "ttl_ms": 1_000,
            "tool_call_budget": 1,
            "byte_budget": 100,
        }
        assert boundary.open_run(RUN, **params) is ErrorCode.STORE_UNAVAILABLE
        context = RunContext(run_id=RUN)
        results = [boundary.invoke(context, envelope("c_1", tool_name="ok", arguments=ARGS))]
        assert results[0].code is ErrorCode.STORE_UNAVAILABLE
        assert executor.calls == []
        errors: list[BaseException] = []
        calls: list[Callable[[], object]] = [
            lambda: boundary.project_progress(context),
            lambda: boundary.cite(context, "c_1"),
            lambda: boundary.sweep_stale(context, 0),
        ]
        for call in calls:
            with pytest.raises(StoreUnavailableError) as info:
                call()
            errors.append(info.value)
    finally:
        store.close()
    check_unreachable(results, errors, url, caplog)


def test_unreachable_async_redis_with_a_password_leaks_nothing(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """CIS-FAIL-5, CIS-ERR-1, CIS-ERR-2: the same through AsyncRedisStore and the async boundary."""
    caplog.set_level(logging.DEBUG)
    url = unreachable_url()
    results: list[BoundaryResult] = []
    errors: list[BaseException] = []

    async def main() -> None:
        store = AsyncRedisStore.from_url(
            url, clock=clock, socket_connect_timeout=0.2, retry=AsyncRetry(NoBackoff(), 0)
        )
        boundary = AsyncToolBoundary(
            store, ToolRegistry([ToolSpec(name="ok", executor=FakeExecutor(), projector=FakeProjector())])
        )
        try:
            params = {
                "deadline_ms": clock.now + 1_000,
                "ttl_ms": 1_000,
                "tool_call_budget": 1,
                "byte_budget": 100,
            }
            assert await boundary.open_run(RUN, **params) is ErrorCode.STORE_UNAVAILABLE
            context = RunContext(run_id=RUN)
            results.append(await boundary.invoke(context, envelope("c_1", tool_name="ok", arguments=ARGS)))
            assert results[0].code is ErrorCode.STORE_UNAVAILABLE
            for make_call in (
                lambda: boundary.project_progress(context),
                lambda: boundary.cite(context, "c_1"),
                lambda: boundary.sweep_stale(context, 0),
            ):
                with pytest.raises(StoreUnavailableError) as info:
                    await make_call()
                errors.append(info.value)
        finally:
            await store.close()

    asyncio.run(main())
    check_unreachable(results, errors, url, caplog)


def test_leaky_store_error_really_is_leaky() -> None:
    """CIS-ERR-1: the fake failure used above does carry every secret (so the checks can fail)."""
    text = str(LeakyStoreError())
    assert all(secret in text for secret in (MARKER, PASSWORD, SECRET_KEY, ":{"))
