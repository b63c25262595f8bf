"""Session affinity and provider cache hints through two real LiteLLM proxy replicas.

Two recording upstreams serve one model group ("pool", two deployments), a third serves
the hint targets (an OpenAI-compatible and an Anthropic deployment). Both proxies run the
plugin with its store in one real Redis and the router's one documented setting
(``optional_pre_call_checks: ["session_affinity"]``). Clients send no session id.

Tenants: virtual keys need the proxy's database, which these tests do not run; LiteLLM's
documented ``general_settings.custom_auth`` stands in: it maps each bearer token to its own
API-key hash and team, exactly the fields a virtual key gives the plugin.
"""
from __future__ import annotations

import json
from collections import Counter, defaultdict

import pytest

from harness.procs import Proxy, Upstream, log_records
from litellm_prefix.request.rules.hints import count_marks

TENANT_AUTH = '''
import hashlib
from litellm.proxy._types import UserAPIKeyAuth


async def user_api_key_auth(request, api_key: str) -> UserAPIKeyAuth:
    digest = hashlib.sha256(api_key.encode()).hexdigest()
    return UserAPIKeyAuth(api_key=digest, team_id="team-" + digest[:8])
'''
TENANT = "sk-tenant-one-0123456789abcdef"
OTHER_TENANT = "sk-other-tenant-0123456789abcdef"
SYSTEM = "You are a coding agent. " + "Follow the repository conventions carefully. " * 120  # past 1,024 tokens: marked
TOOLS = [{"type": "function", "function": {"name": name, "description": f"{name} a file",
                                           "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}
         for name in ("bash", "edit", "read")]


def _config(pool, hints, spare) -> dict:
    return {
        "model_list": [
            *({"model_name": "pool",
               "litellm_params": {"model": "openai/pool-model", "api_base": f"{up.url}/v1", "api_key": "dummy"},
               "model_info": {"id": name}} for name, up in pool.items()),
            # A pool of its own for the test that stops an upstream: the others find theirs untouched.
            *({"model_name": "spare-pool",
               "litellm_params": {"model": "openai/pool-model", "api_base": f"{up.url}/v1", "api_key": "dummy"},
               "model_info": {"id": name}} for name, up in spare.items()),
            {"model_name": "chat-model",
             "litellm_params": {"model": "openai/upstream-chat", "api_base": f"{hints.url}/v1", "api_key": "dummy"},
             # a local stand-in for OpenAI's API: an openai/ deployment elsewhere gets no key unless it asks
             "model_info": {"litellm_prefix": {"promptCacheKey": True}}},
            {"model_name": "claude-model",
             "litellm_params": {"model": "anthropic/claude-sonnet-4-5", "api_base": hints.url, "api_key": "dummy"}},
        ],
        "litellm_settings": {"callbacks": ["litellm_prefix.proxy_handler"]},
        "router_settings": {"optional_pre_call_checks": ["session_affinity"]},  # retries: the default 2
        "general_settings": {"master_key": "os.environ/LITELLM_MASTER_KEY",
                             "custom_auth": "tenant_auth.user_api_key_auth"},
    }


@pytest.fixture(scope="module")
def stack(e2e_dir, redis_server):
    base = e2e_dir / "affinity"
    ups = {}
    for name in ("up-a", "up-b", "spare-a", "spare-b", "hints"):
        (base / name).mkdir(parents=True)
        ups[name] = Upstream(base / name)
    pool = {name: ups[name] for name in ("up-a", "up-b")}
    spare = {name: ups[name] for name in ("spare-a", "spare-b")}
    proxies = []
    try:
        for name in ("affinity-a", "affinity-b"):
            workdir = base / name
            workdir.mkdir()
            (workdir / "tenant_auth.py").write_text(TENANT_AUTH)
            px = Proxy(base, _config(pool, ups["hints"], spare), {
                "LITELLM_PREFIX_STORE": redis_server.url,
                "LITELLM_PREFIX_STORE_TIMEOUT_MS": "500",
                "LITELLM_PREFIX_LOG": str(workdir / "prefix.jsonl"),
                "LITELLM_PREFIX_PATH_CHECK": "absolute",
            }, name=name)
            proxies.append(px)
        for px in proxies:
            px.wait_ready()
        yield {"proxies": proxies, "pool": pool, "spare": spare, "hints": ups["hints"]}
    finally:
        for px in proxies:
            px.stop()
        for up in ups.values():
            up.stop()


def _session(i: int, turns: int) -> list[dict]:
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"task {i}: fix the failing test"}]
    for t in range(turns):
        messages += [{"role": "assistant", "content": f"step {t} done"}, {"role": "user", "content": f"continue {t}"}]
    return messages


def _where(pool: dict[str, Upstream]) -> dict[str, list[str]]:
    """Which upstream got each session's requests, in order (sessions told apart by their first user message)."""
    seen: dict[str, list[str]] = defaultdict(list)
    records = [(name, r) for name, up in pool.items() for r in up.take()]
    records.sort(key=lambda item: len(json.loads(item[1]["body"])["messages"]))
    for name, record in records:
        body = json.loads(record["body"])
        first_user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        seen[first_user].append(name)
    return seen


def test_every_turn_of_each_session_lands_on_one_upstream_and_both_are_used(stack):
    proxy, pool = stack["proxies"][0], stack["pool"]
    for up in pool.values():
        up.take()
    for turn in range(4):
        for i in range(6):
            proxy.post("/v1/chat/completions", {"model": "pool", "messages": _session(i, turn), "tools": TOOLS})
    where = _where(pool)
    assert len(where) == 6 and all(len(turns) == 4 for turns in where.values())
    assert all(len(set(turns)) == 1 for turns in where.values()), where
    placed = Counter(turns[0] for turns in where.values())
    assert set(placed) == set(pool) and max(placed.values()) <= 4, placed  # fair share 3, + 25% rounds to 4


def test_two_replicas_sharing_redis_send_a_sessions_alternating_turns_to_one_upstream(stack):
    proxies, pool = stack["proxies"], stack["pool"]
    for up in pool.values():
        up.take()
    for turn in range(6):
        for i in range(100, 104):
            # one tenant on both replicas (each test proxy has its own random master key)
            proxies[(turn + i) % 2].post("/v1/chat/completions", {"model": "pool", "messages": _session(i, turn)},
                                         authorization=f"Bearer {TENANT}")
    where = _where(pool)
    assert len(where) == 4
    assert all(len(turns) == 6 and len(set(turns)) == 1 for turns in where.values()), where
    assert len({turns[0] for turns in where.values()}) == 2  # new sessions spread over both


def test_prompt_cache_key_is_stable_per_session_and_differs_between_tenants(stack):
    proxy, hints = stack["proxies"][0], stack["hints"]
    hints.take()
    for turn in range(3):
        proxy.post("/v1/chat/completions", {"model": "chat-model", "messages": _session(7, turn), "tools": TOOLS})
    proxy.post("/v1/chat/completions", {"model": "chat-model", "messages": _session(7, 0)},
               authorization=f"Bearer {OTHER_TENANT}")
    proxy.post("/v1/chat/completions", {"model": "chat-model", "messages": _session(8, 0),
                                        "prompt_cache_key": "client-own-key"})
    bodies = [json.loads(r["body"]) for r in hints.take()]
    keys = [b.get("prompt_cache_key") for b in bodies]
    assert keys[0] and keys[0].startswith("lp-") and keys[0] == keys[1] == keys[2], keys
    assert keys[3] and keys[3] != keys[0]  # same conversation, other tenant: another key
    assert keys[4] == "client-own-key"  # a client's own key is never replaced
    assert "task 7" not in keys[0]  # a hash, never the session's text


def _anthropic_request(turns: int, client_mark: bool = False) -> dict:
    messages = [{"role": "user", "content": "task: fix the failing test"}]
    for t in range(turns):
        messages += [{"role": "assistant", "content": [{"type": "text", "text": f"step {t}"}]},
                     {"role": "user", "content": [{"type": "text", "text": f"continue {t}"}]}]
    if client_mark:
        messages[0] = {"role": "user", "content": [{"type": "text", "text": "task: fix the failing test",
                                                    "cache_control": {"type": "ephemeral"}}]}
    return {"model": "claude-model", "max_tokens": 64, "system": SYSTEM, "messages": messages,
            "tools": [{"name": t["function"]["name"], "description": t["function"]["description"],
                       "input_schema": t["function"]["parameters"]} for t in TOOLS]}


def test_anthropic_breakpoints_reach_the_upstream_and_client_marks_are_left_alone(stack):
    proxy, hints = stack["proxies"][0], stack["hints"]
    hints.take()
    for turns in range(3):
        proxy.post("/v1/messages", _anthropic_request(turns))
    proxy.post("/v1/messages", _anthropic_request(2, client_mark=True))
    proxy.post("/v1/chat/completions", {"model": "claude-model", "messages": _session(9, 1), "tools": TOOLS})
    bodies = [json.loads(r["body"]) for r in hints.take()]
    assert [b is not None for b in bodies] == [True] * 5
    for turns, body in enumerate(bodies[:3]):
        # the end of the head in Anthropic's cache order (tools -> system -> messages) ...
        assert body["system"][-1]["text"] == SYSTEM and body["system"][-1]["cache_control"] == {"type": "ephemeral"}
        assert all("cache_control" not in tool for tool in body["tools"])
        # ... the end of the previous turn (right before the newest answer) and the newest message; nothing else
        assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
        marked = [i for i, m in enumerate(body["messages"]) if "cache_control" in json.dumps(m)]
        assert marked == ([len(body["messages"]) - 3] if turns else []) + [len(body["messages"]) - 1]
        assert count_marks(body) == 2 + (turns > 0)
    # the head's bytes (tools, system) are the same on every turn: the cache entry they end is reused
    assert len({json.dumps([b["tools"], b["system"]]) for b in bodies[:3]}) == 1
    client = bodies[3]
    assert count_marks(client) == 1 and client["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert isinstance(client["system"], str) or all("cache_control" not in b for b in client["system"])
    translated = bodies[4]  # chat completions to an Anthropic deployment: the same marks after translation
    assert translated["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert translated["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert count_marks(translated) == 3


def test_a_stopped_upstream_moves_its_sessions_once_and_no_call_fails(stack):
    """Stops one upstream of a pool only this test uses: the other tests, run before or after it,
    find their pool as the module's fixture built it."""
    proxy, pool = stack["proxies"][0], dict(stack["spare"])
    for up in pool.values():
        up.take()
    sessions = range(200, 206)
    for turn in range(2):
        for i in sessions:
            proxy.post("/v1/chat/completions", {"model": "spare-pool", "messages": _session(i, turn)})
    before = _where(pool)
    home = {first: turns[0] for first, turns in before.items()}
    assert set(home.values()) == set(pool)
    stopped = "spare-a"
    pool[stopped].stop()
    survivor = {name: up for name, up in pool.items() if name != stopped}
    for turn in range(2, 5):
        for i in sessions:  # Proxy.post asserts every call answers 200
            proxy.post("/v1/chat/completions", {"model": "spare-pool", "messages": _session(i, turn)})
    after = _where(survivor)
    assert len(after) == 6 and all(len(turns) == 3 for turns in after.values())
    events = [record for px in stack["proxies"] for record in log_records(px.log.parent / "prefix.jsonl")]
    moves = [e for e in events if e["event"] == "affinity_move" and e["from"].startswith("spare-")]
    moved = [first for first, name in home.items() if name == stopped]
    assert moved and len(moves) == len(moved), (moves, moved)  # each moved once, then stayed
    assert all((e["from"], e["to"], e["expected_cache_miss"]) == ("spare-a", "spare-b", True) for e in moves)
