"""Adapters between request shapes and the neutral ``View``.

``read(data)`` builds a ``View``; ``write(data, view)`` returns the top-level fields
to replace in ``data`` so that it carries ``view``. Adapters copy on write: an
unchanged message, part or tool is the client's own object, never a copy, and the
request dict itself (which holds a logging object and secrets) is never copied.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ..view import View
from . import anthropic, chat, responses


class Wire(Protocol):
    """What each adapter module (``chat``, ``anthropic``, ``responses``) offers."""

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
}


def wire_for(data: Mapping[str, Any], call_type: Any = None) -> Wire | None:
    """The adapter for this request, or ``None`` when it is not a shape we rewrite.

    With a call type, only that type's adapter (embeddings, images, pass-through routes:
    none); without one (direct use), the shape is recognised from the fields.
    """
    if call_type:
        adapter = _BY_CALL_TYPE.get(str(getattr(call_type, "value", call_type)))
        return adapter if adapter is not None and adapter.matches(data) else None
    for adapter in (chat, responses, anthropic):
        if adapter.matches(data):
            return adapter
    return None
