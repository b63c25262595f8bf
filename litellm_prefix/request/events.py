"""What a rule did or saw: ``Event`` and the typed payloads that code besides the rule reads (the
pipeline's result, the sinks, the shell). Plain data, no imports from the package: the rules write
them, measurement and the shell read them."""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

_P = TypeVar("_P")


@dataclass(frozen=True)
class Event:
    """Something a rule did or saw: ``kind`` names it, ``data`` holds hashes, offsets, counts and names only.

    ``data`` is a plain dict where only the JSONL log reads it (a rule's report of what it did),
    and a typed payload (below) where other code reads it: the pipeline's result, the sinks,
    the shell. ``record()`` is the same mapping either way, as the log writes it."""

    kind: str
    data: Any = field(default_factory=dict)

    def record(self) -> Mapping[str, Any]:
        data = self.data
        return data if isinstance(data, Mapping) else data.record()


def payload(events: Iterable[Event], cls: type[_P]) -> _P | None:
    """The first event payload of type ``cls``, if any."""
    return next((e.data for e in events if type(e.data) is cls), None)


class _Payload:
    """An event payload that code besides its rule reads; its ``record()`` is what the log writes."""

    __slots__ = ()

    def record(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class HeadSeen(_Payload):
    """``head``: the fingerprint of the head sent (the proxy's response header)."""

    fingerprint: str


@dataclass(frozen=True, slots=True)
class TextsToKeep(_Payload):
    """``texts``: section and tools texts by content hash that the store must keep."""

    texts: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class TextsNeeded(_Payload):
    """``need_texts``: hashes of texts a rule could not read (the shell fetches them, runs again)."""

    hashes: Sequence[str]


@dataclass(frozen=True, slots=True)
class AgentSeen(_Payload):
    """``agent``: the agent profile the request was recognised as."""

    name: str


@dataclass(frozen=True, slots=True)
class BillingBlock(_Payload):
    """``billing_block``: a per-request billing header block set aside (``action``: ``removed`` or
    ``left to litellm``), with the sizes around it."""

    action: str
    block_chars: int
    cacheable_chars: int
    cacheable_tokens_est: int


@dataclass(frozen=True, slots=True)
class Drift(_Payload):
    """``drift``: a genuine head change (section 5 of the design). ``record()`` is the JSONL log's
    ``drift`` record before the sinks add the session, model and agent."""

    changed: Sequence[str]
    first_diff_char: int
    first_diff_token_est: int
    first_diff_in: str
    exact: bool
    reprefill_tokens_est: int
    before: str
    after: str
    tools: Mapping[str, Sequence[str]] | None = None  # {"added": [...], "removed": [...]} when the tools changed

    def record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"event": "drift"}
        out.update(_Payload.record(self))
        if self.tools is None:
            del out["tools"]
        return out
