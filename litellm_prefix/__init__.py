"""litellm-prefix: keep every agent session's request prefix byte-stable behind a LiteLLM gateway.

Proxy: ``litellm_settings: {callbacks: ["litellm_prefix.proxy_handler"]}``.
SDK: ``litellm.callbacks = [PrefixStabilizer()]`` (async calls: ``acompletion``,
``aresponses``, ``anthropic.messages.acreate``, the Router).
"""
from __future__ import annotations

from typing import Any

from .settings import Settings, SettingsError, load_settings

__version__ = "0.1.0"
__all__ = ["PrefixStabilizer", "Settings", "SettingsError", "load_settings", "proxy_handler", "__version__"]


def __getattr__(name: str) -> Any:
    # Lazy, so that ``litellm-prefix check`` and settings errors do not need LiteLLM imported,
    # and so that the proxy builds its handler (and validates settings) when it loads callbacks.
    if name == "PrefixStabilizer":
        from .hook import PrefixStabilizer

        return PrefixStabilizer
    if name == "proxy_handler":
        from .hook import PrefixStabilizer

        handler = PrefixStabilizer()
        globals()["proxy_handler"] = handler
        return handler
    raise AttributeError(f"module 'litellm_prefix' has no attribute {name!r}")
