"""The one shared helper for what a store's reads return (CIS-TTL-4, CIS-PROG-5, CIS-STORE-6).

A store fetches what it holds (rows, hashes, dictionary entries) and hands the
decoded records here, with the clock reading of the same operation; what comes back
is what the Protocol's reads answer. The rules are the kernel's: liveness is
``live``, raw omission is ``without_raw``, the progress view is
``ProgressView.of``. No store restates them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..kernel import CanonicalRecord, ProgressView, is_safe_id, live, without_raw

__all__ = ["read_records", "read_views", "wanted_ids"]


def wanted_ids(tool_call_ids: Sequence[str]) -> list[str]:
    """The distinct safe ids of ``tool_call_ids``, first-seen order: the ones worth reading (CIS-ID-3)."""
    return [tcid for tcid in dict.fromkeys(tool_call_ids) if isinstance(tcid, str) and is_safe_id(tcid)]


def read_records(
    run_id: str,
    tool_call_ids: Sequence[str],
    found: Mapping[str, CanonicalRecord | None],
    now_ms: int,
    *,
    include_raw: bool = True,
) -> dict[str, CanonicalRecord | None]:
    """What ``get_many(run_id, tool_call_ids, include_raw=...)`` answers, given the records ``found``.

    One entry per distinct id of ``tool_call_ids``: the record if ``found`` holds a
    record of exactly this run and id that is live at ``now_ms`` (integer ms, the
    operation's one clock reading), else None. ``include_raw=False`` applies kernel
    ``without_raw``. A record under the wrong identity is never served: it raises
    ``ValueError`` (a store maps it to its integrity failure, CIS-STORE-6).
    """
    answer: dict[str, CanonicalRecord | None] = {}
    for tcid in dict.fromkeys(tool_call_ids):
        record = live(found.get(tcid), now_ms)
        if record is not None and (record.run_id, record.tool_call_id) != (run_id, tcid):
            raise ValueError("a stored record answers another identity")
        if record is not None and not include_raw:
            record = without_raw(record)
        answer[tcid] = record
    return answer


def read_views(
    run_id: str,
    tool_call_ids: Sequence[str],
    found: Mapping[str, CanonicalRecord | None],
    now_ms: int,
) -> dict[str, ProgressView | None]:
    """What ``get_progress(run_id, tool_call_ids)`` answers: kernel ``ProgressView.of`` of each live one."""
    records = read_records(run_id, tool_call_ids, found, now_ms, include_raw=False)
    return {tcid: None if record is None else ProgressView.of(record) for tcid, record in records.items()}
