"""pi (the coding agent) at two versions: 0.73.1 (``@mariozechner/pi-coding-agent``) and 1.6.0
(``@earendil-works/pi-coding-agent``), run headless against the proxy.

Read from their installed dist code (``dist/cli/args.js``, ``docs/models.md``, pi-ai's
``providers/openai-completions.js``):
- The proxy is a custom provider in ``~/.pi/agent/models.json`` (``api: "openai-completions"``,
  ``baseUrl`` = ``<proxy>/v1``, ``compat.supportsDeveloperRole: false`` so the head goes as a
  ``system`` message); ``--provider litellm --model <group>`` picks it.
- ``-p``: print mode (one prompt, exit); ``-c``: continue the workspace's most recent session
  (sessions live under ``~/.pi/agent/sessions/<cwd>``); ``--offline``: no startup network calls.
- Streaming chat completions with ``stream_options.include_usage``. No session header: pi sends
  ``session_id``/``x-session-affinity`` only for providers whose compat says
  ``sendSessionAffinityHeaders`` (none of the custom ones), and ``prompt_cache_key`` only to
  api.openai.com. User-Agent: ``pi/1.6.0 (...)`` for 1.6, the OpenAI SDK's ``OpenAI/JS 6.26.0`` for 0.73.
- The system prompt names the docs by absolute install path (``.../node_modules/<package>/README.md``,
  ``docs``, ``examples``); 0.73 ends it with ``Current date: YYYY-MM-DD`` and
  ``Current working directory: <cwd>``; 1.6 writes no date, the cwd in a ``<cwd>`` section.
"""
from __future__ import annotations

import json

from harness.real_agents.spec import AgentSpec, RunContext


def _models_json(ctx: RunContext) -> dict[str, str]:
    config = {"providers": {"litellm": {
        "baseUrl": f"{ctx.base_url}/v1", "api": "openai-completions", "apiKey": ctx.api_key,
        "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
        "models": [{"id": ctx.model, "contextWindow": 128000, "maxTokens": 4096,
                    "input": ["text", "image"]}],  # (a read image goes to the model)
    }}}
    return {"~/.pi/agent/models.json": json.dumps(config, indent=2)}


def _argv(ctx: RunContext, prompt: str, resume: bool) -> list[str]:
    return ["-p", "--offline", "--provider", "litellm", "--model", ctx.model, *(["-c"] if resume else []), prompt]


def _pi(name: str, package: str, version: str, notes: str, features: frozenset[str] = frozenset(),
        weight: float = 1.0) -> AgentSpec:
    return AgentSpec(name=name, weight=weight, package=package, version=version, bin="pi", route="chat", profile="pi",
                     skills_dir="./.pi/skills" if "skills" in features else "",
                     files=_models_json, env=lambda ctx: {"PI_OFFLINE": "1"}, argv=_argv,
                     features=frozenset({"reinstall", "docs", "images"}) | features, timeout_s=90.0, notes=notes)


SPECS = [
    _pi("pi-0.73", "@mariozechner/pi-coding-agent", "0.73.1",
        "models.json custom provider; -p, -c; no session header; date and install path in the system prompt",
        frozenset({"skills"}), weight=1.2),
    _pi("pi-1.6", "@earendil-works/pi-coding-agent", "1.6.0",
        "models.json custom provider; -p, -c; no session header; install path in the <docs> section, no date",
        weight=0.7),
]
