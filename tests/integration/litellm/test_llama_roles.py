"""End to end on a real llama.cpp server whose chat template demands alternating roles.

llama.cpp's server (the xllamacpp wheel, harness/llama_server.py) runs the tiny model with a
template written like Mistral's: a system message only first, then user and assistant
alternate (tool results and assistant turns that only call tools left out), else it raises
``Conversation roles must alternate user/assistant/user/assistant/...``. Sessions go
through the LiteLLM SDK with the plugin's callback to a ``hosted_vllm`` deployment that
declares nothing about its roles: a date-change note (the ``todays-date`` preset) must
reach the template in a form it accepts; so must a client's mid-conversation system
message where the deployment declares ``supports_mid_conversation_system: false``. The
form the plugin used before (a system note after the first message, or a user note after
a user message) is sent straight to the same server and rejected, so the test can fail.
"""
from __future__ import annotations

import copy

import httpx
import litellm
import pytest

from harness.procs import sdk_callbacks
from litellm_prefix.hook import PrefixStabilizer
from litellm_prefix.request.rules.mid_system import SYSTEM_UPDATE_NOTE
from litellm_prefix.request.rules.notes import MERGED_NOTE_END
from litellm_prefix.request.rules.volatile import volatile_note
from litellm_prefix.settings import Settings

pytestmark = pytest.mark.anyio

STRICT_TEMPLATE = """\
{%- if messages[0]['role'] == 'system' -%}
{%- set loop_messages = messages[1:] -%}
<|im_start|>system
{{ messages[0]['content'] }}<|im_end|>
{% else -%}
{%- set loop_messages = messages -%}
{%- endif -%}
{%- set ns = namespace(index=0) -%}
{%- for message in loop_messages -%}
{%- if message['role'] == 'system' -%}
{{- raise_exception('After the optional system message, conversation roles must alternate user/assistant/user/assistant/...') -}}
{%- endif -%}
{%- if message['role'] != 'tool' and not (message['role'] == 'assistant' and message['tool_calls']) -%}
{%- if (message['role'] == 'user') != (ns.index % 2 == 0) -%}
{{- raise_exception('After the optional system message, conversation roles must alternate user/assistant/user/assistant/...') -}}
{%- endif -%}
{%- set ns.index = ns.index + 1 -%}
{%- endif -%}
<|im_start|>{{ message['role'] }}
{{ message['content'] if message['content'] is string else '' }}<|im_end|>
{% endfor -%}
{%- if add_generation_prompt -%}
<|im_start|>assistant
{% endif -%}
"""
HEAD = "You are a coding agent. Keep edits small.\nToday's date: {date}\nRun the tests before you answer."
NOTE = volatile_note("todays-date", "Today's date: 2026-12-04")


@pytest.fixture(scope="module")
def strict_llama(e2e_dir):
    """One more llama.cpp server, with the strict template (the session's own runs the model's ChatML)."""
    from harness.llama_server import LlamaServer
    from harness.procs import free_port

    template = e2e_dir / "strict-template.jinja"
    template.write_text(STRICT_TEMPLATE)
    server = LlamaServer(free_port(), e2e_dir / "llama-strict.log", ctx_per_slot=4096, n_predict=8,
                         chat_template=template)
    yield server
    server.stop()


def _post(llama, messages: list[dict]) -> httpx.Response:
    return httpx.post(f"{llama.url}/v1/chat/completions", json={"messages": messages, "max_tokens": 2}, timeout=120)


def _plugin(settings: Settings):
    handler = PrefixStabilizer(settings)
    sent: list[list[dict]] = []
    transformed = handler.core.sinks.transformed

    def spy(call_id, key, data, *args, **kwargs):  # what the plugin wrote, as it goes upstream
        sent.append(copy.deepcopy(data.get("messages")))
        return transformed(call_id, key, data, *args, **kwargs)

    handler.core.sinks.transformed = spy
    return handler, sent


@pytest.fixture
def callbacks():
    with sdk_callbacks():
        yield


def test_the_template_rejects_the_old_note_forms(strict_llama):
    head = {"role": "system", "content": HEAD.format(date="2026-12-03")}
    user = {"role": "user", "content": "fix the test"}
    assert _post(strict_llama, [head, user]).status_code == 200
    for note in ({"role": "system", "content": NOTE}, {"role": "user", "content": f"{SYSTEM_UPDATE_NOTE}\n\n{NOTE}"}):
        answer = _post(strict_llama, [head, user, note])
        assert answer.status_code >= 400 and "roles must alternate" in answer.text, answer.text[:300]


async def _session(strict_llama, handler, session: str, turns: list[tuple[str, list[dict]]]) -> None:
    litellm.callbacks = [handler]
    body: list[dict] = []
    for date, new in turns:
        body += new
        response = await litellm.acompletion(
            model="hosted_vllm/tiny", api_base=f"{strict_llama.url}/v1", api_key="none", max_tokens=2,
            messages=[{"role": "system", "content": HEAD.format(date=date)}, *copy.deepcopy(body)],
            metadata={"session_id": session})
        assert response.choices[0].message is not None
        body.append({"role": "assistant", "content": "ok"})


async def test_a_date_note_reaches_the_strict_template_in_a_form_it_accepts(strict_llama, callbacks):
    handler, sent = _plugin(Settings(path_check="absolute", volatile_presets=["todays-date"]))
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]}
    result = {"role": "tool", "tool_call_id": "call_1", "content": "a.py"}
    await _session(strict_llama, handler, "roles-date", [
        ("2026-12-03", [{"role": "user", "content": "fix the test"}]),
        ("2026-12-04", [{"role": "user", "content": "and the docs"}]),  # the date changes: a note
        ("2026-12-04", [{"role": "user", "content": "go on"}, call, result]),
    ])
    folded = f"{SYSTEM_UPDATE_NOTE}\n\n{NOTE}\n\n{MERGED_NOTE_END}"
    assert [m for m in sent[1] if m["role"] == "user"][-1]["content"] == f"and the docs\n\n{folded}"
    assert sent[2][: len(sent[1])] == sent[1]  # the next turn sends it in the same place
    assert handler.core.stats["drift"] == 0 and handler.core.stats["errors"] == 0
    # the plugin's old form of the same request is what the template rejects
    old = [m for m in sent[1]]
    old[-1] = {"role": "user", "content": "and the docs"}
    assert _post(strict_llama, [*old, {"role": "system", "content": NOTE}]).status_code >= 400


async def test_a_converted_system_message_reaches_the_strict_template(strict_llama, callbacks):
    reminder = {"role": "system", "content": "Reminder: the todo list is empty."}
    head = {"role": "system", "content": HEAD.format(date="2026-12-03")}
    without = _post(strict_llama, [head, {"role": "user", "content": "fix the test"}, reminder])
    assert without.status_code >= 400  # without the plugin, the client's own late system message fails
    handler, sent = _plugin(Settings(path_check="absolute", volatile_presets=["todays-date"],
                                     supports_mid_conversation_system=False))
    await _session(strict_llama, handler, "roles-converted", [
        ("2026-12-03", [{"role": "user", "content": "fix the test"}, reminder]),
        ("2026-12-04", [{"role": "user", "content": "next"}]),  # and a date note on top
    ])
    assert not any(m["role"] == "system" for m in sent[-1][1:])
    assert "Reminder: the todo list is empty." in sent[-1][1]["content"] and NOTE in sent[-1][-1]["content"]
    assert handler.core.stats["errors"] == 0
