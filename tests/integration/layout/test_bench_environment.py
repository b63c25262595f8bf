"""Tests import benchmarks (``from bench import load``): importing bench/load.py in a fresh interpreter
leaves its environment as it was (the layering itself: tests/unit/layout/test_layout.py).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.support import ROOT


def test_importing_the_load_benchmark_leaves_the_environment_as_it_was():
    """Tests import benchmarks (``from bench import load``): bench/load.py hands its proxies an
    environment of their own (``proxy_environment``) instead of editing this process's."""
    env = {**os.environ, "LITELLM_PREFIX_STORE": "redis://127.0.0.1:1", "LITELLM_PREFIX": "1", "PYTHONPATH": "."}
    env.pop("LITELLM_PREFIX_CONFIG", None)
    script = ("import json, os; before = dict(os.environ); import bench.load as load; "
              "print(json.dumps([dict(os.environ) == before, load.proxy_environment(os.environ)]))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    unchanged, proxies = json.loads(done.stdout.splitlines()[-1])
    assert unchanged
    assert "LITELLM_PREFIX_STORE" not in proxies and "LITELLM_PREFIX" not in proxies
    assert proxies["LITELLM_PREFIX_CONFIG"].endswith("no-such-global-settings.json")
    assert proxies["PYTHONPATH"].split(os.pathsep)[-1] == "." and proxies["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
