"""The ordered rules; nothing else.

Every rule in ``RULES`` has one signature, ``Rule``: ``(view, journal, context) -> (view,
journal, events)``. A rule that reads no history is written ``(view, context) -> (view,
events)`` and wrapped by ``stateless``. ``run`` returns a ``Result``: the view, the journal,
the events, and the bookkeeping the shell acts on (the texts to store, the texts to fetch),
typed, so that no caller reads it out of ``Event.data`` by string keys.
"""
from __future__ import annotations

from collections import ChainMap
from collections.abc import Iterable, Mapping
from typing import NamedTuple, Protocol

from .context import Context
from .drift import record_head
from .events import Event, TextsNeeded, TextsToKeep
from .journal import Journal
from .rules.billing import set_aside_billing_block
from .rules.head_pin import keep_pinned_head
from .rules.hints import place_cache_breakpoints, set_prompt_cache_key, target_uses_prompt_cache_key
from .rules.listing_order import keep_listing_order
from .rules.memory import snapshot_memory
from .rules.mid_system import place_mid_conversation_system
from .rules.notes import place_notes, reseed
from .rules.patches import drop_redundant_patches
from .rules.paths import keep_install_root, stabilize_install_paths
from .rules.section_order import keep_section_order, record_section_order
from .rules.tools import keep_session_tool_order, normalize_tool_order
from .rules.transient import keep_transient_parts
from .rules.volatile import pin_volatile_spans
from .view import View


class Rule(Protocol):
    """A rule: a pure function of the view, the session journal and the context."""

    __name__: str

    def __call__(self, view: View, journal: Journal, ctx: Context) -> tuple[View, Journal, list[Event]]: ...


class Result(NamedTuple):
    """What ``run`` produced. ``texts``: section and tools texts by content hash that the store
    must keep (the journal refers to them); ``needed``: hashes of texts a rule could not read
    (the shell fetches them and runs again)."""

    view: View
    journal: Journal
    events: list[Event]

    @property
    def texts(self) -> Mapping[str, str]:
        return texts_of(self.events)

    @property
    def needed(self) -> list[str]:
        return [h for e in self.events if type(e.data) is TextsNeeded for h in e.data.hashes]


def texts_of(events: Iterable[Event]) -> Mapping[str, str]:
    """The texts the events ask the store to keep, by content hash (``Result.texts``)."""
    return {h: t for e in events if type(e.data) is TextsToKeep for h, t in e.data.texts.items()}


def stateless(rule) -> Rule:
    def step(view: View, journal: Journal, ctx: Context):
        new_view, events = rule(view, ctx)
        return new_view, journal, events

    step.__name__ = rule.__name__
    return step


RULES: list[Rule] = [
    stateless(set_aside_billing_block),
    keep_install_root,
    stateless(normalize_tool_order),
    keep_session_tool_order,
    keep_listing_order,
    reseed,
    pin_volatile_spans,
    keep_transient_parts,
    snapshot_memory,
    keep_section_order,
    drop_redundant_patches,
    keep_pinned_head,
    stateless(place_mid_conversation_system),
    place_notes,
    record_section_order,
    record_head,
]

# For a request this gateway already rewrote (same call id: the deployment hook after the
# pre-call hook, a retry, a fallback): only the idempotent, history-free rules run again.
STATELESS_RULES: list[Rule] = [
    stateless(set_aside_billing_block),
    stateless(stabilize_install_paths),
    stateless(normalize_tool_order),
    stateless(place_mid_conversation_system),
]


def run(view: View, journal: Journal, ctx: Context, rules: list[Rule] | None = None) -> Result:
    events: list[Event] = []
    for rule in RULES if rules is None else rules:
        view, journal, produced = rule(view, journal, ctx)
        events.extend(produced)
    return Result(view, journal, events)


# Provider cache hints (rules/hints.py): ``(request fields, shape, context) -> (fields to set,
# events)``, run last, on the request that goes to the chosen deployment.
HINT_RULES: list[Rule] = [set_prompt_cache_key, place_cache_breakpoints]


_KNOWN_HINT_RULES = (set_prompt_cache_key, place_cache_breakpoints)


def hints_apply(ctx: Context) -> bool:
    """Whether a hint rule may set anything for this target and these settings: False where the
    target reads neither ``prompt_cache_key`` nor cache marks (a self-hosted server), where both
    rules return nothing whatever the request holds. Then the deployment hook does no work for
    hints (``count_marks`` alone reads every message). Only for the two rules it knows: another
    rule in ``HINT_RULES`` makes it True."""
    if tuple(HINT_RULES) != _KNOWN_HINT_RULES:
        return True
    settings, target = ctx.settings, ctx.target
    return bool((settings.prompt_cache_key and target_uses_prompt_cache_key(target))
                or (settings.cache_breakpoints and (target.reads_cache_control or target.reads_prompt_cache_breakpoint)))


def run_hints(data, shape: str, ctx: Context, rules=None) -> tuple[dict, list[Event]]:
    """The fields the hint rules set, each rule seeing the earlier ones' fields; ``data`` is not changed."""
    updates: dict = {}
    events: list[Event] = []
    for rule in HINT_RULES if rules is None else rules:
        changed, produced = rule(ChainMap(updates, data), shape, ctx)
        updates.update(changed)
        events.extend(produced)
    return updates, events
