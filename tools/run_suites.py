"""Run test suites side by side, each line of their output prefixed with the suite's name.

    .venv/bin/python -m tools.run_suites 'NAME=COMMAND' ['NAME=COMMAND' ...]

``make test``'s runner: tests/unit and tests/integration on the first LiteLLM release, and what
depends on the release (``-m litellm``: tests/integration/litellm and the release checks) with the
real agents' CLIs (tests/agents) on the second, at once, one on each core. Most of the
second's time is spent waiting (on proxies starting, on agent CLIs, on llama.cpp), so the two
together take little more than the longer one alone. The suites share nothing but the machine: every
server a test starts listens on a port the OS gave it, every agent session gets a fresh
HOME, the tiny model is written atomically.

Exits with the first failing suite's status (0 when all pass); Ctrl-C stops every suite
(each runs in its own process group). A summary line per suite (status, seconds) comes last.
"""
from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import threading
import time


def _pump(name: str, proc: subprocess.Popen, lock: threading.Lock) -> None:
    assert proc.stdout is not None
    for line in iter(proc.stdout.readline, b""):
        with lock:
            sys.stdout.buffer.write(f"[{name}] ".encode() + line)
            sys.stdout.buffer.flush()


def main(argv: list[str]) -> int:
    suites = []
    for arg in argv:
        name, sep, command = arg.partition("=")
        if not sep or not name or not command:
            print(f"run_suites: expected NAME=COMMAND, got {arg!r}", file=sys.stderr)
            return 2
        suites.append((name, command))
    if not suites:
        print(__doc__, file=sys.stderr)
        return 2
    lock = threading.Lock()
    started = time.monotonic()
    running = []
    for name, command in suites:
        proc = subprocess.Popen(shlex.split(command), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))
        pump = threading.Thread(target=_pump, args=(name, proc, lock), daemon=True)
        pump.start()
        running.append((name, proc, pump))
    codes: dict[str, tuple[int, float]] = {}
    try:
        while len(codes) < len(running):
            for name, proc, pump in running:
                if name not in codes and proc.poll() is not None:
                    pump.join()
                    codes[name] = (proc.returncode, time.monotonic() - started)
            time.sleep(0.2)
    except KeyboardInterrupt:
        for _, proc, _ in running:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for _, proc, _ in running:
            proc.wait()
        return 130
    for name, _ in suites:
        code, seconds = codes[name]
        print(f"run_suites: {name}: {'passed' if code == 0 else f'FAILED (exit {code})'} after {seconds:.0f} s")
    return next((code for code, _ in codes.values() if code != 0), 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
