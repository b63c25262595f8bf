"""Mid-conversation system/developer messages, per what the target does with them.

Agents send reminders and prompt patches as ``system`` (or ``developer``) messages
after the first turn. What happens next depends on the target:

- LiteLLM keeps them in place for Anthropic and Bedrock (user turns with an operator
  note where the model lacks support), and OpenAI-compatible servers get them as they
  are. Nothing to do: the head does not move.
- Gemini/Vertex hoist every system message into ``system_instruction``, and
  ``litellm.openai_system_messages_first`` hoists them to the front: each reminder
  rewrites the head, and the whole conversation is prefilled again.
- A deployment declaring ``supports_mid_conversation_system: false`` has a chat
  template that rejects or mishandles a late system turn.

In the last two cases each mid-conversation system/developer message becomes a
user-role note in place, framed so the model can tell it from the user's own words.
The head never moves, and the template never sees a late system turn. The note is a
pure function of the message, so turn N's output stays a prefix of turn N+1's; a
converted note is a user message, so running the rule again changes nothing.

Capability, first answer wins: the deployment's ``model_info``
(``supports_mid_conversation_system``, or ``litellm_prefix.supportsMidConversationSystem``),
then the settings (per-model ``models`` globs, then the global key), then LiteLLM's
cost map, then the provider (hoisting providers convert, all others keep).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..context import Context, Event, Target
from ..view import View, is_system_message

SYSTEM_UPDATE_NOTE = (
    "Operator note (not from the user): the following was sent as a mid-conversation system update."
)
HOISTING_PROVIDERS = frozenset({"gemini", "vertex_ai", "vertex_ai_beta"})
_SYSTEM_FIRST_PROVIDERS = frozenset({"openai", "azure", "text-completion-openai", "custom_openai"})


def target_keeps_mid_system(target: Target, declared: bool | None) -> bool:
    """True when a mid-conversation system message can stay a system message for this target."""
    for answer in (target.model_info_mid_system, declared, target.cost_map_mid_system):
        if answer is not None:
            return answer
    if target.provider in HOISTING_PROVIDERS:
        return False
    if target.system_messages_first and target.provider in _SYSTEM_FIRST_PROVIDERS:
        return False
    return True


def as_system_update(message: Mapping[str, Any], text_part: str) -> dict[str, Any]:
    """The user-role note that carries a mid-conversation system message in place."""
    content = message.get("content")
    if isinstance(content, str):
        new_content: Any = f"{SYSTEM_UPDATE_NOTE}\n\n{content}"
    elif isinstance(content, list):
        new_content = [{"type": text_part, "text": SYSTEM_UPDATE_NOTE}, *content]
    else:
        new_content = SYSTEM_UPDATE_NOTE
    converted = {k: v for k, v in message.items() if k not in ("role", "content")}
    return {**converted, "role": "user", "content": new_content}


def place_mid_conversation_system(view: View, ctx: Context) -> tuple[View, list[Event]]:
    if view.shape == "anthropic":  # Anthropic messages have no system role inside ``messages``
        return view, []
    if target_keeps_mid_system(ctx.target, ctx.settings.supports_mid_conversation_system):
        return view, []
    body = list(view.body)
    converted = 0
    for index in view.system_roles:
        if is_system_message(body[index]):
            body[index] = as_system_update(body[index], view.text_part)
            converted += 1
    if not converted:
        return view, []
    return view.replace(body=tuple(body)), [Event("mid_system", {"converted": converted, "provider": ctx.target.provider})]
