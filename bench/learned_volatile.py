"""Cost of learned volatile lines per request, measured in one run.

A pi-like head (about 98 KB, some 450 lines holding digits: a generated inventory table
appended to the realistic pi prompt) over a 60-turn session, the transform timed per
request. Two heads: one that stays the same (learning takes its hash-only path) and one
whose message counter and clock change every request (an unknown agent that re-renders
its prompt: learning scans the head's digit lines). Each with ``learnedVolatile`` off and
on. Reported: medians in ms, the ratio on/off for each head, and how many requests sent
a changed head upstream (the cache misses learning removes).

    .venv/bin/python -m bench.learned_volatile [--turns N]
"""
from __future__ import annotations

import argparse
import logging
import os
import statistics
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from harness.realistic import pi_system_prompt
from litellm_prefix.request.core import Stabilizer
from litellm_prefix.request.target import Target
from litellm_prefix.settings import Settings

ROOT = Path(__file__).resolve().parent.parent

BASE = pi_system_prompt()
TABLE = "\n".join(f"- item {i}: size {i * 13} bytes, v{i % 9}.{i % 4}" for i in range(400))


def session(learned: bool, changing: bool, turns: int) -> tuple[float, int]:
    st = Stabilizer(Settings(path_check="absolute", learned_volatile=learned))
    body: list[dict] = []
    times, heads = [], set()
    for turn in range(turns):
        n = turn if changing else 0
        head = f"{BASE}\n{TABLE}\nMessages: {n}\nClock: 08:{n // 60 % 60:02d}:{n % 60:02d}"
        body.append({"role": "user", "content": f"step {turn}"})
        data = {"model": "m", "messages": [{"role": "system", "content": head}, *body], "litellm_session_id": "bench"}
        st.clock = lambda turn=turn: 1_796_300_000.0 + 7 * turn
        start = time.perf_counter()
        out = st.stabilize_sync(data, target=Target(provider="openai"))
        times.append(time.perf_counter() - start)
        heads.add(out["messages"][0]["content"])
        body.append({"role": "assistant", "content": "ok"})
    return statistics.median(times[5:]) * 1000, len(heads)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=60)
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # the drift warnings of the 'off' runs
    print(f"head: {len(BASE) + len(TABLE) + 30} characters; {args.turns} turns")
    print(f"{'head':10} {'learned off ms':>15} {'learned on ms':>14} {'on/off':>7} {'distinct heads off/on':>22}")
    for changing in (False, True):
        off, heads_off = session(False, changing, args.turns)
        on, heads_on = session(True, changing, args.turns)
        print(f"{'changing' if changing else 'stable':10} {off:15.2f} {on:14.2f} {on / off:7.2f} "
              f"{f'{heads_off}/{heads_on}':>22}")


if __name__ == "__main__":
    main()
