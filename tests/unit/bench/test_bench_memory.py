"""bench/proxy_memory.py reads a proxy's resident set as the sum over its process group (LiteLLM
may run workers as children): a process that allocates shows in its group's figure, and in no
other group's."""
from __future__ import annotations

import subprocess
import sys

from bench.proxy_memory import bodies

HOLD = ("import sys; block = bytearray({mib} << 20); block[::4096] = b'x' * len(block[::4096]); "
        "print('ready', flush=True); sys.stdin.read()")


def _holding(mib: int) -> subprocess.Popen:
    """A Python process in a session (and process group) of its own, holding ``mib`` MiB it touched."""
    child = subprocess.Popen([sys.executable, "-c", HOLD.format(mib=mib)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, start_new_session=True)
    assert child.stdout.readline().strip() == b"ready"
    return child


def test_each_session_sends_its_own_request_with_one_shared_head():
    sent = bodies("idle", 3, 2000)
    assert [session for session, _ in sent] == ["idle-0", "idle-1", "idle-2"]
    assert len({body for _, body in sent}) == 3
    heads = {body.split(b'"task ')[0] for _, body in sent}
    assert len(heads) == 1 and b"metadata" not in next(iter(heads))
