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
not overlap there, and ``written`` is zero elsewhere), and ``lost`` tokens that a stable
client on a warm cache would have read (``classify``):

- billed = (prompt - cached - written) x input + cached x read + written x write
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

from ..context import cost_map_value

_FIELDS = ("input_cost_per_token", "cache_read_input_token_cost", "cache_creation_input_token_cost")


@dataclass(frozen=True, slots=True)
class Prices:
    """USD per token. ``input is None``: the model's price is unknown."""

    input: float | None
    cache_read: float | None = None
    cache_write: float | None = None
    source: str = "unknown"  # "call", "deployment", "cost_map" or "unknown"

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
    return Prices(input_price, _price(values.get(_FIELDS[1])), _price(values.get(_FIELDS[2])), source)


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
                           _price(cost_map_value(model, provider, _FIELDS[2], float)), "cost_map")
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


def cost_of(prices: Prices, prompt: int, cached: int, written: int = 0, lost: int = 0) -> Cost:
    """The call's billed input cost, the cache's savings and the drift's cost (see the module text)."""
    if prices.input is None:
        return Cost(None, None, None)
    cached = max(0, min(cached, prompt))
    written = max(0, min(written, prompt - cached))
    fresh = prompt - cached - written
    read = prices.input if prices.cache_read is None else prices.cache_read
    write = prices.input if prices.cache_write is None else prices.cache_write
    billed = fresh * prices.input + cached * read + written * write
    saved = cached * (prices.input - read)
    paid = write if (written and prices.cache_write is not None) else prices.input
    drift = max(0, lost) * max(0.0, paid - read)
    return Cost(billed, saved, drift)
