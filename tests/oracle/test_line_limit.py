"""check-trace refuses an over-long line without holding it whole (CIS-ORC-2, issue 13)."""

from __future__ import annotations

import io

import pytest

from invocation_store._cli.check_trace import _CHUNK, _lines
from invocation_store.oracle import check_lines
from invocation_store.oracle._checker import OVERLONG

from ._traces import EXAMPLE


class _CountingStream(io.RawIOBase):
    """An endless line of ``x`` (or ``data`` first), recording how much was read."""

    def __init__(self, data: bytes = b"", endless: bool = True) -> None:
        self.data = data
        self.endless = endless
        self.position = 0
        self.read_total = 0

    def readline(self, size: int | None = -1) -> bytes:  # type: ignore[override]
        assert size is not None
        assert 0 < size <= _CHUNK
        if self.position < len(self.data):
            end = self.data.find(b"\n", self.position, self.position + size)
            stop = min(len(self.data), self.position + size) if end < 0 else end + 1
            piece = self.data[self.position : stop]
            self.position = stop
        elif self.endless:
            piece = b"x" * size
        else:
            piece = b""
        self.read_total += len(piece)
        return piece


@pytest.mark.parametrize("limit", [10, _CHUNK - 1, _CHUNK, _CHUNK + 1, 3 * _CHUNK + 7])
def test_an_endless_line_is_refused_after_limit_plus_one_bytes(limit: int) -> None:
    """CIS-ORC-2: a line that never ends is refused after reading limit + 1 bytes, in pieces of at
    most 1 MiB, whatever its length."""
    stream = _CountingStream()
    lines = _lines(stream, limit)  # type: ignore[arg-type]
    assert next(lines) is OVERLONG
    assert stream.read_total == limit + 1


@pytest.mark.parametrize("length", [1, 9, 10, _CHUNK - 1, _CHUNK, _CHUNK + 1, 2 * _CHUNK + 5])
def test_lines_up_to_the_limit_are_whole(length: int) -> None:
    """CIS-ORC-2: a line of exactly the limit (newline included) and everything shorter come back
    whole, over several pieces if needed; one byte more is refused."""
    line = b"y" * (length - 1) + b"\n"
    data = line + b"z\n"
    assert list(_lines(_CountingStream(data, endless=False), length)) == [line, b"z\n"]  # type: ignore[arg-type]
    assert next(_lines(_CountingStream(data, endless=False), length - 1)) in (OVERLONG, line)  # type: ignore[arg-type]
    if length - 1 >= _CHUNK:
        assert next(_lines(_CountingStream(data, endless=False), length - 1)) is OVERLONG  # type: ignore[arg-type]


def test_an_overlong_line_is_malformed_at_its_line() -> None:
    """CIS-ORC-2: check_lines reports the refused line as malformed, with its number."""
    header = EXAMPLE.read_bytes().splitlines(keepends=True)[0]
    report = check_lines([header, OVERLONG], max_line_bytes=len(header))
    assert report.exit_code == 2
    assert report.malformed is not None
    assert (report.malformed.line, report.malformed.reason) == (2, f"longer than {len(header)} bytes")
