"""What the agent sees of one tool call: the kernel's agent view, plus the provider's ids.

:class:`BoundaryResult` is the kernel's :class:`~invocation_store.kernel.AgentView`
(the agent-facing fields and their rules live there: kernel ``agent_view`` for a
terminal record, ``failure_view`` for a code) extended by two fields the tool-result
message to the provider needs (CIS-ECO-3). :func:`result_of` and :func:`failure` are
the only ways the boundary builds one.
"""

from __future__ import annotations

from typing import Final

import attrs
from attrs import field, frozen

from ..kernel import AgentView, ErrorCode, failure_view

__all__ = ["BoundaryResult", "failure", "result_of"]


@frozen(kw_only=True)
class BoundaryResult(AgentView):
    """What the agent sees of one tool call (CIS-BND-4, CIS-ERR-1).

    Success (the record is READY): ``ok`` True, ``evidence_status``
    EVIDENCE_FOUND or NO_EVIDENCE, ``content`` the bounded agent result, ``scope``
    what the tool covered, ``negative`` True for NO_EVIDENCE (a scoped negative
    observation, never upgraded or retried, CIS-EVID-3, CIS-EVID-4).

    Failure (rejected, or the record is ERROR): ``ok`` False, ``code`` from
    :class:`~invocation_store.kernel.ErrorCode`, ``message`` its fixed text from
    ``ERROR_MESSAGES``. ``tool_call_id`` is echoed only when it is a safe id (else
    None). Never raw data, request text, keys, credentials or exception text. These
    fields are the kernel's :class:`~invocation_store.kernel.AgentView`.

    For the tool-result message to the provider (CIS-ECO-3), not for the agent:
    ``tool_name`` is the registered tool's name (None when the registry does not
    know the envelope's name: model text is not echoed) and
    ``envelope_tool_call_id`` the envelope's original tool_call_id, exactly as
    supplied (even when unsafe: the provider needs its own id back; it is never
    stored, logged or shown by ``repr``). Both are None on results not made by
    ``invoke``; neither is in :meth:`as_dict` nor in equality (two results are equal
    when the agent sees the same).
    """

    tool_name: str | None = field(default=None, eq=False)
    envelope_tool_call_id: str | None = field(default=None, repr=False, eq=False)

    def as_dict(self) -> dict[str, object]:
        """JSON-ready agent view: ``{"ok", "tool_call_id", ...}`` without empty fields."""
        if self.ok:
            return {
                "ok": True,
                "tool_call_id": self.tool_call_id,
                "evidence_status": None if self.evidence_status is None else self.evidence_status.value,
                "negative": self.negative,
                "content": self.content,
                "scope": self.scope,
            }
        return {
            "ok": False,
            "tool_call_id": self.tool_call_id,
            "code": None if self.code is None else self.code.value,
            "message": self.message,
        }


#: The agent view's fields, in order: every one is carried into a BoundaryResult.
_VIEW_FIELDS: Final = tuple(attribute.name for attribute in attrs.fields(AgentView))


def result_of(
    view: AgentView, *, tool_name: str | None = None, envelope_tool_call_id: str | None = None
) -> BoundaryResult:
    """The :class:`BoundaryResult` holding the kernel's ``view`` and the provider's ids (CIS-ECO-3).

    Every field of the view is carried (a field a later kernel adds included);
    ``tool_name`` and ``envelope_tool_call_id`` are what ``invoke`` knows of the call
    (None on results made elsewhere).
    """
    fields = {name: getattr(view, name) for name in _VIEW_FIELDS}
    return BoundaryResult(**fields, tool_name=tool_name, envelope_tool_call_id=envelope_tool_call_id)


def failure(
    code: ErrorCode,
    tool_call_id: object,
    *,
    tool_name: str | None = None,
    envelope_tool_call_id: str | None = None,
) -> BoundaryResult:
    """The result of a refused or failed call: kernel ``failure_view`` (the id only if safe), provider ids."""
    return result_of(
        failure_view(code, tool_call_id), tool_name=tool_name, envelope_tool_call_id=envelope_tool_call_id
    )
