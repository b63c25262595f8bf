"""Reading cached tokens from every usage shape LiteLLM hands to success callbacks, and the miss classes.

Usages are recorded shapes (field names and nesting as each API returns them, values
from real answers), plus LiteLLM's own ``Usage`` objects built the way its provider
code builds them.
"""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from litellm_prefix.measure.classify import Expected, Measured, Policy, classify, measure, policy
from tests.support import examples

# OpenAI chat completions (gpt-4o, a 2k-token prompt served partly from cache).
OPENAI_CHAT = {"prompt_tokens": 2006, "completion_tokens": 300, "total_tokens": 2306,
               "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
               "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                             "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}}
# Anthropic /v1/messages, native: input_tokens excludes the cached and written parts.
ANTHROPIC_NATIVE = {"input_tokens": 21, "cache_creation_input_tokens": 188, "cache_read_input_tokens": 18086,
                    "output_tokens": 393, "service_tier": "standard"}
# OpenAI Responses.
RESPONSES = {"input_tokens": 5128, "input_tokens_details": {"cached_tokens": 4992}, "output_tokens": 12,
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 5140}
# llama.cpp's server (OpenAI-compatible): usage plus its own timings.
LLAMA_USAGE = {"prompt_tokens": 20213, "completion_tokens": 1, "total_tokens": 20214,
               "prompt_tokens_details": {"cached_tokens": 20190}}
LLAMA_TIMINGS = {"cache_n": 20190, "prompt_n": 23, "prompt_ms": 310.2, "predicted_n": 1}
# DeepSeek: its own hit/miss counters.
DEEPSEEK = {"prompt_tokens": 3072, "completion_tokens": 20, "total_tokens": 3092,
            "prompt_cache_hit_tokens": 2944, "prompt_cache_miss_tokens": 128}
# An OpenAI-compatible server that says nothing about its cache.
SILENT = {"prompt_tokens": 812, "completion_tokens": 9, "total_tokens": 821}


@pytest.mark.parametrize("usage, prompt, cached, source", [
    (OPENAI_CHAT, 2006, 1920, "prompt_tokens_details.cached_tokens"),
    (ANTHROPIC_NATIVE, 21 + 188 + 18086, 18086, "cache_read_input_tokens"),
    (RESPONSES, 5128, 4992, "input_tokens_details.cached_tokens"),
    (LLAMA_USAGE, 20213, 20190, "prompt_tokens_details.cached_tokens"),
    (DEEPSEEK, 3072, 2944, "prompt_cache_hit_tokens"),
])
def test_recorded_usage_shapes(usage, prompt, cached, source):
    m = measure(usage)
    assert (m.prompt, m.cached, m.source) == (prompt, cached, source)


def test_anthropic_native_reports_the_cache_write():
    assert measure(ANTHROPIC_NATIVE).written == 188


def test_silent_upstream_is_unknown_not_zero():
    assert measure(SILENT).cached is None
    assert measure(None) is None and measure({}) is None


def test_llama_timings_alone():
    m = measure(None, LLAMA_TIMINGS)
    assert (m.prompt, m.cached, m.source) == (20190 + 23, 20190, "timings.cache_n")
    # usage wins where both are there
    assert measure(LLAMA_USAGE, LLAMA_TIMINGS).source == "prompt_tokens_details.cached_tokens"


def test_litellm_usage_objects_from_anthropic_and_deepseek():
    from litellm.types.utils import Usage

    # what LiteLLM's Anthropic transformation builds for chat completions (prompt includes read + write)
    anthropic = Usage(prompt_tokens=18295, completion_tokens=393, total_tokens=18688,
                      cache_read_input_tokens=18086, cache_creation_input_tokens=188)
    m = measure(anthropic)
    assert (m.prompt, m.cached, m.written) == (18295, 18086, 188)
    # the dict LiteLLM logs as usage_object (standard_logging_object.metadata.usage_object)
    assert measure(anthropic.model_dump()).cached == 18086
    deepseek = Usage(prompt_tokens=3072, completion_tokens=20, total_tokens=3092, prompt_cache_hit_tokens=2944)
    assert measure(deepseek).cached == 2944


def test_streamed_usage_is_the_same_object():
    """A stream's usage reaches the callback as LiteLLM's combined Usage: same reading."""
    import litellm

    chunks = [
        {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o",
         "choices": [{"index": 0, "delta": {"role": "assistant", "content": "hi"}, "finish_reason": None}]},
        {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o",
         "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": OPENAI_CHAT},
    ]
    from litellm.types.utils import ModelResponseStream

    built = litellm.stream_chunk_builder([ModelResponseStream(**c) for c in chunks])
    m = measure(built.usage)
    assert (m.prompt, m.cached) == (2006, 1920)


def test_cached_never_exceeds_prompt():
    assert measure({"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": 12}}).cached == 10


# -- policies --------------------------------------------------------------------------


def test_policies():
    assert policy("openai") == Policy(1024, 128, 300)
    assert policy("openai", api_base="http://127.0.0.1:8080/v1") == Policy(0, 1, 0)  # llama.cpp behind openai/
    assert policy("hosted_vllm", api_base="http://vllm.internal:8000/v1").granularity == 16
    assert policy("openai", api_base="http://10.0.0.5:8000/v1").minimum == 0
    assert policy("openai", api_base="https://api.openai.com/v1").minimum == 1024
    assert policy("anthropic", min_tokens=4096).minimum == 4096  # the cost map's prompt_cache_min_tokens
    assert policy("someprovider").minimum == 0


# -- classes ---------------------------------------------------------------------------

OPENAI = policy("openai")
VLLM = policy("hosted_vllm")
LOCAL = policy("openai", api_base="http://127.0.0.1:8080/v1")


def stable(reusable, previous=None, **kw):
    return Expected(reusable=reusable, previous=previous if previous is not None else reusable, **kw)


def test_first_call_of_a_session():
    assert classify(Measured(5000, 0), Expected(first=True), OPENAI).cls == "first"


def test_unknown_when_the_upstream_says_nothing():
    assert classify(Measured(5000, None), stable(4000), OPENAI).cls == "unknown"


def test_openai_hit_within_128_token_steps():
    # 4000 reusable: OpenAI caches in 128-token steps, so 3968 (31 x 128) is everything it can give
    assert classify(Measured(4200, 3968), stable(4000), OPENAI).cls == "hit"
    verdict = classify(Measured(4200, 3712), stable(4000), OPENAI)  # two steps short
    assert (verdict.cls, verdict.tokens_lost) == ("provider_miss", 288)


def test_vllm_hit_within_16_token_blocks():
    assert classify(Measured(4200, 3984), stable(4000), VLLM).cls == "hit"
    assert classify(Measured(4200, 3900), stable(4000), VLLM).cls == "provider_miss"


def test_client_drift_loses_what_the_previous_request_left():
    # previous request 4000 tokens, this one shares only 300 (a head edit early on)
    verdict = classify(Measured(4100, 300), Expected(reusable=300, previous=4000, drift=True, where="section:rules"),
                       LOCAL)
    assert (verdict.cls, verdict.tokens_lost) == ("client_drift", 3700)


def test_a_change_past_the_previous_request_is_no_drift():
    # bytes differ only inside the last few tokens of the previous request (within the slack)
    assert classify(Measured(4100, 3995), Expected(reusable=3995, previous=4000, drift=True), LOCAL).cls == "hit"


def test_below_minimum_explains_a_short_prompt_miss():
    verdict = classify(Measured(700, 0), stable(650), OPENAI)
    assert (verdict.cls, verdict.tokens_lost) == ("below_minimum", 650)
    # the same prompt on a local server is a provider miss: there is no minimum there
    assert classify(Measured(700, 0), stable(650), LOCAL).cls == "provider_miss"


def test_provider_miss_reasons():
    other = classify(Measured(5000, 0), stable(4800, deployment="b", previous_deployment="a"), OPENAI)
    assert (other.cls, other.reason) == ("provider_miss", "other_deployment")
    idle = classify(Measured(5000, 0), stable(4800, idle=900.0, deployment="a", previous_deployment="a"), OPENAI)
    assert idle.reason == "idle"
    evicted = classify(Measured(5000, 0), stable(4800, idle=20.0, deployment="a", previous_deployment="a"), OPENAI)
    assert evicted.reason == "evicted"


# -- the success callback reads llama.cpp's timings only when the usage block leaves them a say --

_counts = st.one_of(st.none(), st.integers(0, 50_000), st.just(True), st.just("12"))


@settings(max_examples=examples(300), deadline=None)
@given(st.dictionaries(st.sampled_from(["prompt_tokens", "input_tokens", "cache_read_input_tokens",
                                        "cache_creation_input_tokens", "prompt_cache_hit_tokens"]), _counts),
       st.one_of(st.none(), st.fixed_dictionaries({"cached_tokens": _counts})),
       st.one_of(st.none(), st.dictionaries(st.sampled_from(["cache_n", "prompt_n"]), _counts)),
       st.booleans(), st.booleans())
def test_timings_read_lazily_measure_the_same(usage, details, timings, as_object, in_slo):
    from types import SimpleNamespace

    from litellm_prefix.measure.sinks import _measured

    usage = {**usage, **({"prompt_tokens_details": details} if details is not None else {})}
    body = {"usage": usage, **({"timings": timings} if timings is not None else {})}
    response = SimpleNamespace(**body) if as_object else body
    kwargs = {"standard_logging_object": {"metadata": {"usage_object": usage}}} if in_slo else {}
    eager = measure(usage or None, timings) or Measured(prompt=0, cached=None)
    assert _measured(kwargs, response) == eager
