"""The ordered rules; nothing else.

Stateless rules are ``(view, context) -> (view, events)``; rules that read or extend the
session journal are ``(view, journal, context) -> (view, journal, events)``.
"""
from __future__ import annotations

from collections import ChainMap

from .context import Context, Event
from .drift import record_head
from .journal import Journal
from .rules.billing import set_aside_billing_block
from .rules.head_pin import keep_pinned_head
from .rules.hints import place_cache_breakpoints, set_prompt_cache_key
from .rules.memory import snapshot_memory
from .rules.mid_system import place_mid_conversation_system
from .rules.notes import place_notes, reseed
from .rules.patches import drop_redundant_patches
from .rules.paths import keep_install_root, stabilize_install_paths
from .rules.section_order import keep_section_order, record_section_order
from .rules.tools import keep_session_tool_order, normalize_tool_order
from .rules.volatile import pin_volatile_spans
from .view import View


def stateless(rule):
    def step(view: View, journal: Journal, ctx: Context):
        new_view, events = rule(view, ctx)
        return new_view, journal, events

    step.__name__ = rule.__name__
    return step


RULES = [
    stateless(set_aside_billing_block),
    keep_install_root,
    stateless(normalize_tool_order),
    keep_session_tool_order,
    reseed,
    pin_volatile_spans,
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
STATELESS_RULES = [
    stateless(set_aside_billing_block),
    stateless(stabilize_install_paths),
    stateless(normalize_tool_order),
    stateless(place_mid_conversation_system),
]


def run(view: View, journal: Journal, ctx: Context, rules=None) -> tuple[View, Journal, list[Event]]:
    events: list[Event] = []
    for rule in RULES if rules is None else rules:
        view, journal, produced = rule(view, journal, ctx)
        events.extend(produced)
    return view, journal, events


# Provider cache hints (rules/hints.py): ``(request fields, shape, context) -> (fields to set,
# events)``, run last, on the request that goes to the chosen deployment.
HINT_RULES = [set_prompt_cache_key, place_cache_breakpoints]


def run_hints(data, shape: str, ctx: Context, rules=None) -> tuple[dict, list[Event]]:
    """The fields the hint rules set, each rule seeing the earlier ones' fields; ``data`` is not changed."""
    updates: dict = {}
    events: list[Event] = []
    for rule in HINT_RULES if rules is None else rules:
        changed, produced = rule(ChainMap(updates, data), shape, ctx)
        updates.update(changed)
        events.extend(produced)
    return updates, events
