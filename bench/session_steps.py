"""The plugin's own steps per request over a long append-only session, and its memory per idle session.

Steps: a pi-like session (harness/sessions.py: sectioned head, 35 tools, a tool round and a
typed prompt per turn) at 20k and 260k head tokens, 50 turns, each request parsed from JSON
afresh (as a proxy hands it over: new objects every request), through ``Stabilizer.stabilize``
with the in-memory store. Each turn is sent twice (the second a client retry), by a stabilizer
with the incremental path (``incremental=True``) and by its switched-off twin, interleaved
in one run. Reported: the median per request over turns 3-50, turn 3 and turn 50 (median
over ``--rounds`` repeats of the session), and their ratio; and (``interleaved``) turn 3 and
turn 50 again, measured in alternation 200 times each, a steadier ratio on a busy machine.

Memory: ``--sessions`` distinct sessions (one request each, 2k-token heads) through one
stabilizer, resident set before and after, in a fresh process; the process without the plugin
is the same process before it (the requests are built first). Per idle session = growth /
sessions, and the growth again after as many more sessions with ``maxSessions`` at the first
count (levelling off at the cap).

    .venv/bin/python -m bench.session_steps [--turns 50 --rounds 5 --sessions 2000]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from harness.sessions import PiClient
from litellm_prefix.request.core import Stabilizer
from litellm_prefix.request.target import Target
from litellm_prefix.settings import Settings

ROOT = Path(__file__).resolve().parent.parent

TARGET = Target(model="openai/local", provider="openai")


def session(tokens: int, turns: int, name: str) -> list[str]:
    client = PiClient(tokens=tokens, session=name)
    client.user("start")
    out = []
    for turn in range(turns):
        client.tool_round()
        client.assistant("ok")
        client.user(f"typed {turn}")
        out.append(json.dumps(client.request()))
    return out


async def steps(tokens: int, turns: int, rounds: int) -> dict:
    rows = {"incremental": [[] for _ in range(turns)], "full": [[] for _ in range(turns)],
            "incremental_retry": [[] for _ in range(turns)], "full_retry": [[] for _ in range(turns)]}
    for r in range(rounds):
        requests = session(tokens, turns, f"steps-{tokens}-{r}")
        twins = {"incremental": Stabilizer(Settings(path_check="trusted", stable_path="/srv/pi-home"), incremental=True),
                 "full": Stabilizer(Settings(path_check="trusted", stable_path="/srv/pi-home"), incremental=False)}
        for turn, raw in enumerate(requests):
            for name, stabilizer in twins.items():
                for suffix in ("", "_retry"):
                    data = json.loads(raw)
                    t0 = time.perf_counter_ns()
                    await stabilizer.stabilize(data, "acompletion", target=TARGET)
                    rows[name + suffix][turn].append((time.perf_counter_ns() - t0) / 1e6)
        assert all(s.stats["errors"] == 0 for s in twins.values())
    out = {"head_tokens": tokens, "turns": turns, "rounds": rounds, "interleaved": await interleaved(tokens, turns)}
    for name, per_turn in rows.items():
        medians = [statistics.median(t) for t in per_turn]
        out[name] = {"median_ms": round(statistics.median(medians[2:]), 4), "turn3_ms": round(medians[2], 4),
                     f"turn{turns}_ms": round(medians[-1], 4),
                     "last_over_turn3": round(statistics.median(medians[-3:]) / statistics.median(medians[1:4]), 3)}
    return out


async def interleaved(tokens: int, turns: int, repeats: int = 200) -> dict:
    """Turn 3 against the last turn, measured in alternation (the machine's load moves both alike):
    a stabilizer per turn, each sent the turn before it and then the turn (an appended turn on the
    incremental path), ``repeats`` times; the median of the second requests."""
    requests = session(tokens, turns, f"interleaved-{tokens}")
    out = {}
    for name, incremental in (("incremental", True), ("full", False)):
        twins = {}
        for turn in (2, turns - 1):
            stabilizer = Stabilizer(Settings(path_check="trusted", stable_path="/srv/pi-home"), incremental=incremental)
            for raw in requests[:turn]:
                await stabilizer.stabilize(json.loads(raw), "acompletion", target=TARGET)
            twins[turn] = stabilizer
        times: dict[int, list[float]] = {turn: [] for turn in twins}
        for _ in range(repeats):
            for turn, stabilizer in twins.items():
                await stabilizer.stabilize(json.loads(requests[turn - 1]), "acompletion", target=TARGET)
                data = json.loads(requests[turn])
                t0 = time.perf_counter_ns()
                await stabilizer.stabilize(data, "acompletion", target=TARGET)
                times[turn].append((time.perf_counter_ns() - t0) / 1e6)
        first, last = (statistics.median(times[turn]) for turn in twins)
        out[name] = {"turn3_ms": round(first, 4), f"turn{turns}_ms": round(last, 4), "last_over_turn3": round(last / first, 3)}
    return out


def _rss_kib() -> int:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:"))


def memory(sessions: int) -> dict:
    """Run in a fresh process (``--memory-child``)."""
    import gc
    client = PiClient(tokens=2000, session="m")
    client.user("start")
    base = client.request()
    requests = [json.dumps(dict(base, metadata={"session_id": f"idle-{i}"},
                                messages=[*base["messages"], {"role": "user", "content": f"task {i}"}]))
                for i in range(2 * sessions)]
    stabilizer = Stabilizer(Settings(path_check="trusted", stable_path="/srv/pi-home", max_sessions=sessions))

    async def fill(batch) -> None:
        for raw in batch:
            await stabilizer.stabilize(json.loads(raw), "acompletion", target=TARGET)
    asyncio.run(fill(requests[:1]))  # imports, first-use allocations
    gc.collect()
    before = _rss_kib()
    asyncio.run(fill(requests[1:sessions]))
    gc.collect()
    filled = _rss_kib()
    asyncio.run(fill(requests[sessions:]))
    gc.collect()
    after = _rss_kib()
    return {"sessions": sessions, "rss_growth_kib": filled - before,
            "per_idle_session_bytes": round((filled - before) * 1024 / max(1, sessions - 1)),
            "growth_past_cap_kib": after - filled, "session_cap": sessions}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--memory-child", action="store_true")
    args = parser.parse_args()
    if args.memory_child:
        print(json.dumps(memory(args.sessions)))
        return
    result = {"steps": [asyncio.run(steps(tokens, args.turns, args.rounds)) for tokens in (20_000, 260_000)]}
    child = subprocess.run([sys.executable, "-m", "bench.session_steps", "--memory-child", "--sessions",
                            str(args.sessions)], capture_output=True, text=True, check=True, cwd=ROOT)
    result["memory"] = json.loads(child.stdout.strip().splitlines()[-1])
    print(json.dumps(result, indent=1))
    (ROOT / "bench" / "results" / "session_steps.json").write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
