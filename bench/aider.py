"""aider (PyPI) through a real LiteLLM proxy, with and without the plugin: sessions and re-processed tokens.

``harness.aider``'s sessions (a over three prompts, the third on the next calendar day; b in another
workspace; c with a's first prompt in a third; each in the variants of ``harness.aider.VARIANTS``) run
once through the proxy group with the plugin, once through the same deployment with it switched
off, and once with the plugin but aider's profile forced off (``profiles.force``: ``none``), as
before aider had one, in fresh workspaces each time. Reported per mode: the requests, the tokens re-processed (the
longest common token prefix with any earlier request of the run, ``harness.real_agents``' measure)
over the append-only bound, the plugin's session keys of each session's later requests (its log's
call records: one per aider session and variant, 9 with the plugin, none shared by two sessions;
the plugin switched off keys nothing), and the distinct system prompts the model got in session a of the ``diff`` format (1
with the plugin: the next day's date is pinned and noted).

    .venv/bin/python -m bench.aider        # bench/results/aider.json
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from harness import aider
from harness.procs import Proxy, log_records
from harness.real_agents.harness import MODES, ScriptedModel, proxy_groups, reprocessed, scripted_proxy_config

ROOT = Path(__file__).resolve().parent.parent
NO_PROFILE = "scripted-agents-no-profile"
MODES_RUN = ("off", "plugin", "no-profile")

GROUPS = {**MODES, "no-profile": NO_PROFILE}


def main() -> int:
    aider.install()
    work = Path(tempfile.mkdtemp(prefix="aider-bench-"))
    model = ScriptedModel(work)
    log = work / "prefix.jsonl"
    # a third group: the plugin with aider's profile forced off, as before aider had one
    config = scripted_proxy_config(model.url, ({**proxy_groups(model.url)[0], "model_name": NO_PROFILE},))
    settings = work / "litellm-prefix.json"
    settings.write_text(json.dumps({"profiles": {"force": {NO_PROFILE: "none"}}}))
    proxy = Proxy(work, config, {"LITELLM_PREFIX_LOG": str(log), "LITELLM_PREFIX_CONFIG": str(settings)})
    sent: dict[str, list[tuple[dict, str]]] = {}  # mode -> (request, "variant/session/prompt")
    try:
        proxy.wait_ready()
        for mode in MODES_RUN:
            runs = aider.sessions(f"{proxy.url}/v1", proxy.key, GROUPS[mode], work / mode, model.records)
            sent[mode] = [(r, f"{variant}/{name}/{number}") for variant, name, number, rs in runs for r in rs]
        calls = [r for r in log_records(log) if r.get("event") == "call"]
    finally:
        proxy.stop()
        model.stop()
    # the plugin's session key of each request (its call record, paired by seq)
    key_of = {int(c.get("cached_tokens") or 0): c.get("session") for c in calls}
    report = {}
    for mode in MODES_RUN:
        mine = sent[mode]
        counted = reprocessed([r for r, _ in mine], [s.rsplit("/", 1)[0] for _, s in mine])
        heads = {json.dumps(r["body"]["messages"][0]) for r, s in mine if s.startswith("diff/a/")}
        owners: dict[str, set[str]] = {}
        for r, s in mine:
            if not s.endswith("/1") and key_of.get(r["seq"]):
                owners.setdefault(key_of[r["seq"]], set()).add(s.rsplit("/", 1)[0])
        report[mode] = {
            "requests": len(mine),
            "tokens": sum(t for t, _, _ in counted),
            "reprocessed": sum(x for _, x, _ in counted),
            "bound": sum(b for _, _, b in counted),
            "ratio": round(sum(x for _, x, _ in counted) / max(1, sum(b for _, _, b in counted)), 3),
            "heads_in_session_a_diff": len(heads),
            # one key per session from its second request on, none shared (a first request runs on an
            # empty journal under a key of its own)
            "session_keys": len(owners),
            "keys_shared_by_sessions": sum(len(v) > 1 for v in owners.values()),
        }
    out = ROOT / "bench" / "results" / "aider.json"
    out.write_text(json.dumps({"aider": aider.VERSION, **report}, indent=1) + "\n")
    for mode in MODES_RUN:
        r = report[mode]
        print(f"{mode:10}  {r['requests']} requests, re-processed {r['reprocessed']:,} of {r['tokens']:,} tokens "
              f"({r['ratio']:.3f}x the append-only bound {r['bound']:,}); session keys {r['session_keys']}, shared by "
              f"two sessions {r['keys_shared_by_sessions']}; "
              f"system prompts in session a (diff): {r['heads_in_session_a_diff']}")
    print(f"written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
