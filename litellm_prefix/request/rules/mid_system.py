"""Mid-conversation system/developer messages, per what the target does with them.

Agents send reminders and prompt patches as ``system`` (or ``developer``) messages
after the first turn. What happens next depends on the target, which is in one of
three states (``role_rules``):

- ``"system"``: it keeps them in place. LiteLLM does for Anthropic and Bedrock (user
  turns with an operator note where the model lacks support), OpenAI and Azure read
  them where they are. Nothing to do: the head does not move, and the notes the
  plugin injects (``notes.py``) are system (Responses: developer) messages too.
- ``"user"``: it hoists or rejects them. Gemini/Vertex hoist every system message
  into ``system_instruction``, ``litellm.openai_system_messages_first`` hoists them to
  the front (each reminder rewrites the head, and the whole conversation is prefilled
  again), and a deployment declaring ``supports_mid_conversation_system: false`` has a
  chat template that rejects or mishandles a late system turn. Each mid-conversation
  system/developer message becomes a user-role note in place (this rule), framed so
  the model can tell it from the user's own words; ``notes.place_notes`` then folds it
  into a neighbouring message, so the body never holds two user messages in a row.
- ``"unknown"``: a self-hosted OpenAI-compatible server (``hosted_vllm``, ollama,
  llama.cpp or vLLM behind ``openai/`` with its own ``api_base``...) that declares
  nothing: the model's chat template decides, and several (Mistral- and Gemma-family)
  raise ``Conversation roles must alternate user/assistant/...`` on a system message
  after the first or on a user message after a user message. The client's own system
  messages pass through as they came (they reach the template exactly as without the
  plugin; declare ``false`` to have them converted), and the plugin's own notes take
  the folded form no template rejects (``notes.py``).

The head never moves, and the template never sees a late system turn the plugin made.
The conversion is a pure function of the message, so turn N's output stays a prefix of
turn N+1's; a converted note is a user message, so running the rule again changes
nothing.

Capability, first answer wins: the deployment's ``model_info``
(``supports_mid_conversation_system``, or ``litellm_prefix.supportsMidConversationSystem``),
then the settings (per-model ``models`` globs, then the global key), then LiteLLM's
cost map, then the provider (hoisting providers convert, self-hosted OpenAI-compatible
servers are unknown, all others keep).
"""
from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any, Literal
from urllib.parse import urlsplit

from ..context import Context
from ..events import Event
from ..target import Target, hoists_system_messages
from ..view import View, is_system_message

SYSTEM_UPDATE_NOTE = (
    "Operator note (not from the user): the following was sent as a mid-conversation system update."
)
# Servers whose roles the model's own chat template decides (LiteLLM provider names).
SELF_HOSTED_PROVIDERS = frozenset({
    "hosted_vllm", "vllm", "ollama", "ollama_chat", "llamafile", "lm_studio", "xinference", "oobabooga",
    "custom_openai", "openai_like", "litellm_proxy", "docker_model_runner", "lemonade",
})
# OpenAI's own API: an ``openai/`` deployment with another api_base is an OpenAI-compatible server.
_OPENAI_PROVIDERS = frozenset({"openai", "text-completion-openai"})
OPENAI_HOSTS = ("api.openai.com",)

RoleRules = Literal["system", "user", "unknown"]


@lru_cache(maxsize=256)
def openai_own_api(api_base: str) -> bool:
    """``api_base`` is empty (LiteLLM's default) or on OpenAI's own API host."""
    if not api_base:
        return True
    host = (urlsplit(api_base if "//" in api_base else f"//{api_base}").hostname or "").lower()
    return any(host == h or host.endswith("." + h) for h in OPENAI_HOSTS)


def self_hosted(target: Target) -> bool:
    """An OpenAI-compatible server whose chat template nobody declared."""
    return target.provider in SELF_HOSTED_PROVIDERS or (
        target.provider in _OPENAI_PROVIDERS and not openai_own_api(target.api_base))


def role_rules(target: Target, declared: bool | None) -> RoleRules:
    """What the target does with a system message after the first (see the module docstring)."""
    for answer in (target.model_info_mid_system, declared, target.cost_map_mid_system):
        if answer is not None:
            return "system" if answer else "user"
    if hoists_system_messages(target.provider, target.system_messages_first):
        return "user"
    return "unknown" if self_hosted(target) else "system"


def target_keeps_mid_system(target: Target, declared: bool | None) -> bool:
    """True when a client's mid-conversation system message can stay a system message for this target
    (it keeps them, or nobody knows: the client's own messages pass through as they came)."""
    return role_rules(target, declared) != "user"


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
