"""The fleet comparison on four real llama.cpp servers, against bench/fleet.py's model of them.

bench/fleet.py simulates placement over replicas with a cache model; this checks the model on
real servers. A small trace from ``fleet.make_trace`` (``--sessions`` sessions of the four agent
kinds, their first ``--turns`` turns, every token count scaled by ``--scale`` so the tiny model
and a 2-core machine cope) is rendered to real chat requests: each kind's head is a system text
and a tool list generated from the kind alone, so sessions of one kind share those bytes
exactly; a session's project context and first prompt make its first user message, then the
trace's answers and prompts. The clients' volatile bytes are left out: every policy sees the
stabilized requests ("placement only" in bench/fleet.py), so only placement differs.

Requests are replayed one at a time, in the order of the trace's send times, the same order
for every policy, each with ``max_tokens`` 1 (the answers in later turns are the trace's, not
the model's). Four llama.cpp servers (``-np`` ``--slots``, ``--cache-ram 0``: each slot keeps one
prompt and reuses its longest common token prefix; harness/llama_server.py) on 127.0.0.1,
restarted before each policy (empty caches). Policies:

- ``plugin``: a real LiteLLM proxy with this plugin, one model group of four deployments and
  the router's ``session_affinity`` check on (config/proxy.fleet.yaml's set-up); clients send no
  session ids; a pause of ``CALLBACK_PAUSE_S`` after each answer lets its success callback reach
  the placement index before the next request (``--via sdk``: the plugin in LiteLLM's SDK
  ``Router`` in this process instead, which waits for the index itself: no proxy to start);
- ``sglang``: bench/fleet.py's SGLang-style cache-aware policy as a client-side router sending
  straight to the servers (its tree keyed by 16-token blocks of the real token ids);
- ``simple-shuffle``: a random replica per request (LiteLLM's default strategy; bench/fleet.py's
  ``SimpleShuffle``, client-side with a fixed seed, so the model draws the same replicas): what
  routing that ignores caches costs on the same servers.

Re-processed tokens = prompt tokens - cached tokens of each answer (llama.cpp's
``timings.prompt_n``), summed. The simulation replays the same requests, in the same order,
with the same two policies (the plugin's through ``placement.choose`` / ``Index`` on the head
blocks ``affinity.head_blocks_of`` takes from the very requests, corrected by cached tokens the
way ``affinity.answered`` does) over ``fleet.SlotEngine`` replicas: llama.cpp's slot selection
(longest common prefix share over ``--slot-prompt-similarity``, else least recently used).
Tokens are the server's own: each request is rendered by ``/apply-template`` and tokenized by
``/tokenize`` on a server of the same model started for that, so the model and the servers count the same units (and the
run checks that every answer's ``prompt_tokens`` equals the model's count).

Time: the replay runs far faster than the trace's clock, so the placement gate's time constants
(active sessions, load decay, idle boundary) are set past the run's length in the proxy and the
model alike: placement is then a function of the request order, as it is in the model.
``placementCacheTokens`` is what a server's slots hold: ``--slots`` times the mean prompt.

Target: the real plugin / SGLang ratio of re-processed tokens within 1.10x of the simulated
one. Also reported: the same requests on bench/fleet.py's vLLM-like block engine (as many
tokens per replica as the slots hold), where the engine, not the router, would differ. Writes
bench/results/fleet_real.json (one entry per seed).

    .venv/bin/python -m bench.fleet_real [--sessions 16] [--turns 4] [--scale 0.1] [--slots 4] [--seed 1 2 3]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import httpx

from bench import fleet
from harness.llama_server import LlamaServer, server_version
from harness.procs import Proxy, free_port
from litellm_prefix.fleet import affinity, placement

ROOT = Path(__file__).resolve().parent.parent

REPLICAS = ["replica-a", "replica-b", "replica-c", "replica-d"]
RESULTS = ROOT / "bench" / "results" / "fleet_real.json"
TARGET = 1.10
FOREVER = 1e9  # seconds: a gate time constant past any run's length
TOOLS_PER_KIND = 4
TOOL_SHARE = 0.3  # of a kind's head, in its tool descriptions
CALLBACK_PAUSE_S = 0.1  # after a proxy answer: its success callback (the placement index) lands first
POLICIES = ("plugin", "sglang", "simple-shuffle")
CLIENT_SIDE = {"sglang": fleet.SGLang, "simple-shuffle": fleet.SimpleShuffle}  # routed by this process

# -- the requests --------------------------------------------------------------------------

_SYLLABLES = [o + v + c for o in ("", "b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "st", "tr")
              for v in ("a", "e", "i", "o", "u", "ea", "ou") for c in ("", "", "n", "r", "s", "t", "ck")]


def text(seed: object, tokens: int) -> str:
    """Deterministic agent-like prose of about ``tokens`` tokens of the tiny model, from ``seed``."""
    rng = random.Random(repr(seed))
    words, chars = [], 0
    while chars < tokens * 3:  # about 3 characters a token; the run counts the real tokens (``tokenize``)
        word = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 3)))
        words.append(word + ("." if rng.random() < 0.08 else ""))
        chars += len(word) + 1
    return " ".join(words)


def head(kind_index: int, scale: float) -> tuple[str, list[dict]]:
    """A kind's system text and tools: the same bytes for every session of the kind."""
    kind = fleet.KINDS[kind_index]
    tokens = int(kind.head_tokens * scale)
    tools = [{"type": "function", "function": {
        "name": f"{kind.name.replace('-', '_')}_tool_{i}",
        "description": text(("tool", kind_index, i), int(tokens * TOOL_SHARE / TOOLS_PER_KIND)),
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}
        for i in range(TOOLS_PER_KIND)]
    return f"You are {kind.name}. " + text(("head", kind_index), int(tokens * (1 - TOOL_SHARE))), tools


def request(s: fleet.Session, turn: int, scale: float) -> dict:
    """The chat request of turn ``turn``: the kind's head, the project context and first prompt,
    then the trace's answers and prompts (the pieces of ``Session.pieces(turn, stabilized=True)``)."""
    system, tools = head(fleet.KINDS.index(s.kind), scale)
    messages = [{"role": "system", "content": system}]
    for t in range(turn + 1):
        prompt = text(("user", s.sid, t), max(1, int(s.turns[t].user_tokens * scale)))
        if t == 0:
            prompt = text(("project", s.sid), int(s.project_tokens * scale)) + "\n\n" + prompt
        messages.append({"role": "user", "content": prompt})
        if t < turn:
            messages.append({"role": "assistant",
                             "content": text(("answer", s.sid, t), max(1, int(s.turns[t].output_tokens * scale)))})
    return {"messages": messages, "tools": tools, "max_tokens": 1, "temperature": 0}


@dataclass
class Step:
    session: fleet.Session
    turn: int
    body: dict
    tokens: tuple = ()


def steps(sessions: int, turns: int, seed: int, scale: float, horizon_s: float) -> list[Step]:
    """Every request of the trace, in the order of the clients' send times."""
    trace = fleet.make_trace(sessions, seed, horizon_s)
    order = sorted((s.turns[t].at, s.sid, t) for s in trace for t in range(min(turns, len(s.turns))))
    by_id = {s.sid: s for s in trace}
    return [Step(by_id[sid], t, request(by_id[sid], t, scale)) for _, sid, t in order]


def tokenize(url: str, all_steps: list[Step]) -> None:
    """Each step's prompt tokens as the server counts them: its chat template, then its tokenizer."""
    with httpx.Client(base_url=url, timeout=60) as client:
        for step in all_steps:
            prompt = client.post("/apply-template", json=step.body).raise_for_status().json()["prompt"]
            step.tokens = tuple(client.post("/tokenize", json={"content": prompt, "add_special": True,
                                                               "parse_special": True})
                                .raise_for_status().json()["tokens"])


def token_keys(tokens: tuple) -> list[int]:
    """Chained keys of the full 16-token blocks of a token sequence (bench/fleet.py's block keys)."""
    keys, chain = [], 0
    for start in range(0, len(tokens) - fleet.BLOCK + 1, fleet.BLOCK):
        chain = hash((chain, tokens[start:start + fleet.BLOCK]))
        keys.append(chain)
    return keys


# -- the policies, as the model runs them and as the real run routes ------------------------


def gate(cache_tokens: int) -> placement.Gate:
    """The plugin's defaults, with the time constants past the run (see the module docstring)."""
    return placement.Gate(active_seconds=FOREVER, load_seconds=FOREVER, idle_seconds=FOREVER,
                          cache_tokens=cache_tokens)


def gate_env(g: placement.Gate) -> dict[str, str]:
    return {"LITELLM_PREFIX_PLACEMENT_ACTIVE_SECONDS": str(g.active_seconds),
            "LITELLM_PREFIX_PLACEMENT_LOAD_SECONDS": str(g.load_seconds),
            "LITELLM_PREFIX_PLACEMENT_IDLE_SECONDS": str(g.idle_seconds),
            "LITELLM_PREFIX_PLACEMENT_CACHE_TOKENS": str(g.cache_tokens)}


class GatewayPlugin(fleet.Plugin):
    """bench/fleet.py's plugin policy on real requests: head blocks as ``affinity.head_blocks_of``
    takes them from the request, the index corrected as ``affinity.answered`` does."""

    def __init__(self, replicas, rng, engine_tokens, heads: dict[int, tuple[str, ...]]) -> None:
        super().__init__(replicas, rng, engine_tokens, gate=gate(engine_tokens))
        self.request_heads = heads

    def _head(self, s):
        return self.request_heads[s.sid]

    def answered(self, s, turn, replica, keys, cached, tokens):
        blocks = self._head(s)
        self.index.answered(replica, blocks, tokens - cached, self.now, str(s.sid),
                            cached * affinity.CHARS_PER_TOKEN // placement.BLOCK_CHARS)


def policy(name: str, all_steps: list[Step], cache_tokens: int) -> fleet.Policy:
    """A fresh router: the client-side ones from bench/fleet.py (a fixed seed: the model and the
    real run draw the same random replicas), or the plugin's placement."""
    if name in CLIENT_SIDE:
        return CLIENT_SIDE[name](REPLICAS, random.Random(0), cache_tokens)
    heads = {st.session.sid: affinity.head_blocks_of(st.body) for st in all_steps if st.turn == 0}
    return GatewayPlugin(REPLICAS, random.Random(0), cache_tokens, heads)


class BlockEngine(fleet.Engine):
    """bench/fleet.py's vLLM-like engine (16-token blocks, LRU) on token sequences, for contrast."""

    def run(self, tokens: tuple) -> int:
        return super().run(token_keys(tokens), len(tokens))


def simulate(name: str, all_steps: list[Step], slots: int, cache_tokens: int, blocks: bool = False) -> dict:
    """The steps over four ``SlotEngine`` replicas (``blocks``: bench/fleet.py's vLLM-like
    ``Engine`` of ``cache_tokens`` each instead), routed by the policy ``name``."""
    chosen = policy(name, all_steps, cache_tokens)
    engines = {r: BlockEngine(cache_tokens) if blocks else fleet.SlotEngine(slots) for r in REPLICAS}
    idle = {r: 0 for r in REPLICAS}
    out = Tally()
    for i, st in enumerate(all_steps):
        chosen.now = float(i)
        keys = token_keys(st.tokens)
        replica = chosen.route(st.session, st.turn, keys, idle)
        cached = engines[replica].run(st.tokens)
        chosen.answered(st.session, st.turn, replica, keys, cached, len(st.tokens))
        out.add(st, replica, len(st.tokens), cached)
    return out.summary()


class Tally:
    def __init__(self) -> None:
        self.reprocessed = self.prompt = self.mismatches = self.failures = 0
        self.placements: list[str] = []
        self.first: dict[int, str] = {}

    def add(self, st: Step, replica: str, prompt: int, cached: int) -> None:
        self.reprocessed += prompt - cached
        self.prompt += prompt
        self.mismatches += prompt != len(st.tokens)
        self.placements.append(replica)
        self.first.setdefault(st.session.sid, replica)

    def failed(self) -> None:
        self.failures += 1
        self.placements.append("failed")

    def summary(self) -> dict:
        return {"reprocessed": self.reprocessed, "prompt_tokens": self.prompt,
                "requests_per_replica": [self.placements.count(r) for r in REPLICAS],
                "sessions_per_replica": [Counter(self.first.values())[r] for r in REPLICAS],
                "prompt_token_mismatches": self.mismatches, "failures": self.failures,
                "placements": self.placements}


def colocation_agreement(all_steps: list[Step], a: list[str], b: list[str]) -> float:
    """The share of pairs of requests that two runs put on one replica alike (together in both, or
    apart in both): 1.0 when the runs split the requests the same way, whatever the replicas' names
    (the plugin breaks ties between equal replicas by a hash of its own session key)."""
    pairs = same = 0
    for i in range(len(all_steps)):
        for j in range(i + 1, len(all_steps)):
            pairs += 1
            same += (a[i] == a[j]) == (b[i] == b[j])
    return round(same / max(1, pairs), 3)


# -- the real run --------------------------------------------------------------------------


def usage_of(answer: dict) -> tuple[int, int]:
    usage = answer.get("usage") or {}
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    return int(usage.get("prompt_tokens") or 0), int(cached)


def replay_client_side(name: str, urls: dict[str, str], all_steps: list[Step], cache_tokens: int) -> dict:
    """A bench/fleet.py policy (``CLIENT_SIDE``) as a client-side router, straight to the servers."""
    router = policy(name, all_steps, cache_tokens)
    idle = {r: 0 for r in REPLICAS}
    out = Tally()
    with httpx.Client(timeout=600) as client:
        for st in all_steps:
            keys = token_keys(st.tokens)
            replica = router.route(st.session, st.turn, keys, idle)
            answer = client.post(f"{urls[replica]}/v1/chat/completions", json=st.body)
            if answer.status_code != 200:
                out.failed()
                continue
            prompt, cached = usage_of(answer.json())
            router.answered(st.session, st.turn, replica, keys, cached, prompt)
            out.add(st, replica, prompt, cached)
    return out.summary()


def replay_proxy(proxy: Proxy, all_steps: list[Step]) -> dict:
    """Through the proxy with the plugin: the router and the plugin place each request."""
    out = Tally()
    for st in all_steps:
        answer = proxy.client.post("/v1/chat/completions", json={**st.body, "model": "local"}, timeout=600)
        if answer.status_code != 200:
            out.failed()
            print(f"  plugin: session {st.session.sid} turn {st.turn}: HTTP {answer.status_code}", flush=True)
            continue
        prompt, cached = usage_of(answer.json())
        out.add(st, answer.headers.get("x-litellm-model-id", "?"), prompt, cached)
        time.sleep(CALLBACK_PAUSE_S)
    return out.summary()


def replay_sdk(urls: dict[str, str], all_steps: list[Step], g: placement.Gate) -> dict:
    """The same in-process: LiteLLM's SDK ``Router`` with the plugin's callback (``sessionAffinity:
    always``), no proxy to start (the test's quick version). Before each request, the previous
    answer has reached the placement index (LiteLLM runs the success callback as a task after the
    call returns): its request count has gone up by one."""
    import asyncio

    import litellm

    from harness.procs import sdk_callbacks
    from litellm_prefix.hook import PrefixStabilizer
    from litellm_prefix.settings import Settings

    handler = PrefixStabilizer(Settings(
        session_affinity="always", placement_active_seconds=g.active_seconds, placement_load_seconds=g.load_seconds,
        placement_idle_seconds=g.idle_seconds, placement_cache_tokens=g.cache_tokens))
    out = Tally()

    async def requests_seen() -> float:
        index = (await handler.affinity.index("local"))[0]
        return sum(r["l"] for r in index.replicas.values())

    async def replay() -> None:
        router = litellm.Router(model_list=proxy_config(urls)["model_list"])
        for st in all_steps:
            before = await requests_seen()
            try:
                answer = await router.acompletion(model="local", **st.body)
            except Exception:  # any failure: counted, and the run goes on
                out.failed()
                continue
            expected = before + (2 if st.turn == 0 else 1) - 0.5  # a new session's placement, then the answer
            for _ in range(500):
                if await requests_seen() >= expected:
                    break
                await asyncio.sleep(0.01)
            prompt, cached = usage_of(answer.model_dump())
            out.add(st, answer._hidden_params.get("model_id", "?"), prompt, cached)

    with sdk_callbacks(handler):
        asyncio.run(replay())
    return out.summary()


def proxy_config(urls: dict[str, str]) -> dict:
    """config/proxy.fleet.yaml's set-up: one model group, four deployments with stable ids."""
    return {"model_list": [{"model_name": "local",
                            "litellm_params": {"model": "openai/local", "api_base": f"{url}/v1", "api_key": "none"},
                            "model_info": {"id": replica}} for replica, url in urls.items()],
            "litellm_settings": {"callbacks": ["litellm_prefix.proxy_handler"]},
            "router_settings": {"optional_pre_call_checks": ["session_affinity"]},
            "general_settings": {"master_key": "os.environ/LITELLM_MASTER_KEY"}}


def start_servers(ports: list[int], work: Path, slots: int, ctx: int, threads: int) -> list[LlamaServer]:
    servers: list[LlamaServer] = []
    try:
        for port in ports:
            servers.append(LlamaServer(port, work / f"llama-{port}.log", n_parallel=slots, ctx_per_slot=ctx,
                                       threads=threads, n_predict=1))
    except BaseException:
        for server in servers:
            server.stop()
        raise
    return servers


def distinct_ports(n: int) -> list[int]:
    ports: list[int] = []
    while len(ports) < n:
        if (port := free_port()) not in ports:
            ports.append(port)
    return ports


def run(sessions: int = 16, turns: int = 4, seed: int = 1, scale: float = 0.1, slots: int = 4,
        horizon_s: float = 120.0, threads: int | None = None, work: Path | None = None,
        via: str = "proxy", policies: tuple[str, ...] = POLICIES, log=print) -> dict:
    work = work or Path(tempfile.mkdtemp(prefix="litellm-prefix-fleet-real-"))
    threads = threads or max(1, os.cpu_count() or 1)
    all_steps = steps(sessions, turns, seed, scale, horizon_s)
    # fresh ports for each policy's servers: a restarted server would wait out its port's TIME_WAIT
    fresh = distinct_ports(len(REPLICAS) * len(policies))
    ports = {name: fresh[i * len(REPLICAS):(i + 1) * len(REPLICAS)] for i, name in enumerate(policies)}
    urls = {name: dict(zip(REPLICAS, (f"http://127.0.0.1:{p}" for p in ports[name]))) for name in policies}
    with LlamaServer(free_port(), work / "tokenizer.log", n_parallel=1, ctx_per_slot=512, threads=1,
                     n_predict=1) as tokenizer:
        tokenize(tokenizer.url, all_steps)
    longest = max(len(st.tokens) for st in all_steps)
    cache_tokens = slots * round(sum(len(st.tokens) for st in all_steps) / len(all_steps))
    ctx = 256 * (longest // 256 + 2)  # each slot fits the longest prompt
    proxy: Proxy | None = None
    servers: list[LlamaServer] = []
    real: dict[str, dict] = {}
    try:
        if via == "proxy":
            proxy = Proxy(work, proxy_config(urls["plugin"]), gate_env(gate(cache_tokens)), name="plugin")
            proxy.wait_ready()
        for name in policies:
            for server in servers:
                server.stop()
            servers = start_servers(ports[name], work, slots, ctx, threads)  # empty caches
            started = time.perf_counter()
            if name in CLIENT_SIDE:
                real[name] = replay_client_side(name, urls[name], all_steps, cache_tokens)
            elif proxy is not None:
                real[name] = replay_proxy(proxy, all_steps)
            else:
                real[name] = replay_sdk(urls[name], all_steps, gate(cache_tokens))
            real[name]["seconds"] = round(time.perf_counter() - started, 1)
            log(f"real {name:14} re-processed {real[name]['reprocessed']:>8,} of {real[name]['prompt_tokens']:>8,}"
                f"  sessions per replica {real[name]['sessions_per_replica']}  {real[name]['seconds']} s")
    finally:
        for server in servers:
            server.stop()
        if proxy is not None:
            proxy.stop()
    sim = {name: simulate(name, all_steps, slots, cache_tokens) for name in policies}
    for name in policies:
        real[name]["colocation_as_simulated"] = colocation_agreement(all_steps, real[name]["placements"],
                                                                     sim[name]["placements"])
        log(f"sim  {name:14} re-processed {sim[name]['reprocessed']:>8,} of {sim[name]['prompt_tokens']:>8,}"
            f"  sessions per replica {sim[name]['sessions_per_replica']}")
    vllm = {name: simulate(name, all_steps, slots, cache_tokens, blocks=True) for name in policies}
    real_ratio = real["plugin"]["reprocessed"] / max(1, real["sglang"]["reprocessed"])
    sim_ratio = sim["plugin"]["reprocessed"] / max(1, sim["sglang"]["reprocessed"])
    quotient = real_ratio / sim_ratio if sim_ratio else float("inf")
    for tables in (real, sim, vllm):
        for row in tables.values():
            row["reprocessed_vs_sglang"] = round(row["reprocessed"] / max(1, tables["sglang"]["reprocessed"]), 3)
    for tables in (real, sim, vllm):
        for row in tables.values():
            row.pop("placements")
    result = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}",
        "server": f"llama.cpp server ({server_version()}), tiny random llama, -np {slots}, four servers",
        "plugin_via": "LiteLLM proxy" if via == "proxy" else "LiteLLM SDK Router",
        "sessions": sessions, "turns": turns, "seed": seed, "scale": scale, "horizon_s": horizon_s,
        "requests": len(all_steps), "slots": slots, "placement_cache_tokens": cache_tokens,
        "real": real, "simulated": sim, "simulated_vllm_like": vllm,
        "plugin_vs_sglang": {"real": round(real_ratio, 3), "simulated": round(sim_ratio, 3),
                             "real_over_simulated": round(quotient, 3),
                             "simulated_vllm_like": round(vllm["plugin"]["reprocessed"]
                                                          / max(1, vllm["sglang"]["reprocessed"]), 3)},
        "within_target": 1 / TARGET <= quotient <= TARGET}
    log(f"plugin / sglang re-processed: real {real_ratio:.3f}, simulated {sim_ratio:.3f}, "
        f"real / simulated {quotient:.3f} ({'within' if result['within_target'] else 'OUTSIDE'} {TARGET}x); "
        f"on the vLLM-like model {result['plugin_vs_sglang']['simulated_vllm_like']:.3f}")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=16)
    parser.add_argument("--turns", type=int, default=4, help="each session's first turns")
    parser.add_argument("--seed", type=int, nargs="+", default=[1])
    parser.add_argument("--scale", type=float, default=0.1, help="every token count of the trace times this")
    parser.add_argument("--slots", type=int, default=4, help="slots per llama.cpp server (-np)")
    parser.add_argument("--horizon", type=float, default=120.0, help="sessions arrive over this many trace seconds")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--via", choices=("proxy", "sdk"), default="proxy",
                        help="the plugin in a real LiteLLM proxy, or in an SDK Router in this process")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    results = []
    for seed in args.seed:
        print(f"seed {seed}: {args.sessions} sessions, {args.turns} turns, scale {args.scale}, "
              f"four servers of {args.slots} slots", flush=True)
        results.append(run(args.sessions, args.turns, seed, args.scale, args.slots, args.horizon, args.threads,
                           via=args.via, log=lambda line: print(line, flush=True)))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written to {args.out}")
    return 0 if all(r["within_target"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
