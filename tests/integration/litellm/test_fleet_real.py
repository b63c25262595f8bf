"""bench/fleet_real.py, small: four real llama.cpp servers agree with bench/fleet.py's slot model.

Six sessions of three turns over four servers of two slots each, routed by the plugin (in an
SDK Router in this process: a proxy would take longer to start than the whole run) and by the
SGLang-style client-side router. The SGLang-style router routes the same way in the model and
on the servers, so its re-processed tokens test the slot model alone, to the token; the plugin's
ratio to it must agree within the issue's 1.10x.
"""
from __future__ import annotations

from bench import fleet_real


def test_four_real_llama_servers_reprocess_what_the_slot_model_says(tmp_path):
    result = fleet_real.run(sessions=6, turns=3, seed=1, scale=0.05, slots=2, via="sdk", work=tmp_path,
                            policies=("plugin", "sglang"), log=lambda *_: None)
    real, sim = result["real"], result["simulated"]
    for name in ("plugin", "sglang"):
        assert real[name]["failures"] == 0
        assert real[name]["prompt_token_mismatches"] == 0  # the servers counted the tokens the model did
        assert real[name]["prompt_tokens"] == sim[name]["prompt_tokens"] > 10_000
    # the same routing on both sides: the model's slots are llama.cpp's, to the token
    assert real["sglang"]["colocation_as_simulated"] == 1.0
    assert real["sglang"]["reprocessed"] == sim["sglang"]["reprocessed"]
    assert 0 < real["sglang"]["reprocessed"] < real["sglang"]["prompt_tokens"] / 2  # heads were reused
    # the plugin's placement (the gateway's code on one side, the model's on the other) agrees
    assert sum(real["plugin"]["sessions_per_replica"]) == 6
    assert sum(n > 0 for n in real["plugin"]["sessions_per_replica"]) >= 3  # spread by the load gate
    assert result["within_target"], result["plugin_vs_sglang"]
