"""The SDK example the docs show (docs/getting-started.md) runs in its own Python process, through
the installed LiteLLM SDK (the config files it names: tests/unit/docs/test_examples.py).
"""
from __future__ import annotations

import subprocess
import sys

from tests.support import ROOT


def test_sdk_example_runs_and_shows_identical_heads():
    result = subprocess.run([sys.executable, "-m", "examples.sdk_example"], capture_output=True, text=True,
                            timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "identical heads across turns: True" in result.stdout
    assert "Docs: /opt/pi-home/docs" in result.stdout
