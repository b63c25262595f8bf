"""Session affinity through LiteLLM's SDK Router, no proxy (the callback's own check): two recording
upstreams on 127.0.0.1 as the pool's deployments.
"""
from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter

import pytest

from litellm_prefix.settings import Settings
from tests.unit.fleet.test_affinity import request

pytestmark = pytest.mark.anyio


def test_sdk_router_keeps_sessions_on_balanced_deployments(monkeypatch):
    import litellm

    from harness import recording_upstream
    from litellm_prefix.hook import PrefixStabilizer

    servers = [recording_upstream.serve("127.0.0.1", 0, None) for _ in range(2)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    # The Router and the calls copy callbacks into LiteLLM's other lists: restore them all after.
    for name in ("callbacks", "input_callback", "success_callback", "failure_callback",
                 "_async_success_callback", "_async_failure_callback"):
        monkeypatch.setattr(litellm, name, list(getattr(litellm, name)))
    try:
        callback = PrefixStabilizer(Settings(path_check="absolute", session_affinity="always"))
        monkeypatch.setattr(litellm, "callbacks", [callback])
        router = litellm.Router(model_list=[
            # (promptCacheKey: these local servers stand in for OpenAI's API, which reads the key;
            # an openai/ deployment with its own api_base is taken for a self-hosted server otherwise)
            {"model_name": "pool", "model_info": {"id": f"dep-{i}", "litellm_prefix": {"promptCacheKey": True}},
             "litellm_params": {"model": "openai/m", "api_base": f"http://127.0.0.1:{s.server_address[1]}/v1",
                                "api_key": "x"}} for i, s in enumerate(servers)])

        async def run():
            where: dict[int, list[str]] = {i: [] for i in range(8)}
            for turn in range(3):
                for i in range(8):
                    messages = request(i)["messages"]
                    for t in range(turn):
                        messages += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": f"t{t}"}]
                    response = await router.acompletion(model="pool", messages=messages)
                    where[i].append(response._hidden_params["model_id"])
            return where

        where = asyncio.run(run())
        assert all(len(set(v)) == 1 for v in where.values()), where
        assert Counter(v[0] for v in where.values()) == {"dep-0": 4, "dep-1": 4}
        # Every answer reached the placement index through the success callback (LiteLLM runs it
        # as a task after the call returns: wait for the last one): 8 placements, 24 answers.
        for _ in range(100):
            index = asyncio.run(callback.affinity.index("pool"))[0]
            if sum(r["l"] for r in index.replicas.values()) > 31.9:
                break
            time.sleep(0.05)
        assert set(index.replicas) == {"dep-0", "dep-1"} and sum(r["l"] for r in index.replicas.values()) > 31.9
        assert all(r["k"] > 0 for r in index.replicas.values())  # prefilled tokens counted
        bodies = [json.loads(r["body"]) for s in servers for r in s.RequestHandlerClass.state.records]
        assert len(bodies) == 24 and all(b["prompt_cache_key"].startswith("lp-") for b in bodies)
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
