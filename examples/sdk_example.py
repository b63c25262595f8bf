"""SDK use: register PrefixStabilizer as a LiteLLM callback; async calls get stable heads.

Runs offline: it starts the bundled recording upstream on 127.0.0.1 and shows that two
turns whose tool order and install path differ reach the upstream with identical heads.

    .venv/bin/python -m examples.sdk_example    # from the repository root
"""
from __future__ import annotations

import asyncio
import json
import os
import threading

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network at import

import litellm

from harness.recording_upstream import serve
from litellm_prefix import PrefixStabilizer, Settings

SUFFIX = "node_modules/@earendil-works/pi-coding-agent"


def tool(name: str) -> dict:
    return {"type": "function", "function": {"name": name, "description": f"{name} a file",
                                             "parameters": {"type": "object", "properties": {}}}}


async def main() -> None:
    server = serve("127.0.0.1", 0, None)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/v1"

    # pathCheck "trusted": these example install roots are not on this disk; the operator declares that
    # /opt/pi-home resolves to the install root on every agent's machine (else paths pass through).
    litellm.callbacks = [PrefixStabilizer(Settings(path_check="trusted", stable_path="/opt/pi-home"))]

    turns = [
        (f"/home/me/.nvm/versions/node/v22.0.0/lib/{SUFFIX}", ["write", "read", "bash"]),
        (f"/home/me/.nvm/versions/node/v23.1.0/lib/{SUFFIX}", ["bash", "write", "read"]),
    ]
    history = [{"role": "user", "content": "Summarise the docs."}]
    for root, order in turns:
        await litellm.acompletion(
            model="openai/demo", api_base=base, api_key="none",
            messages=[{"role": "system", "content": f"You are pi. Docs: {root}/docs"}, *history],
            tools=[tool(n) for n in order], metadata={"session_id": "example-session"},
        )
        history += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "Go on."}]

    first, second = [json.loads(r["body"]) for r in server.RequestHandlerClass.state.records]
    same = first["messages"][0] == second["messages"][0] and first["tools"] == second["tools"]
    print("system sent:", first["messages"][0]["content"])
    print("tools sent: ", [t["function"]["name"] for t in first["tools"]])
    print("identical heads across turns:", same)
    server.shutdown()
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    asyncio.run(main())
