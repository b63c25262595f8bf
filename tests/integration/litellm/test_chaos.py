"""Faults under load, short form of ``bench/chaos.py``: two sessions with and without the plugin
through one gateway each (two proxies to start, not four), while Redis stops (and comes back
empty), an engine dies, and an engine answers 500; every guarantee of the benchmark holds for each.
(The gateway restart, the round robin over two gateways, 429, slow answers (a window shorter than
two timeouts is over before a retry notices) and a Redis that keeps its data: in the benchmark
only, where starting the four proxies alone takes a minute.)

Each fault is also checked to have reached the plugin's sessions (fallbacks logged; sessions on
the failing engine that moved or had a try fail), so a fault that missed them cannot pass for one
that was survived."""
from __future__ import annotations

FAULTS = ["redis", "engine", "upstream-500"]


def test_faults_under_load_keep_every_guarantee(tmp_path):
    from bench import chaos
    report = chaos.main(["--sessions", "2", "--gateways", "1", "--turns", "5", "--window-s", "2", "--redis-s", "2",
                         "--turn-s", "0.3", "--faults", *FAULTS, "--out", str(tmp_path / "chaos.json")])
    assert list(report["faults"]) == FAULTS
    for name, result in report["faults"].items():
        assert result["guarantees"] == {"no_more_failures": True, "nothing_lost": True,
                                        "heads_stable_but_one_exception": True, "moves_at_most_once": True}, name
        plugin, without = result["sides"]["plugin"], result["sides"]["without"]
        assert without["lost"] == 0, name
        assert plugin["requests"] == without["requests"] == 2 * result["turns"], name
        if name != "redis":  # the failing engine served the plugin's sessions, and they felt it
            assert result["sessions_on_failing_engine"]["plugin"] >= 1, name
            assert plugin["sessions_moved"] >= 1 or plugin["failed_tries"] >= 1, name
    assert report["faults"]["redis"]["store_fallback_lines"] >= 1  # the plugin's gateways saw Redis go
