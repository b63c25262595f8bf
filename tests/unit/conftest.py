"""The unit suite runs in this process only: no child process, no network, not even a server on
127.0.0.1 (tests/integration has those). Checked, not trusted: while a unit test is collected, set
up, run and torn down, starting a process (``subprocess``, ``os.fork``/``posix_spawn``/``system``,
``multiprocessing``, asyncio's subprocesses: all go through these) or opening a connection
(``socket.connect``, ``bind``, ``listen``, ``sendto``, a name lookup) raises ``UnitTestLeftTheProcess``.
The guard is process-wide for that while (another thread of the test's is caught too), so the unit
suite runs before the others in one session (pyproject's ``testpaths``, make test's order).
"""
from __future__ import annotations

import multiprocessing.process
import os
import socket
import subprocess
from pathlib import Path

import pytest

UNIT = Path(__file__).resolve().parent


class UnitTestLeftTheProcess(AssertionError):
    pass


def _refuse(what: str):
    def refused(*args, **kwargs):
        raise UnitTestLeftTheProcess(f"a unit test may not {what} (tests/unit/conftest.py): move it to tests/integration")

    return refused


# (owner, attribute, what it would have done); an attribute the platform lacks is skipped.
GUARDED = [
    (subprocess.Popen, "__init__", "start a process"),
    (os, "fork", "fork"),
    (os, "forkpty", "fork"),
    (os, "posix_spawn", "start a process"),
    (os, "posix_spawnp", "start a process"),
    (os, "system", "start a process"),
    (os, "execv", "exec"),
    (os, "execve", "exec"),
    (multiprocessing.process.BaseProcess, "start", "start a process"),
    (socket.socket, "connect", "connect a socket"),
    (socket.socket, "connect_ex", "connect a socket"),
    (socket.socket, "bind", "bind a socket"),
    (socket.socket, "listen", "listen on a socket"),
    (socket.socket, "sendto", "send a datagram"),
    (socket, "getaddrinfo", "look a name up"),
    (socket, "gethostbyname", "look a name up"),
]


class _Guard:
    """Installed for one step of one unit test (collection, set-up, call, tear-down), then undone,
    so a session that runs tests/integration too is left as it was."""

    def __enter__(self):
        self.saved = []
        for owner, name, what in GUARDED:
            if hasattr(owner, name):
                self.saved.append((owner, name, owner.__dict__.get(name, getattr(owner, name))))
                setattr(owner, name, _refuse(what))
        return self

    def __exit__(self, *exc):
        for owner, name, original in reversed(self.saved):
            setattr(owner, name, original)


def _in_unit(node) -> bool:
    return UNIT == Path(node.path) or UNIT in Path(node.path).parents


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):  # importing a test module starts nothing either
    if not _in_unit(collector):
        return (yield)
    with _Guard():
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    with _Guard():
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    with _Guard():
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    with _Guard():
        return (yield)
