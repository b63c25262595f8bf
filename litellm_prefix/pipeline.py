"""The ordered rules; nothing else. Each is ``(view, context) -> (view, events)``."""
from __future__ import annotations

from .context import Context, Event
from .rules.mid_system import place_mid_conversation_system
from .rules.paths import stabilize_install_paths
from .rules.tools import normalize_tool_order
from .view import View

RULES = [
    stabilize_install_paths,
    normalize_tool_order,
    place_mid_conversation_system,
]


def run(view: View, ctx: Context) -> tuple[View, list[Event]]:
    events: list[Event] = []
    for rule in RULES:
        view, produced = rule(view, ctx)
        events.extend(produced)
    return view, events
