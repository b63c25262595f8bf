"""bench/proxy_profile.py splits a py-spy profile of a whole proxy process: each sample goes to
the plugin when any frame of its stack runs in litellm_prefix (a rule called from LiteLLM's
hook is the plugin's), else to the package of its innermost recognisable frame (LiteLLM's
deepcopy of a request is LiteLLM's, not copy's); and the difference of two profiles is what
one process spends per request beyond the other, outside the plugin too."""
from __future__ import annotations

import pytest

from bench import proxy_profile as pp

PROCESS = 'process 910:"/venv/bin/python /venv/bin/litellm --config proxy.yaml"'
SERVE = "Runner.run (asyncio/runners.py:118);RequestResponseCycle.run_asgi (uvicorn/protocols/http/h11_impl.py:407)"
HOOK = "PrefixStabilizer.async_pre_call_hook (litellm_prefix/hook.py:80)"


def _raw(tmp_path, lines):
    path = tmp_path / "p.raw"
    path.write_text("\n".join(lines) + "\n")
    return pp.read_raw(path)


def test_a_stack_through_the_plugin_is_the_plugins_whatever_runs_inside_it(tmp_path):
    stacks = _raw(tmp_path, [
        f"{PROCESS};thread (0x1);{SERVE};{HOOK};sha1 (hashlib.py:10) 7",
        f"{PROCESS};{SERVE};deepcopy (copy.py:128);_deepcopy_dict (copy.py:231) 3",
        f"{PROCESS};{SERVE};completion (litellm/main.py:900);deepcopy (copy.py:128) 5",
        f"{PROCESS};{SERVE};function_setup (litellm/litellm_core_utils/logging.py:12);dumps (json/__init__.py:231) 2",
    ])
    assert [frames[0] for frames, _ in stacks] == ["Runner.run (asyncio/runners.py:118)"] * 4  # process/thread lines dropped
    assert [pp.bucket(frames) for frames, _ in stacks] == [
        pp.PLUGIN, "copy (deepcopy)", "copy (deepcopy)", "json"]
    summary = pp.summarize(stacks, requests=2, rate=100)
    assert summary["samples"] == 17
    assert summary["ms_per_request"] == pytest.approx(17 * 10 / 2)  # 10 ms a sample, two requests
    assert summary["by_package_ms"][pp.PLUGIN] == pytest.approx(35.0)
    assert "sha1 (hashlib.py)" not in summary["leaves_ms"]  # the plugin's own leaves are not "elsewhere"
    assert summary["leaves_ms"]["_deepcopy_dict (copy.py)"] == pytest.approx(15.0)


def test_the_innermost_recognisable_frame_names_the_package(tmp_path):
    stacks = _raw(tmp_path, [
        f"{PROCESS};{SERVE};route (litellm/router.py:50);_compile (re/__init__.py:294) 1",
        f"{PROCESS};{SERVE};auth (litellm/proxy/auth/user_api_key_auth.py:9);"
        "_find_and_load (<frozen importlib._bootstrap>:1176) 1",
        f"{PROCESS};{SERVE};mystery (somewhere.py:1) 1",
    ])
    assert [pp.bucket(frames) for frames, _ in stacks] == ["litellm.router", "imports", "starlette/fastapi/uvicorn"]


def test_the_difference_is_per_request_and_finds_what_grew_outside_the_plugin(tmp_path):
    plain = pp.summarize(_raw(tmp_path, [f"{PROCESS};{SERVE};dumps (json/__init__.py:231) 4"]), requests=4, rate=100)
    plugin = pp.summarize(_raw(tmp_path, [f"{PROCESS};{SERVE};dumps (json/__init__.py:231) 4",
                                          f"{PROCESS};{SERVE};{HOOK} 2",
                                          f"{PROCESS};{SERVE};log (litellm/integrations/x.py:3) 2"]), requests=4, rate=100)
    diff = pp.difference({"plain": plain, "plugin": plugin})
    assert diff["ms_per_request"] == pytest.approx(10.0)
    assert diff["by_package_ms"][pp.PLUGIN] == pytest.approx(5.0)
    assert diff["by_package_ms"]["litellm.integrations"] == pytest.approx(5.0)
    assert diff["by_package_ms"]["json"] == 0
    assert next(iter(diff["leaves_grown_ms"])) == "log (litellm/integrations/x.py)"
