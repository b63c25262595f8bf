"""The unit suite's guard (tests/unit/conftest.py) holds: inside a unit test, starting a process
or opening a connection fails, however it is asked for."""
from __future__ import annotations

import asyncio
import multiprocessing
import os
import socket
import subprocess
import sys

import pytest

from tests.unit.conftest import UnitTestLeftTheProcess


def test_a_unit_test_can_start_no_process_and_open_no_connection():
    async def child():
        await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")

    attempts = [
        lambda: subprocess.run([sys.executable, "-c", "pass"]),
        os.fork,
        lambda: os.system("true"),
        lambda: multiprocessing.Process(target=print).start(),
        lambda: asyncio.run(child()),
        lambda: socket.create_connection(("127.0.0.1", 9)),
        lambda: socket.socket().bind(("127.0.0.1", 0)),
        lambda: socket.getaddrinfo("localhost", 80),
    ]
    for attempt in attempts:
        with pytest.raises(UnitTestLeftTheProcess):
            attempt()
