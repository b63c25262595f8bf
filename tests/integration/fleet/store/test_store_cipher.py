"""Prompt text at rest against a real redis-server: with a key, nothing Redis holds contains prompt
text (and without one it does, so the check can fail); a wrong key degrades to local state with a
clear log line and never fails a call; a key rotation across two gateway processes keeps every
session's bytes. (The cipher itself: tests/unit/fleet/store/test_store_cipher.py.)
"""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import pytest
import redis

from harness.sessions import resume_session_requests as _session_requests
from litellm_prefix.fleet.store.cipher import KEY_ENV, OLD_KEYS_ENV
from tests.integration.fleet.store.test_store import RESUME_SCRIPT
from tests.support import ROOT
from tests.unit.fleet.store.test_store import _redis_stabilizer
from tests.unit.fleet.store.test_store_cipher import K1, K2

pytestmark = pytest.mark.anyio


def _everything_in(server) -> str:
    """Every key and value Redis holds, as one text (hashes, strings)."""
    client = redis.Redis.from_url(server.url, decode_responses=True)
    try:
        out = []
        for key in client.scan_iter(count=1000):
            kind = client.type(key)
            out.append(key)
            if kind == "hash":
                out.extend(f"{k}={v}" for k, v in client.hgetall(key).items())
            elif kind == "string":
                out.append(client.get(key))
        return "\n".join(out)
    finally:
        client.close()


def _prompt_substrings(requests) -> list[str]:
    """Distinctive pieces of the session's system prompt and memory (40 characters each)."""
    system = requests[-1]["messages"][0]["content"]
    lines = [line.strip() for line in system.splitlines() if len(line.strip()) >= 40]
    return sorted({line[:40] for line in lines})


async def test_a_redis_dump_holds_no_prompt_text_when_encryption_is_on(redis_server, monkeypatch):
    requests = list(_session_requests())
    pieces = _prompt_substrings(requests)
    assert len(pieces) >= 10
    redis_server.command("FLUSHALL")
    plain = _redis_stabilizer(redis_server.url)
    for request in requests:
        await plain.stabilize(json.loads(json.dumps(request)))
    dump = _everything_in(redis_server)
    assert any(piece in dump for piece in pieces)  # without a key the store holds prompt text

    redis_server.command("FLUSHALL")
    monkeypatch.setenv(KEY_ENV, K1)
    sealed = _redis_stabilizer(redis_server.url)
    outs = [await sealed.stabilize(json.loads(json.dumps(r))) for r in requests]
    dump = _everything_in(redis_server)
    assert [p for p in pieces if p in dump] == []
    assert "Current date" not in dump and " fact" not in dump  # base64 has no spaces
    assert sealed.stats["store_fallbacks"] == 0
    # the same decisions as the plain store: encryption changes nothing a model sees
    redis_server.command("FLUSHALL")
    monkeypatch.delenv(KEY_ENV)
    again = _redis_stabilizer(redis_server.url)
    assert [(await again.stabilize(json.loads(json.dumps(r))))["messages"] for r in requests] == [
        o["messages"] for o in outs]


async def test_a_wrong_key_degrades_to_local_state_with_a_clear_log_line(redis_server, monkeypatch, caplog):
    requests = list(_session_requests())
    redis_server.command("FLUSHALL")
    monkeypatch.setenv(KEY_ENV, K1)
    right = _redis_stabilizer(redis_server.url)
    for request in requests[:4]:
        await right.stabilize(json.loads(json.dumps(request)))
    monkeypatch.setenv(KEY_ENV, K2)  # a gateway configured with another key
    wrong = _redis_stabilizer(redis_server.url)
    caplog.set_level(logging.WARNING, logger="litellm_prefix")
    outs = [await wrong.stabilize(json.loads(json.dumps(r))) for r in requests[4:]]
    assert all(o["messages"] for o in outs)  # every call answered, on local state
    assert wrong.stats["store_fallbacks"] >= 1 and wrong.stats["errors"] == 0
    logged = [r.getMessage() for r in caplog.records if "could not be decrypted" in r.getMessage()]
    assert len(logged) == 1 and KEY_ENV in logged[0] and OLD_KEYS_ENV in logged[0]
    # and a gateway without any key meets sealed values the same way
    monkeypatch.delenv(KEY_ENV)
    keyless = _redis_stabilizer(redis_server.url)
    assert (await keyless.stabilize(json.loads(json.dumps(requests[5]))))["messages"]
    assert keyless.stats["store_fallbacks"] >= 1 and keyless.stats["errors"] == 0


def _key_ids(server) -> set[str]:
    client = redis.Redis.from_url(server.url, decode_responses=True)
    try:
        ids = set()
        for key in client.scan_iter(count=1000):
            values = client.hgetall(key).values() if client.type(key) == "hash" else [client.get(key)]
            ids.update(v.split(":")[1] for v in values if isinstance(v, str) and v.startswith("lpx1:"))
        return ids
    finally:
        client.close()


async def test_rotation_across_two_gateway_processes_keeps_the_bytes(redis_server, monkeypatch):
    """Gateway A writes with K1; gateway B (another process) has K2 as its writing key and K1 as
    an old one: it resumes A's session from Redis with no fallback, sends the bytes A would have
    sent, and what it writes is sealed with K2."""
    requests = list(_session_requests())
    redis_server.command("FLUSHALL")
    monkeypatch.delenv(KEY_ENV, raising=False)
    reference = _redis_stabilizer(redis_server.url)
    expected = [(await reference.stabilize(json.loads(json.dumps(r))))["messages"] for r in requests]

    redis_server.command("FLUSHALL")
    monkeypatch.setenv(KEY_ENV, K1)
    a = _redis_stabilizer(redis_server.url)
    for request in requests[:4]:
        await a.stabilize(json.loads(json.dumps(request)))
    ids_a = _key_ids(redis_server)
    assert len(ids_a) == 1
    env = {**os.environ, KEY_ENV: K2, OLD_KEYS_ENV: K1, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run([sys.executable, "-c", RESUME_SCRIPT, redis_server.url, "4"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == expected[4:]
    assert "could not be decrypted" not in done.stderr
    assert _key_ids(redis_server) - ids_a  # B's saves are sealed with its own key
