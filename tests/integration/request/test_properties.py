"""The behaviour contract across processes: the same request gives the same bytes in a fresh
interpreter under any hash seed (the properties in one process: tests/unit/request/test_properties.py).
"""
from __future__ import annotations

import os
import subprocess
import sys

from tests.support import ROOT


def test_deterministic_across_processes_and_hash_seeds():
    script = (
        "import json,sys;"
        "from harness.realistic import *; from litellm_prefix.request.core import Stabilizer; "
        "from litellm_prefix.settings import Settings;"
        "d=chat_request(pi_system_prompt(root=install_root('b'), tool_order=shuffled(TOOL_NAMES,5)), conversation(3),"
        " openai_tools(shuffled(TOOL_NAMES,6)));"
        "o=Stabilizer(Settings(path_check='trusted', stable_path='/s')).stabilize_sync(d);"
        "import hashlib; print(hashlib.sha256(json.dumps([o['messages'],o['tools']]).encode()).hexdigest())"
    )
    root = ROOT
    digests = set()
    for seed in ("1", "2", "random"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        digests.add(subprocess.run([sys.executable, "-c", script], cwd=root, env=env, capture_output=True,
                                   text=True, check=True).stdout.strip())
    assert len(digests) == 1
