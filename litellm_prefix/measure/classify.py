"""What the upstream's cache really did on one call, and whose fault a miss was. Pure functions.

``measure`` reads the usage block an upstream returned, in any of the shapes LiteLLM
hands to success callbacks: chat completions (``prompt_tokens_details.cached_tokens``,
also what LiteLLM makes of Anthropic, DeepSeek and Gemini usage), Anthropic messages
(``input_tokens`` + ``cache_read_input_tokens`` + ``cache_creation_input_tokens``),
Responses (``input_tokens_details.cached_tokens``) and llama.cpp's ``timings``
(``cache_n`` reused + ``prompt_n`` evaluated).

``classify`` compares the measured cached tokens with what the upstream could have
reused: the longest prefix this request shares with the session's previous request
(``Expected``, from ``prefix.py``). One class per call:

- ``first``: the session's first call here (nothing to reuse yet);
- ``unknown``: the upstream reports no cache usage at all;
- ``client_drift``: the client changed bytes before the end of the previous request
  (head, tools or history): whatever the upstream held past that point is lost;
- ``below_minimum``: less than expected came from the cache, on a prompt shorter than
  the provider caches at all (cost map ``prompt_cache_min_tokens``, else documented);
- ``hit``: cached >= expected, within the provider's granularity (OpenAI 128-token
  steps, vLLM 16-token blocks) and a small estimate tolerance;
- ``provider_miss``: the bytes were stable but the upstream reused less (evicted,
  expired after idle time, served by another deployment).

``write_never_read`` is the writing side of a miss, counted on the call after the write: the
tokens the previous call of the session wrote to the cache (Anthropic, OpenAI GPT-5.6+: billed
1.25x or 2x) that this call did not read before they expired (``write_read_back``). On a hosted
provider with paid writes these cost more than no cache at all; an ideal client leaves only its
session's last write unread. The report and the metrics carry it as a class of its own.

``tokens_lost`` is what a stable client on a warm cache would have got from the cache
and did not: for ``client_drift`` the previous request's size (capped at this prompt)
minus cached, for misses expected minus cached, else 0.
"""
from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from urllib.parse import urlparse

CLASSES = ("first", "hit", "client_drift", "provider_miss", "below_minimum", "unknown")
WRITE_NEVER_READ = "write_never_read"  # the writing side of a miss (see the module text)

# Providers with a documented minimum and step when served by the vendor's own API.
_HOSTED = {
    # provider: (minimum cacheable prompt tokens, granularity in tokens, idle TTL seconds)
    "openai": (1024, 128, 300),
    "azure": (1024, 128, 300),
    "text-completion-openai": (1024, 128, 300),
    "anthropic": (1024, 1, 300),
    "bedrock": (1024, 1, 300),
    "vertex_ai": (1024, 1, 300),
    "gemini": (1024, 1, 300),
    "deepseek": (64, 64, 3600),
}
# Self-hosted engines: no minimum; vLLM and SGLang-style block caches hash 16-token blocks.
_SELF_HOSTED = {"hosted_vllm": 16, "vllm": 16, "sglang": 16, "lm_studio": 1, "ollama": 1, "ollama_chat": 1,
                "llamafile": 1, "llama.cpp": 1, "llamacpp": 1}
# Tolerance on top of the granularity: token boundaries where an appended turn meets the
# previous prompt (the generation prompt re-tokenized with the reply) shift a few tokens.
SLACK_TOKENS = 8
SLACK_FRACTION = 0.01


@dataclass(frozen=True)
class Measured:
    prompt: int
    cached: int | None  # None: the upstream said nothing about its cache
    written: int = 0  # written to the cache (Anthropic cache_creation_input_tokens, OpenAI cache_write_tokens)
    source: str = ""  # which field the cached count came from
    written_1h: int = 0  # of ``written``, with Anthropic's one-hour TTL (billed 2x, not 1.25x)


@dataclass(frozen=True)
class Policy:
    minimum: int = 0
    granularity: int = 1
    ttl: int = 0  # documented idle retention, seconds (0: unknown)


@dataclass(frozen=True)
class Expected:
    """What the request could reuse, from the pre-call comparison with the session's previous request."""

    first: bool = False
    reusable: int = 0  # tokens this request shares with the previous one (measured where exact, else estimated)
    previous: int = 0  # tokens of the previous request (measured by the upstream where known)
    drift: bool = False  # the previous request is not a prefix of this one
    where: str = ""  # where the bytes first differ (drift): section, tools, messages[i]
    idle: float | None = None  # seconds since the previous call ended
    deployment: str = ""
    previous_deployment: str = ""


@dataclass(frozen=True)
class Verdict:
    cls: str
    tokens_lost: int = 0
    reason: str = ""  # provider_miss: other_deployment | idle | evicted


def _get(obj: Any, key: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj.get(key)
    return getattr(obj, key, None)


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def measure(usage: Any, timings: Any = None) -> Measured | None:
    """Prompt and cached tokens from a usage block (dict or LiteLLM object); None without usage."""
    if usage is not None and not isinstance(usage, Mapping) and hasattr(usage, "model_dump"):
        try:
            usage = usage.model_dump()
        except Exception:
            pass
    read = _int(_get(usage, "cache_read_input_tokens"))
    written, written_1h = _written(usage)
    prompt = _int(_get(usage, "prompt_tokens"))
    cached: int | None = None
    source = ""
    if prompt is not None:  # chat completions shape (LiteLLM's Usage for every provider)
        cached = _int(_get(_get(usage, "prompt_tokens_details"), "cached_tokens"))
        source = "prompt_tokens_details.cached_tokens"
        if cached is None and read is not None:
            cached, source = read, "cache_read_input_tokens"
        if cached is None and _int(_get(usage, "prompt_cache_hit_tokens")) is not None:
            cached, source = _int(_get(usage, "prompt_cache_hit_tokens")), "prompt_cache_hit_tokens"
    elif _int(_get(usage, "input_tokens")) is not None:
        inputs = _int(_get(usage, "input_tokens")) or 0
        if read is not None or _get(usage, "cache_creation_input_tokens") is not None:  # Anthropic messages
            prompt, cached, source = inputs + (read or 0) + written, read or 0, "cache_read_input_tokens"
        else:  # Responses
            prompt = inputs
            cached = _int(_get(_get(usage, "input_tokens_details"), "cached_tokens"))
            source = "input_tokens_details.cached_tokens"
    cache_n, prompt_n = _int(_get(timings, "cache_n")), _int(_get(timings, "prompt_n"))
    if cached is None and cache_n is not None:  # llama.cpp's own counters
        cached, source = cache_n, "timings.cache_n"
        if prompt is None and prompt_n is not None:
            prompt = cache_n + prompt_n
    if prompt is None:
        return None
    return Measured(prompt=prompt, cached=None if cached is None else min(cached, prompt), written=written,
                    source=source if cached is not None else "", written_1h=min(written_1h, written))


def _first_int(*values: Any) -> int | None:
    return next((n for n in map(_int, values) if n is not None), None)


def _written(usage: Any) -> tuple[int, int]:
    """Tokens written to the cache, and of those with a one-hour TTL, in any usage shape:
    Anthropic ``cache_creation_input_tokens`` (``cache_creation.ephemeral_1h_input_tokens``),
    OpenAI GPT-5.6+ ``prompt_tokens_details.cache_write_tokens`` (Responses:
    ``input_tokens_details``), and LiteLLM's ``Usage``, which mirrors Anthropic's count there
    (``cache_creation_token_details``)."""
    details = _get(usage, "prompt_tokens_details")
    inputs = _get(usage, "input_tokens_details")
    written = _first_int(_get(usage, "cache_creation_input_tokens"), _get(details, "cache_write_tokens"),
                         _get(details, "cache_creation_tokens"), _get(inputs, "cache_write_tokens")) or 0
    hour = _first_int(_get(_get(usage, "cache_creation"), "ephemeral_1h_input_tokens"),
                      _get(_get(details, "cache_creation_token_details"), "ephemeral_1h_input_tokens")) or 0
    return max(0, written), max(0, hour)


@lru_cache(maxsize=256)
def _self_hosted_base(api_base: str) -> bool:
    """A loopback or private address: a server of the operator's own, not the vendor's API."""
    host = urlparse(api_base).hostname or ""
    if host in ("localhost", "") or host.endswith((".local", ".internal", ".svc", ".cluster.local")):
        return bool(host)
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_private or address.is_loopback


def policy(provider: str, model: str = "", api_base: str = "", min_tokens: int | None = None) -> Policy:
    """Minimum, step and idle TTL of the upstream's prefix cache.

    ``min_tokens`` is the cost map's ``prompt_cache_min_tokens`` for the model when known.
    A vendor provider pointed at a private or loopback ``api_base`` (an OpenAI-compatible
    llama.cpp, vLLM or SGLang server) has no minimum.
    """
    provider = (provider or "").lower()
    if provider in _SELF_HOSTED:
        return Policy(0, _SELF_HOSTED[provider], 0)
    if api_base and _self_hosted_base(api_base):
        return Policy(0, 16 if "vllm" in provider else 1, 0)
    minimum, granularity, ttl = _HOSTED.get(provider, (0, 16, 0))
    if min_tokens is not None and provider in _HOSTED:
        minimum = min_tokens
    return Policy(minimum, granularity, ttl)


# How long a write stays readable when the provider documents it: Anthropic's marks 5 minutes
# (1 hour with ``ttl: "1h"``), OpenAI's GPT-5.6 writes 30 minutes.
WRITE_TTL_SECONDS = {"openai": 1800, "azure": 1800}


def write_ttl(provider: str, written_1h: int) -> int:
    """Seconds a call's cache write stays readable (refreshed by a read)."""
    if written_1h:
        return 3600
    return WRITE_TTL_SECONDS.get((provider or "").lower(), 300)


def write_read_back(written: int, cached_then: int, cached_now: int, idle: float | None, ttl: int) -> int:
    """How much of the previous call's write (tokens ``cached_then`` .. ``cached_then + written``)
    the session's next call read: what it read past ``cached_then``, none once the write expired."""
    if not written or (idle is not None and idle > ttl):
        return 0
    return max(0, min(cached_now - cached_then, written))


def slack(policy: Policy, expected: int) -> int:
    return policy.granularity + SLACK_TOKENS + int(expected * SLACK_FRACTION)


def classify(measured: Measured, expected: Expected, pol: Policy) -> Verdict:
    if expected.first:
        return Verdict("first")
    if measured.cached is None:
        return Verdict("unknown")
    cached = measured.cached
    if expected.drift:
        would_have = min(expected.previous, measured.prompt)
        if would_have - expected.reusable > slack(pol, would_have):
            return Verdict("client_drift", max(0, would_have - cached))
    lost = max(0, expected.reusable - cached)
    if measured.prompt < pol.minimum and lost:
        return Verdict("below_minimum", lost)
    if cached + slack(pol, expected.reusable) >= expected.reusable:
        return Verdict("hit")
    if expected.deployment and expected.previous_deployment and expected.deployment != expected.previous_deployment:
        reason = "other_deployment"
    elif pol.ttl and expected.idle is not None and expected.idle > pol.ttl:
        reason = "idle"
    else:
        reason = "evicted"
    return Verdict("provider_miss", lost, reason)
