"""Claude Code's billing block: out of every head comparison; off the wire where it breaks caching.

Claude Code (2.1.36+) sends, as the first system text block of every request, an
attribution line ``x-anthropic-billing-header: cc_version=…; cc_entrypoint=…; cch=<5 hex>;``
whose ``cch`` is new on every request. Anthropic's own API reads it (and keeps its cache
past it); on any other backend it sits in front of everything else, so nothing ever caches.

The rule sets the block aside before any other rule runs, so no rule, fingerprint or
drift report ever sees it, and decides what the wire gets:

- Anthropic's first-party API (provider ``anthropic`` without an ``api_base`` elsewhere),
  or ``keepBillingHeader``: the block is written back exactly as sent.
- A target where LiteLLM strips it itself (``should_strip_billing_metadata()`` of the
  deployment's provider config for this route: Bedrock invoke, Claude Platform, Vertex and
  Azure Claude, ``openai_like`` messages, DeepSeek, MiniMax, Tencent): left for LiteLLM, so
  the two never disagree and the upstream gets LiteLLM's own bytes.
- Every other target (``/v1/messages`` translated to chat completions for vLLM, SGLang,
  llama.cpp, Ollama, …): removed, and counted with the characters that can now be cached.

Stateless and idempotent: a request without the block is left alone.
"""
from __future__ import annotations

import re
from urllib.parse import urlparse

from ..context import Context
from ..drift import estimate_tokens, tools_json
from ..events import BillingBlock, Event
from ..profiles import BILLING_PREFIX
from ..target import Target
from ..view import View

BILLING_BLOCK = re.compile(re.escape(BILLING_PREFIX) + r"[^\n]*\n?\Z")
FIRST_PARTY_HOSTS = frozenset({"", "api.anthropic.com"})


def is_billing_block(text: str) -> bool:
    return text.startswith(BILLING_PREFIX) and BILLING_BLOCK.match(text) is not None


def is_anthropic_first_party(target: Target) -> bool:
    if target.provider != "anthropic":
        return False
    api_base = target.api_base
    host = (urlparse(api_base).hostname or "") if api_base else ""
    return host in FIRST_PARTY_HOSTS


def set_aside_billing_block(view: View, ctx: Context) -> tuple[View, list[Event]]:
    # Positions among the client's segments: skip the ones an earlier step already set aside.
    client_positions = [p for p in range(len(view.head) + len(view.head_aside)) if p not in view.head_aside]
    found = [(i, client_positions[i]) for i, text in enumerate(view.head) if is_billing_block(text)]
    if not found:
        return view, []
    keep = ctx.settings.keep_billing_header or is_anthropic_first_party(ctx.target)
    litellm_strips = ctx.target.strips_billing
    drop = not keep and not litellm_strips
    indices = {i for i, _ in found}
    aside = frozenset(p for _, p in found)
    head = tuple(text for i, text in enumerate(view.head) if i not in indices)
    new_view = view.replace(
        head=head,
        head_aside=view.head_aside | aside,
        head_dropped=view.head_dropped | aside if drop else view.head_dropped,
    )
    if keep:
        return new_view, []
    block_chars = sum(len(view.head[i]) for i in indices)
    after = sum(len(text) for text in head) + len(tools_json(view, ctx))  # marks left out, like the head record
    return new_view, [Event("billing_block", BillingBlock(
        action="removed" if drop else "left to litellm",
        block_chars=block_chars,
        cacheable_chars=after,
        cacheable_tokens_est=estimate_tokens(after),
    ))]
