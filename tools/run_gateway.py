"""`make run`: start the LiteLLM proxy with litellm-prefix in front of an upstream, and say how to call it.

Upstream: ``LITELLM_PREFIX_UPSTREAM`` (an OpenAI-compatible base URL), default
``http://127.0.0.1:8080/v1``. When that default is used and nothing answers there, a
local llama-server with a tiny random-weight model (real prefix caching, noise output)
is started there: built from source on first use (7-9 minutes, once per machine), so a
newcomer gets a gateway in front of a real prefix-caching server with no API key.
``LITELLM_PREFIX_UPSTREAM=echo`` starts the bundled recording upstream instead (instant,
answers "ok"); so does a failed build.
Port: ``LITELLM_PREFIX_PORT`` (default 4000). Master key: ``LITELLM_MASTER_KEY`` or a random one.
"""
from __future__ import annotations

import os
import secrets
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.error import URLError
from urllib.request import urlopen

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_UPSTREAM = "http://127.0.0.1:8080/v1"


def answers(url: str) -> bool:
    try:
        with urlopen(url, timeout=2) as response:
            return response.status < 500
    except (URLError, OSError, ValueError):
        return False


def main() -> int:
    env = dict(os.environ)
    env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    upstream = env.get("LITELLM_PREFIX_UPSTREAM", DEFAULT_UPSTREAM)
    env["LITELLM_PREFIX_UPSTREAM"] = upstream
    env.setdefault("LITELLM_PREFIX_UPSTREAM_KEY", "none")
    key = env.setdefault("LITELLM_MASTER_KEY", "sk-" + secrets.token_hex(16))
    port = env.get("LITELLM_PREFIX_PORT", "4000")
    children: list[subprocess.Popen] = []

    echo = upstream == "echo"
    if echo:
        upstream = env["LITELLM_PREFIX_UPSTREAM"] = DEFAULT_UPSTREAM
    llama = None
    if upstream == DEFAULT_UPSTREAM and not answers(f"{upstream}/models"):
        if not echo:
            try:
                sys.path.insert(0, str(ROOT / "tools"))
                from llama_server import LlamaServer

                print("No upstream answers at 127.0.0.1:8080: starting a local llama-server with a tiny model "
                      "(built on first use, several minutes).", flush=True)
                llama = LlamaServer(8080, ROOT / ".run-llama-server.log")
                print(f"llama-server ready at {llama.url} (prefix caching on, one slot)", flush=True)
            except Exception as exc:  # no compiler, build failure: the demo still runs
                print(f"llama-server unavailable ({exc}); using the recording upstream instead.", flush=True)
        if llama is None:
            print(f"Starting the bundled recording upstream at {upstream} (it answers 'ok').", flush=True)
            children.append(subprocess.Popen([sys.executable, str(ROOT / "tools" / "recording_upstream.py"),
                                              "--port", "8080"], start_new_session=True))

    litellm_bin = Path(sys.executable).parent / "litellm"
    cmd = [str(litellm_bin), "--config", str(ROOT / "config" / "proxy.yaml"), "--host", "127.0.0.1", "--port", port]
    print("Starting:", shlex.join(cmd), flush=True)
    proxy = subprocess.Popen(cmd, env=env, start_new_session=True)
    children.append(proxy)

    def announce() -> None:
        for _ in range(240):
            if proxy.poll() is not None:
                return
            if answers(f"http://127.0.0.1:{port}/health/liveliness"):
                print(
                    "\nlitellm-prefix gateway is ready. Try:\n\n"
                    f"curl -s http://127.0.0.1:{port}/v1/chat/completions \\\n"
                    f"  -H 'authorization: Bearer {key}' -H 'content-type: application/json' \\\n"
                    "  -H 'x-session-id: demo-session-1' -i \\\n"
                    "  -d '{\"model\": \"local\", \"messages\": [{\"role\": \"system\", \"content\": "
                    "\"Docs: /home/me/.nvm/versions/node/v22.0.0/lib/node_modules/@earendil-works/pi-coding-agent/docs\"}, "
                    "{\"role\": \"user\", \"content\": \"hello\"}]}'\n\n"
                    "Response headers x-litellm-prefix-head / x-litellm-prefix-drift show the head fingerprint and "
                    "any drift.\nPress Ctrl-C to stop.\n",
                    flush=True,
                )
                return
            time.sleep(0.5)

    threading.Thread(target=announce, daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # stop the children on SIGTERM too
    try:
        return proxy.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        if llama is not None:
            llama.stop()
        for child in children:
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGTERM)
                try:
                    child.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(child.pid, signal.SIGKILL)


if __name__ == "__main__":
    sys.exit(main())
