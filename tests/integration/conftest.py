"""Fixtures of tests/integration alone (the servers and proxies it shares with tests/agents:
tests/integration/servers.py)."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def install_roots(e2e_dir):
    """Two real install roots on disk, so the default pathCheck (exists) applies end to end."""
    from harness.realistic import PI_SUFFIX

    roots = []
    for version in ("v22.11.0", "v23.3.0"):
        root = e2e_dir / "nvm" / version / "lib" / PI_SUFFIX
        (root / "docs").mkdir(parents=True)
        roots.append(str(root))
    return roots
