"""Start and stop a local llama-server (prefix caching on, one slot) with the tiny model.

Used by ``make run`` (as the default upstream), the benchmarks and the CI end-to-end
test. Builds the binary and writes the model on first use (see build_llama_server.py
and make_tiny_model.py). Listens on 127.0.0.1 only.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.error import URLError
from urllib.request import urlopen

sys.path.insert(0, str(Path(__file__).resolve().parent))

from build_llama_server import binary_path, build  # noqa: E402
from make_tiny_model import ensure_model  # noqa: E402

# One slot, prompt caching on, and no extra RAM prompt cache: the server reuses exactly the
# longest common token prefix with the previous request (what the replay's model counts).
ARGS = ["-np", "1", "-c", "32768", "--cache-prompt", "--cache-ram", "0", "--jinja", "--no-webui", "-t", "2"]


def healthy(url: str) -> bool:
    try:
        with urlopen(f"{url}/health", timeout=2) as response:
            return response.status == 200
    except (URLError, OSError, ValueError):
        return False


class LlamaServer:
    def __init__(self, port: int, log: Path | None = None, build_if_missing: bool = True) -> None:
        binary = binary_path()
        if not binary.is_file():
            if not build_if_missing:
                raise FileNotFoundError(f"{binary} is missing: run python tools/build_llama_server.py")
            binary = build(os.cpu_count() or 2)
        model = ensure_model()
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        out = log.open("a") if log else subprocess.DEVNULL
        self.proc = subprocess.Popen([str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port), *ARGS],
                                     stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 120
        while not healthy(self.url):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"llama-server did not come up on {self.url}" + (f" (see {log})" if log else ""))
            time.sleep(0.25)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
