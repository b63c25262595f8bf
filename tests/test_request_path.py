"""What the request path does besides the rules (issue 38): the deployment hook does no hint
work for a target that reads no hint, and the success callback does not read the request's head
again. Counted, never timed."""
from __future__ import annotations

import copy

from hypothesis import given, settings as hsettings
from hypothesis import strategies as st

from litellm_prefix import pipeline
from litellm_prefix.context import Context, Target
from litellm_prefix.settings import Settings

_TEXT = st.text(alphabet="ab x\n", max_size=40)
_PART = st.fixed_dictionaries({"type": st.just("text"), "text": _TEXT},
                              optional={"cache_control": st.just({"type": "ephemeral"})})
_CONTENT = st.one_of(_TEXT, st.lists(_PART, max_size=3))
_MESSAGE = st.fixed_dictionaries({"role": st.sampled_from(["system", "user", "assistant", "tool", "developer"]),
                                  "content": _CONTENT})
_TARGETS = st.builds(Target, model=st.sampled_from(["m", "openai/gpt-4o", "anthropic/claude-sonnet-4-5"]),
                     provider=st.sampled_from(["", "openai", "anthropic", "hosted_vllm", "azure", "mistral", "bedrock"]),
                     api_base=st.sampled_from(["", "https://api.openai.com/v1", "http://127.0.0.1:9/v1"]),
                     accepts_prompt_cache_key=st.booleans(), reads_cache_control=st.booleans(),
                     wants_prompt_cache_key=st.booleans(), reads_prompt_cache_breakpoint=st.booleans(),
                     cache_min_tokens=st.sampled_from([0, 1]))


@hsettings(max_examples=300, deadline=None)
@given(_TARGETS, st.lists(_MESSAGE, min_size=1, max_size=5), st.sampled_from(["chat", "anthropic", "responses"]),
       st.booleans(), st.booleans(), st.booleans())
def test_hints_apply_false_means_no_hint_rule_sets_anything(target, messages, shape, key_on, marks_on, tools):
    """``pipeline.hints_apply`` is False only where both hint rules set nothing, whatever the request."""
    ctx = Context(settings=Settings(path_check="absolute", prompt_cache_key=key_on, cache_breakpoints=marks_on),
                  target=target, session_key="k" * 32)
    data = {"messages": copy.deepcopy(messages)} if shape != "responses" else {"input": copy.deepcopy(messages)}
    if tools:
        data["tools"] = [{"type": "function", "function": {"name": "read", "parameters": {}}}]
    if not pipeline.hints_apply(ctx):
        assert pipeline.run_hints(data, shape, ctx) == ({}, [])


def test_hints_apply_only_for_the_rules_it_knows(monkeypatch):
    ctx = Context(settings=Settings(path_check="absolute"), target=Target(model="m", provider="hosted_vllm"))
    assert not pipeline.hints_apply(ctx)
    monkeypatch.setattr(pipeline, "HINT_RULES", [*pipeline.HINT_RULES, lambda data, shape, c: ({}, [])])
    assert pipeline.hints_apply(ctx)
