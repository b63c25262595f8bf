"""Money: what a call's input tokens cost, what the cache saved, and what client drift cost.

Prices are USD per token, read in this order (first that names an input price wins):

1. the price LiteLLM itself used for the call (the standard logging object's
   ``model_map_information.model_map_value``: custom deployment pricing included);
2. the deployment's own ``litellm_params`` (``input_cost_per_token``,
   ``cache_read_input_token_cost``, ``cache_creation_input_token_cost``: how an operator
   prices a self-hosted model, zero included);
3. LiteLLM's cost map for (model, provider).

A price that none of them names is *unknown*, never zero: a self-hosted deployment costs
nothing only when the operator says so. Where the cache-read price is unknown, reads are
billed at the input price (what every provider does without a cache discount) and the
savings are zero; where the cache-write price is unknown, writes are billed as input.

For one call with ``prompt`` input tokens of which ``cached`` were read from the cache and
``written`` were written to it (Anthropic's ``cache_creation_input_tokens``; the three do
not overlap there; OpenAI's ``cache_write_tokens`` from GPT-5.6 on; zero elsewhere), and ``lost`` tokens that a stable
client on a warm cache would have read (``classify``):

- billed = (prompt - cached - written) x input + cached x read + written x write, where the
  write price is the one-hour price for Anthropic's ``ttl: 1h`` writes (2x input) and the
  5-minute one otherwise (Anthropic 1.25x; OpenAI GPT-5.6+ 1.25x)
- saved  = cached x (input - read): what the cache reads saved against no cache
- drift  = lost x (paid - read), where ``paid`` is the write price when the provider charges
  a write premium and the call wrote to its cache (the lost tokens were written again), else
  the input price: what the miss cost against the hit it should have been.

Pure functions; the success callback (``sinks``) reads the prices and writes the figures.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..request.target import cost_map_value

_FIELDS = ("input_cost_per_token", "cache_read_input_token_cost", "cache_creation_input_token_cost",
           "cache_creation_input_token_cost_above_1hr")


@dataclass(frozen=True, slots=True)
class Prices:
    """USD per token. ``input is None``: the model's price is unknown."""

    input: float | None
    cache_read: float | None = None
    cache_write: float | None = None
    source: str = "unknown"  # "call", "deployment", "cost_map" or "unknown"
    cache_write_1h: float | None = None  # Anthropic's one-hour writes (2x input); else ``cache_write``

    @property
    def known(self) -> bool:
        return self.input is not None


UNKNOWN = Prices(None)


def _price(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        return None
    return float(value)


def _from_mapping(values: Any, source: str) -> Prices | None:
    if not isinstance(values, Mapping):
        return None
    input_price = _price(values.get(_FIELDS[0]))
    if input_price is None:
        return None
    return Prices(input_price, _price(values.get(_FIELDS[1])), _price(values.get(_FIELDS[2])), source,
                  _price(values.get(_FIELDS[3])))


def prices_for(model: str, provider: str, slo: Mapping[str, Any] | None = None,
               litellm_params: Mapping[str, Any] | None = None) -> Prices:
    """The call's prices: LiteLLM's own for the call, else the deployment's, else the cost map's."""
    info = slo.get("model_map_information") if isinstance(slo, Mapping) else None
    found = _from_mapping(info.get("model_map_value") if isinstance(info, Mapping) else None, "call")
    if found is None:
        found = _from_mapping(litellm_params, "deployment")
    if found is None and model:
        input_price = cost_map_value(model, provider, _FIELDS[0], float)
        if input_price is None:
            input_price = cost_map_value(model, provider, _FIELDS[0], int)
        if input_price is not None:
            found = Prices(float(input_price), _price(cost_map_value(model, provider, _FIELDS[1], float)),
                           _price(cost_map_value(model, provider, _FIELDS[2], float)), "cost_map",
                           _price(cost_map_value(model, provider, _FIELDS[3], float)))
    return found or UNKNOWN


@dataclass(frozen=True, slots=True)
class Cost:
    """One call's figures in USD (all ``None`` when the price is unknown)."""

    billed: float | None
    saved: float | None
    drift: float | None

    def to_json(self) -> dict[str, float] | None:
        if self.billed is None:
            return None
        return {"billed": round(self.billed, 9), "saved": round(self.saved or 0.0, 9),
                "drift": round(self.drift or 0.0, 9)}


def write_price(prices: Prices, one_hour: bool = False) -> float | None:
    """USD per token written to the cache: the one-hour price for Anthropic's ``ttl: 1h`` writes
    where known, else the write price, else the input price (no premium known)."""
    if one_hour and prices.cache_write_1h is not None:
        return prices.cache_write_1h
    return prices.input if prices.cache_write is None else prices.cache_write


def unread_write_cost(prices: Prices, tokens: int, one_hour: bool = False) -> float | None:
    """What ``tokens`` written and never read cost above sending them uncached (the write premium)."""
    if prices.input is None:
        return None
    return max(0, tokens) * max(0.0, (write_price(prices, one_hour) or 0.0) - prices.input)


def cost_of(prices: Prices, prompt: int, cached: int, written: int = 0, lost: int = 0, written_1h: int = 0) -> Cost:
    """The call's billed input cost, the cache's savings and the drift's cost (see the module text);
    ``written_1h``: of ``written``, the tokens written with a one-hour TTL."""
    if prices.input is None:
        return Cost(None, None, None)
    cached = max(0, min(cached, prompt))
    written = max(0, min(written, prompt - cached))
    written_1h = max(0, min(written_1h, written))
    fresh = prompt - cached - written
    read = prices.input if prices.cache_read is None else prices.cache_read
    write = write_price(prices)
    billed = fresh * prices.input + cached * read + (written - written_1h) * write \
        + written_1h * write_price(prices, one_hour=True)
    saved = cached * (prices.input - read)
    paid = write if (written and prices.cache_write is not None) else prices.input
    drift = max(0, lost) * max(0.0, paid - read)
    return Cost(billed, saved, drift)
