"""Tokens an exact-prefix cache must prefill again over a 20-turn pi-like session.

The session (harness/sessions.py) has a sectioned ~20k-token head, 35 tools, tool calls,
a memory write (turn 5), a memory deletion (turn 11), a notification-run flip of an
extension section (turn 8), and an install path that moves when the agent is updated
(turn 14). Each turn's request is rendered with a ChatML template (tools in the system
turn, as llama.cpp's templates do) and tokenized with cl100k_base (shipped with
LiteLLM, no download). An exact-prefix cache with one slot (llama.cpp ``-np 1``)
re-processes everything after the longest common token prefix with the previous
request. Compared: the client as is, the same traffic through litellm-prefix, and a
perfectly stable client (the oracle: same conversation, nothing volatile).
Also reported: the bytes of this session's journal in the in-memory store.

    .venv/bin/python -m bench.session_cost
"""
from __future__ import annotations

import copy
import json
import os
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from litellm.litellm_core_utils.default_encoding import encoding  # cl100k_base, bundled

from harness.realistic import PI_SUFFIX
from harness.sessions import NOTIFICATION, PiClient, removed, updated
from litellm_prefix.fleet.store import MemoryStore
from litellm_prefix.request.core import Stabilizer
from litellm_prefix.request.target import Target
from litellm_prefix.settings import Settings

ROOT = Path(__file__).resolve().parent.parent

TURNS = 20


def render(request: dict) -> str:
    """ChatML, tools rendered into the system turn (as llama.cpp's templates do)."""
    out = []
    tools = request.get("tools")
    for i, message in enumerate(request["messages"]):
        content = message.get("content")
        if not isinstance(content, str):
            content = json.dumps(content, ensure_ascii=False) if content is not None else ""
        if message.get("tool_calls"):
            content += json.dumps(message["tool_calls"], ensure_ascii=False)
        if i == 0 and tools:
            content += "\n\n# Tools\n" + "\n".join(json.dumps(t, ensure_ascii=False) for t in tools)
        out.append(f"<|im_start|>{message['role']}\n{content}<|im_end|>\n")
    return "".join(out) + "<|im_start|>assistant\n"


def reprocessed(requests: list[dict]) -> tuple[int, int, list[int]]:
    """(re-processed tokens, total prompt tokens, per-turn re-processed) for an exact-prefix cache."""
    previous: list[int] = []
    per_turn = []
    total = 0
    for request in requests:
        tokens = encoding.encode(render(request), disallowed_special=())
        common = 0
        for a, b in zip(previous, tokens):
            if a != b:
                break
            common += 1
        per_turn.append(len(tokens) - common)
        total += len(tokens)
        previous = tokens
    return sum(per_turn), total, per_turn


def session(noisy: bool) -> list[dict]:
    roots = [f"/home/alice/.nvm/versions/node/v22.11.0/lib/{PI_SUFFIX}",
             f"/home/alice/.nvm/versions/node/v23.3.0/lib/{PI_SUFFIX}"]
    client = PiClient(memory=["User prefers tabs", "Project uses uv", "Run tests with pytest -x"],
                      extensions={"todo": "- [ ] ship the release"}, session="bench-session", tokens=20000)
    client.sections["docs"] = client.sections["docs"].replace(
        "/home/alice/.nvm/versions/node/v22.11.0/lib/" + PI_SUFFIX, roots[0])
    requests = []
    for turn in range(TURNS):
        if turn == 8 and noisy:
            client.user(NOTIFICATION)
            client.system(removed("todo"))
            client.tool_round()
            client.user("queued: also bump the version")
            client.system(updated("todo", "- [ ] ship the release"))
        elif turn == 8:
            client.user(NOTIFICATION)
            client.tool_round()
            client.user("queued: also bump the version")
        else:
            client.user(f"typed prompt {turn}: continue with the next step")
        if noisy and turn == 5:
            client.memory.append("Deploys are frozen on Fridays")
        if noisy and turn == 11:
            client.memory.remove("Project uses uv")
        if noisy and turn == 14:
            client.sections["docs"] = client.sections["docs"].replace(roots[0], roots[1])
        requests.append(client.request())
        client.tool_round()
        client.assistant("Done with this step.")
    return requests


def main() -> None:
    noisy = session(noisy=True)
    clean = session(noisy=False)
    store = MemoryStore(100, 3600)
    stabilizer = Stabilizer(Settings(path_check="trusted", stable_path="/srv/pi-home"), store=store)
    stabilized = [stabilizer.stabilize_sync(copy.deepcopy(r), target=Target(provider="openai")) for r in noisy]
    without, total_without, turns_without = reprocessed(noisy)
    with_plugin, total_with, turns_with = reprocessed(stabilized)
    limit, total_clean, turns_clean = reprocessed(clean)
    journal_bytes = store.journal_bytes()[0]
    texts = sum(len(t) for t in store.snapshot()[1].values())
    result = {
        "turns": TURNS,
        "prompt_tokens_last_turn": len(encoding.encode(render(noisy[-1]), disallowed_special=())),
        "reprocessed_without_plugin": without,
        "reprocessed_with_plugin": with_plugin,
        "reprocessed_stable_client": limit,
        "per_turn_without": turns_without,
        "per_turn_with": turns_with,
        "per_turn_stable_client": turns_clean,
        "journal_bytes": journal_bytes,
        "shared_text_bytes": texts,
        "drift_events": stabilizer.stats["drift"],
    }
    out = ROOT / "bench" / "results" / "session_cost.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{TURNS}-turn pi-like session, ~{result['prompt_tokens_last_turn']} prompt tokens at the last turn (cl100k_base)")
    print(f"re-processed tokens without plugin: {without:>8}")
    print(f"re-processed tokens with plugin:    {with_plugin:>8}  ({with_plugin / limit:.3f}x the stable client)")
    print(f"re-processed tokens, stable client: {limit:>8}")
    print(f"journal: {journal_bytes} bytes per session; section texts (shared by sessions): {texts} bytes")
    print(f"written to {out}")


if __name__ == "__main__":
    main()
