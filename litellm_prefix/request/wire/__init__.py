"""Adapters between request shapes and the neutral ``View``.

``read(data)`` builds a ``View``; ``write(data, view)`` returns the top-level fields
to replace in ``data`` so that it carries ``view``. Adapters copy on write: an
unchanged message, part or tool is the client's own object, never a copy, and the
request dict itself (which holds a logging object and secrets) is never copied.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ..view import View
from . import anthropic, chat, gemini, responses

if TYPE_CHECKING:
    from ..target import Target


class Wire(Protocol):
    """What each adapter module (``chat``, ``anthropic``, ``responses``, ``gemini``) offers."""

    name: str

    def matches(self, data: Mapping[str, Any]) -> bool: ...

    def read(self, data: Mapping[str, Any]) -> View: ...

    def write(self, data: Mapping[str, Any], view: View) -> dict[str, Any]: ...


_BY_CALL_TYPE = {
    "anthropic_messages": anthropic,
    "aresponses": responses,
    "responses": responses,
    "acompletion": chat,
    "completion": chat,
    # Gemini's native routes (the proxy's /v1beta/models/{model}:generateContent and
    # :streamGenerateContent, litellm.agenerate_content and its kin): both hooks see the client's
    # ``contents`` under these call types.
    "agenerate_content": gemini,
    "agenerate_content_stream": gemini,
    "generate_content": gemini,
    "generate_content_stream": gemini,
}


def wire_for(data: Mapping[str, Any], call_type: Any = None, target: Target | None = None) -> Wire | None:
    """The adapter for this request, or ``None`` when it is not a shape we rewrite.

    With a call type, only that type's adapter (embeddings, images, pass-through routes:
    none); without one (direct use), the shape is recognised from the fields.

    A Gemini route's request is taken only where ``target`` receives it in Gemini's shape
    (``Target.receives_gemini_shape``). To any other deployment LiteLLM turns it into a chat
    completion of its own (another call id), whose deployment hook sees the chat messages and
    stabilizes them: taking the Gemini shape too would run the rules on the request twice. Without
    a target (the affinity key of a request the transform did not take) it is not taken either.
    """
    if call_type:
        adapter = _BY_CALL_TYPE.get(str(getattr(call_type, "value", call_type)))
        if adapter is gemini and (target is None or not target.receives_gemini_shape):
            return None
        return adapter if adapter is not None and adapter.matches(data) else None
    for adapter in (chat, responses, anthropic, gemini):
        if adapter.matches(data):
            return adapter
    return None
