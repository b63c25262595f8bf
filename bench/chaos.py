"""Faults under load: the plugin against the same fault without it, while sessions are in flight.

The load benchmark's pi-like agent sessions (``bench/load.py``: 10-30k-token prompts, a memory
write, a notification run that flips an extension section, a memory deletion) run through two
gateways with the plugin (``store: redis://``, journals and pins in one Redis) and, at the same
time, the same number of sessions through two gateways without it (LiteLLM's own
``session_affinity`` with the client's ``x-session-id``). Every gateway serves one model group
of two deployments (two recording upstreams, "engines"; ``timeout`` 4 s, ``num_retries`` 2).
Each session's turns alternate between its two gateways (a client-side round robin that, like
a load balancer, sends a request to the other gateway when one refuses the connection). A
request the gateway answers with an error is retried by the agent (twice, 1 s apart); a turn
fails when all three tries fail.

Each fault is injected at turn 3 of fresh sessions, lasts its window while the waves go on,
and is followed by at least two turns:

- ``redis``: Redis stopped for ``--redis-s`` (10) seconds, then restarted empty (a Redis that
  keeps nothing on disk: every journal and pin is gone);
- ``redis-persisted``: the same, Redis saving its data before it stops and loading it again;
- ``engine``: an engine killed for ``--window-s`` seconds, then restarted;
- ``gateway``: one gateway of each pair restarted (stopped, started, ready again);
- ``upstream-429``, ``upstream-500``, ``upstream-slow``: an engine answers 429, 500, or only
  after 8 s (over the 4 s timeout), for ``--window-s`` seconds.

The engine that fails is the one that answered more of the plugin's sessions on the turn
before the fault (then more sessions in all) (the plugin avoids a deployment that just failed for 30 s, so a fresh session of the
next fault may all sit on one engine: the other one failing would spare them); the table
gives how many sessions of each side it was serving.

Per fault and side, read from what the engines recorded and what the clients got:

- **failed turns**: turns whose three tries all failed, and the failed tries;
- **lost**: answered turns whose messages (user, assistant, tool: notes taken out) did not reach
  an engine as the client sent them;
- **head changes**: per session, turns whose upstream head (system message and tools) differs
  from the turn before. With the plugin a session sends one head from its first turn to its
  last on a quiet gateway (``bench/load.py``, ``heads stable``), so each change here is the
  fault's; without it the client's own memory writes change the head twice (turns 2 and 6),
  shown for reference. ``off-head turns``: turns whose head differs from the session's first;
- **moves**: per session, turns answered by another deployment than the turn before.

Guarantees (checked for every fault, printed as ``ok`` or ``FAILED``): no more failed turns
with the plugin than without; nothing lost; with the plugin at most one exception per session
(one off-head turn, or one head change that stays: a re-seed); at most one move per session.

    .venv/bin/python -m bench.chaos [--sessions 32] [--faults redis engine ...] [--out FILE]

The numbers go to bench/results/chaos.json. ``tests/integration/litellm/test_chaos.py`` runs a short form.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import re
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench.load import Session, head_of
from harness.procs import Proxy, RedisServer, Upstream, stop
from litellm_prefix.request.rules.notes import unfolded

ROOT = Path(__file__).resolve().parent.parent
FAULTS = ("redis", "redis-persisted", "engine", "gateway", "upstream-429", "upstream-500", "upstream-slow")
SIDES = ("plugin", "without")
FAULT_TURN = 3
TIMEOUT_S = 4  # LiteLLM's timeout per deployment call; the slow upstream answers after 8 s
SLOW_S = 8
TRIES = 3
TAG = re.compile(r"\[([\w.-]+) (\d+)\]")


def config(engines: list[Upstream], plugin: bool, redis: RedisServer) -> dict:
    models = [{"model_name": "chat-model",
               "litellm_params": {"model": "openai/upstream-chat", "api_base": f"{engine.url}/v1", "api_key": "dummy",
                                  "timeout": TIMEOUT_S},
               "model_info": {"id": f"engine-{name}"}} for name, engine in zip("ab", engines)]
    out = {"model_list": models,
           # Both sides' routers share their state (session pins, cooldowns) in the same Redis, as a fleet would.
           "router_settings": {"optional_pre_call_checks": ["session_affinity"], "num_retries": 2, "retry_after": 0,
                               "redis_host": "127.0.0.1", "redis_port": redis.port},
           "general_settings": {"master_key": "os.environ/LITELLM_MASTER_KEY"}}
    if plugin:
        out["litellm_settings"] = {"callbacks": ["litellm_prefix.proxy_handler"]}
    return out


def _roles(messages: list[dict]) -> list[dict]:
    """The client's conversation: user, assistant and tool messages, notes taken out."""
    return [{k: v for k, v in unfolded(m).items() if v is not None} for m in messages
            if m["role"] in ("user", "assistant", "tool")]


@dataclass
class Turn:
    session: int
    turn: int
    sent: dict
    tries_failed: int = 0
    deployment: str | None = None  # None: every try failed
    head: str | None = None  # the upstream head of the answered request


@dataclass
class Side:
    sessions: list[Session]
    gateways: list[Proxy]
    turns: list[Turn] = field(default_factory=list)


async def send(client: httpx.AsyncClient, side: Side, index: int, turn: int, body: bytes) -> Turn:
    session = side.sessions[index]
    record = Turn(index, turn, session.requests[-1])
    count = len(side.gateways)
    order = [side.gateways[(index + turn) % count], side.gateways[(index + turn + 1) % count]]
    for attempt in range(TRIES):
        for gateway in order:  # a refused connection goes to the other gateway, as a load balancer would
            try:
                response = await client.post(f"{gateway.url}/v1/chat/completions", content=body, headers={
                    "authorization": f"Bearer {gateway.key}", "content-type": "application/json",
                    "x-session-id": session.client.session})
            except httpx.ConnectError:
                continue
            except httpx.HTTPError:
                break
            if response.status_code == 200:
                record.deployment = response.headers.get("x-litellm-model-id", "?")
                return record
            break
        record.tries_failed += 1
        if attempt + 1 < TRIES:
            await asyncio.sleep(1)
    return record


class Fault:
    """``begin`` and ``end`` of one fault, blocking (run on a worker thread)."""

    def __init__(self, name: str, redis: RedisServer, engines: list[Upstream], gateways: list[Proxy],
                 window_s: float, redis_s: float) -> None:
        self.name, self.redis, self.engines, self.gateways = name, redis, engines, gateways
        self.engine = engines[0]  # the engine that fails: set to the busier one when the fault starts
        self.window = redis_s if name.startswith("redis") else window_s

    def run(self) -> float:
        """Inject the fault, wait out its window, end it; the seconds it lasted."""
        started = time.monotonic()
        if self.name == "gateway":  # a rolling restart: one gateway of each pair, at once
            for gateway in self.gateways:
                stop(gateway.proc)
            for gateway in self.gateways:
                gateway.start()
            for gateway in self.gateways:
                gateway.wait_ready()
            return time.monotonic() - started
        if self.name.startswith("redis"):
            if self.name == "redis-persisted":
                self.redis.command("SAVE")  # a Redis that keeps its data comes back with it
            self.redis.stop()
        elif self.name == "engine":
            self.engine.stop()
        elif self.name == "upstream-slow":
            self.engine.fault(delay=SLOW_S)
        else:
            self.engine.fault(status=int(self.name.rsplit("-", 1)[1]))
        time.sleep(self.window)
        if self.name.startswith("redis"):
            self.redis.start()
        elif self.name == "engine":
            self.engine.start()
        else:
            self.engine.fault()
        return time.monotonic() - started


def fallback_lines(gateways: list[Proxy]) -> int:
    return sum(proxy.log.read_text(errors="replace").count("litellm-prefix: shared store") for proxy in gateways)


async def run_fault(name: str, args, engines: list[Upstream], redis: RedisServer, gateways: dict[str, list[Proxy]],
                    client: httpx.AsyncClient) -> dict:
    sides = {side: Side([Session(i, args.sessions, f"{name}-{side}") for i in range(args.sessions)], gateways[side])
             for side in SIDES}
    offsets = [engine.record.stat().st_size if engine.record.exists() else 0 for engine in engines]
    fallbacks_before = fallback_lines(gateways["plugin"])
    fault = Fault(name, redis, engines, [gateways[side][-1] for side in SIDES], args.window_s, args.redis_s)
    task: asyncio.Future | None = None
    turn, after = 0, 0
    started = time.monotonic()
    while turn < args.turns or task is None or not task.done() or after < 2:
        paced = asyncio.ensure_future(asyncio.sleep(args.turn_s))  # the agents' own time between turns
        if turn == FAULT_TURN:
            # The engine serving more of the sessions fails (a quiet one would spare them all).
            last = {side_: [r.deployment for r in side.turns[-args.sessions:]] for side_, side in sides.items()}
            faulted = max(range(len(engines)), key=lambda k: (
                last["plugin"].count(f"engine-{'ab'[k]}"), sum(v.count(f"engine-{'ab'[k]}") for v in last.values())))
            fault.engine = engines[faulted]
            on_it = {name_: sum(r.deployment == f"engine-{'ab'[faulted]}" for r in side.turns[-args.sessions:])
                     for name_, side in sides.items()}
            task = asyncio.ensure_future(asyncio.to_thread(fault.run))
            await asyncio.sleep(0.5)  # the fault is in place before the turn's requests leave
        ended_before = task is not None and task.done()
        sends = [send(client, side, i, turn, session.advance(turn))
                 for side in sides.values() for i, session in enumerate(side.sessions)]
        results = await asyncio.gather(*sends)  # both sides' requests at once: the same fault
        sides["plugin"].turns += results[:args.sessions]
        sides["without"].turns += results[args.sessions:]
        after += ended_before
        turn += 1
        await paced
        if turn > 200:
            raise RuntimeError(f"{name}: the fault did not end")
    fault_seconds = await task
    seconds = time.monotonic() - started
    # What the engines recorded, by session (the tag in each user message) and conversation.
    recorded: dict[tuple[str, int], list[dict]] = {}
    for engine, offset in zip(engines, offsets):  # the record files: a killed engine's survive it
        with engine.record.open() as fh:
            fh.seek(offset)
            entries = [json.loads(line) for line in fh if line.endswith("\n")]  # not a line cut by a kill
        for entry in entries:
            body = json.loads(entry["body"])
            found = TAG.search(entry["body"])
            if found:
                recorded.setdefault((found.group(1), int(found.group(2))), []).append(body)
    report = {"turns": turn, "fault_seconds": round(fault_seconds, 1), "seconds": round(seconds, 1),
              "sessions_on_failing_engine": on_it if name.startswith(("engine", "upstream")) else None,
              "store_fallback_lines": fallback_lines(gateways["plugin"]) - fallbacks_before, "sides": {}}
    for side_name, side in sides.items():
        lost = 0
        for record in side.turns:
            if record.deployment is None:
                continue
            want = _roles(record.sent["messages"])
            match = [b for b in recorded.get((f"{name}-{side_name}", record.session), [])
                     if _roles(b["messages"]) == want]
            if match:
                record.head = head_of(match[-1])
            else:
                lost += 1
        changes, off_head, moves = [], [], []
        for i in range(args.sessions):
            answered = [r for r in side.turns if r.session == i and r.deployment is not None and r.head]
            heads = [r.head for r in answered]
            places = [r.deployment for r in answered]
            changes.append(sum(a != b for a, b in zip(heads, heads[1:])))
            off_head.append(sum(h != heads[0] for h in heads) if heads else 0)
            moves.append(sum(a != b for a, b in zip(places, places[1:])))
        failed = sorted((r.session, r.turn) for r in side.turns if r.deployment is None)
        # each session's turns: the gateway the round robin chose first and the deployment that answered
        places = [[f"{(i + r.turn) % 2}:{r.deployment}" for r in side.turns if r.session == i]
                  for i in range(args.sessions)]
        report["sides"][side_name] = {
            "requests": len(side.turns), "failed_turns": len(failed), "failed": failed,
            "failed_tries": sum(r.tries_failed for r in side.turns), "lost": lost,
            "first_turn_placement": dict(sorted(Counter(r.deployment for r in side.turns[:args.sessions]).items(),
                                                key=str)),
            "sessions_with_head_change": sum(c > 0 for c in changes), "head_changes": sum(changes),
            "most_head_changes": max(changes), "most_off_head_turns": max(off_head),
            "sessions_moved": sum(m > 0 for m in moves), "moves": sum(moves), "most_moves": max(moves),
            # a session's exception: one off-head turn, or one head change that stays (a re-seed)
            "placements": places,
            "head_exceptions_ok": all(c <= 1 or o <= 1 for c, o in zip(changes, off_head)),
        }
    plugin, without = report["sides"]["plugin"], report["sides"]["without"]
    report["guarantees"] = {
        "no_more_failures": plugin["failed_turns"] <= without["failed_turns"],
        "nothing_lost": plugin["lost"] == 0,
        "heads_stable_but_one_exception": plugin["head_exceptions_ok"],
        "moves_at_most_once": plugin["most_moves"] <= 1,
    }
    return report


async def run(args) -> dict:
    work = Path(tempfile.mkdtemp(prefix="litellm-prefix-chaos-"))
    print(f"logs in {work}", flush=True)
    engines: list[Upstream] = []
    redis: RedisServer | None = None
    gateways: dict[str, list[Proxy]] = {side: [] for side in SIDES}
    try:
        engines = [Upstream(work, name=f"engine-{name}", record=work / f"engine-{name}.jsonl") for name in "ab"]
        redis = RedisServer(work)
        started = time.monotonic()
        env = {"PYTHONUNBUFFERED": "1"}
        for side in SIDES:
            for name in "ab"[:args.gateways]:
                extra = ({"LITELLM_PREFIX_STORE": redis.url, "LITELLM_PREFIX_LOG": str(work / f"prefix-{name}.jsonl")}
                         if side == "plugin" else {})
                gateways[side].append(Proxy(work, config(engines, side == "plugin", redis), {**env, **extra},
                                            name=f"{side}-{name}"))
        for proxies in gateways.values():
            for proxy in proxies:
                proxy.wait_ready()
        report: dict = {"sessions": args.sessions, "window_s": args.window_s, "redis_s": args.redis_s,
                        "gateways_ready_s": round(time.monotonic() - started), "faults": {}}
        print(f"{2 * args.gateways} gateways ready in {report['gateways_ready_s']} s", flush=True)
        limits = httpx.Limits(max_connections=8 * args.sessions, max_keepalive_connections=0)
        async with httpx.AsyncClient(timeout=120, limits=limits) as client:
            warm = {side: Side([Session(i, 2, f"warm-{side}") for i in range(2)], gateways[side]) for side in SIDES}
            for t in range(2):  # LiteLLM's first requests pay for lazy imports and connection set-up
                await asyncio.gather(*(send(client, w, i, t, s.advance(t))
                                       for w in warm.values() for i, s in enumerate(w.sessions)))
            for fault in args.faults:
                result = await run_fault(fault, args, engines, redis, gateways, client)
                report["faults"][fault] = result
                print_fault(fault, result)
        return report
    finally:
        for proxies in gateways.values():
            for proxy in proxies:
                proxy.stop()
        if redis is not None:
            redis.stop()
        for engine in engines:
            engine.stop()


def print_fault(name: str, result: dict) -> None:
    on_it = result.get("sessions_on_failing_engine")
    print(f"\n**{name}** ({result['fault_seconds']} s of fault, {result['turns']} turns, {result['seconds']} s; "
          f"store fallback lines {result['store_fallback_lines']}"
          + (f"; sessions on the failing engine: plugin {on_it['plugin']}, without {on_it['without']}" if on_it else "")
          + "; first-turn placement: " + ", ".join(
              f"{side} " + "/".join(f"{n}" for n in e["first_turn_placement"].values())
              for side, e in result["sides"].items()) + "):", flush=True)
    print("| | failed turns (tries) | lost | sessions with a head change | head changes (most in a session) "
          "| most off-head turns | sessions moved | moves (most) |")
    print("|---|---|---|---|---|---|---|---|")
    for side, e in result["sides"].items():
        print(f"| {side} | {e['failed_turns']} ({e['failed_tries']}) | {e['lost']} | {e['sessions_with_head_change']} "
              f"| {e['head_changes']} ({e['most_head_changes']}) | {e['most_off_head_turns']} | {e['sessions_moved']} "
              f"| {e['moves']} ({e['most_moves']}) |")
    print("guarantees: " + ", ".join(f"{k} {'ok' if v else 'FAILED'}" for k, v in result["guarantees"].items()),
          flush=True)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=32, help="sessions per side (with and without the plugin)")
    parser.add_argument("--turns", type=int, default=7, help="turns per session at least (more while a fault lasts)")
    parser.add_argument("--turn-s", type=float, default=2.0, help="a turn starts this long after the last at least")
    parser.add_argument("--gateways", type=int, choices=(1, 2), default=2,
                        help="gateways per side (1: a quicker start, no gateway fault, no round robin)")
    parser.add_argument("--faults", nargs="+", choices=FAULTS, default=list(FAULTS))
    parser.add_argument("--window-s", type=float, default=10.0, help="how long an engine fault lasts")
    parser.add_argument("--redis-s", type=float, default=10.0, help="how long Redis is stopped")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "chaos.json"))
    args = parser.parse_args(argv)
    if args.gateways == 1 and "gateway" in args.faults:
        parser.error("the gateway fault restarts one of two gateways: --gateways 2")
    started = time.monotonic()
    report = asyncio.run(run(args))
    report["seconds"] = round(time.monotonic() - started)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    ok = all(all(r["guarantees"].values()) for r in report["faults"].values())
    print(f"\n{args.sessions} sessions per side, {len(args.faults)} faults, {report['seconds']} s: "
          f"every guarantee {'met' if ok else 'NOT met'}" + (f"; written to {args.out}" if args.out else ""))
    return report


if __name__ == "__main__":
    main()
