"""`make run`: the LiteLLM proxy with litellm-prefix in front of a real prefix-caching server.

Upstream: ``LITELLM_PREFIX_UPSTREAM`` (an OpenAI-compatible base URL, e.g. a vLLM or
llama.cpp server). When it is not set, a local llama.cpp server (the xllamacpp wheel,
installed by ``make``) serves a tiny random-weight model (real prefix caching, noise
output) on 127.0.0.1:8080, or on a free port when 8080 is taken: no build, no download,
no API key. ``LITELLM_PREFIX_UPSTREAM=echo`` starts the bundled recording upstream
instead (answers "ok").
Port: ``LITELLM_PREFIX_PORT`` (default 4000). Master key: ``LITELLM_MASTER_KEY`` or a random one.
Once the proxy answers, one request goes through it (to check the whole chain) and a
``curl -i`` line to paste is printed. Ctrl-C (or SIGTERM) stops every process started here.
"""
from __future__ import annotations

import json
import os
import secrets
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.error import HTTPError, URLError
from urllib.request import Request, urlopen

from harness.llama_server import LlamaServer, port_is_free

ROOT = Path(__file__).resolve().parent.parent

LLAMA_PORT = 8080
DEMO_BODY = {
    "model": "local",
    "max_tokens": 16,
    "messages": [
        {"role": "system", "content": "You are a coding agent. Docs: /home/me/.nvm/versions/node/v22.0.0/lib/"
                                      "node_modules/@earendil-works/pi-coding-agent/docs"},
        {"role": "user", "content": "hello"},
    ],
}


class Stop(Exception):
    """SIGTERM: leave main() through its cleanup, like Ctrl-C."""


def raise_stop(*_: object) -> None:
    raise Stop()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answers(url: str) -> bool:
    try:
        with urlopen(url, timeout=2) as response:
            return response.status < 500
    except HTTPError as error:
        return error.code < 500
    except (URLError, OSError, ValueError):
        return False


def post(url: str, key: str, body: dict, session: str) -> tuple[int, dict[str, str], float]:
    request = Request(url, data=json.dumps(body).encode(), method="POST", headers={
        "authorization": f"Bearer {key}", "content-type": "application/json", "x-session-id": session})
    started = time.monotonic()
    try:
        with urlopen(request, timeout=120) as response:
            response.read()
            return response.status, dict(response.headers), time.monotonic() - started
    except HTTPError as error:
        return error.code, dict(error.headers), time.monotonic() - started


def stop_group(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=15)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def curl_line(port: str, key: str) -> str:
    return (f"curl -i http://127.0.0.1:{port}/v1/chat/completions \\\n"
            f"  -H 'authorization: Bearer {key}' -H 'content-type: application/json' \\\n"
            f"  -H 'x-session-id: demo-session-1' \\\n"
            f"  -d '{json.dumps(DEMO_BODY)}'")


def main() -> int:
    started = time.monotonic()
    env = dict(os.environ)
    env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    env.setdefault("LITELLM_PREFIX_UPSTREAM_KEY", "none")
    key = env.setdefault("LITELLM_MASTER_KEY", "sk-" + secrets.token_hex(16))
    port = env.get("LITELLM_PREFIX_PORT", "4000")
    if not port.isdigit() or not port_is_free(int(port)):
        print(f"Port {port} on 127.0.0.1 is taken (is another `make run` running?). Stop that one, or choose "
              f"another port: LITELLM_PREFIX_PORT=4001 make run", file=sys.stderr, flush=True)
        return 1
    upstream = env.get("LITELLM_PREFIX_UPSTREAM", "")
    children: list[subprocess.Popen] = []
    llama: LlamaServer | None = None
    signal.signal(signal.SIGTERM, raise_stop)
    try:
        local_port = LLAMA_PORT if port_is_free(LLAMA_PORT) else free_port()
        if upstream in ("", "echo"):
            env["LITELLM_PREFIX_UPSTREAM"] = f"http://127.0.0.1:{local_port}/v1"
        # The proxy takes the longest to start: launch it first, then the upstream beside it.
        litellm_bin = Path(sys.executable).parent / "litellm"
        cmd = [str(litellm_bin), "--config", str(ROOT / "config" / "proxy.yaml"), "--host", "127.0.0.1", "--port", port]
        print("Starting the LiteLLM proxy with litellm-prefix:", shlex.join(cmd), flush=True)
        proxy = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, start_new_session=True)
        children.append(proxy)
        if upstream == "echo":
            print(f"Starting the bundled recording upstream on 127.0.0.1:{local_port} (it answers 'ok').", flush=True)
            children.append(subprocess.Popen([sys.executable, str(ROOT / "harness" / "recording_upstream.py"),
                                              "--port", str(local_port)], stdin=subprocess.DEVNULL,
                                             start_new_session=True))
        elif upstream == "":
            llama = LlamaServer(local_port, ROOT / ".run-llama-server.log")
            print(f"llama.cpp's server is up at {llama.url} (tiny random model: prefix caching is real, the text "
                  "is noise; one slot). Log: .run-llama-server.log", flush=True)
        else:
            print(f"Upstream: {upstream}", flush=True)
        while not answers(f"http://127.0.0.1:{port}/health/liveliness"):
            if proxy.poll() is not None:
                print(f"The proxy exited with {proxy.returncode} before answering (its output is above).",
                      file=sys.stderr, flush=True)
                return 1
            time.sleep(0.5)
        try:
            status, headers, seconds = post(f"http://127.0.0.1:{port}/v1/chat/completions", key, DEMO_BODY,
                                            "make-run-self-check")
            head = headers.get("x-litellm-prefix-head", "(missing)")
            print(f"\nFirst request through the gateway: HTTP {status} in {seconds:.1f} s, x-litellm-prefix-head: "
                  f"{head} ({time.monotonic() - started:.0f} s after start).", flush=True)
        except OSError as error:  # the gateway runs on; the user sees the upstream's error on the pasted request
            print(f"\nThe first request through the gateway failed: {error}", flush=True)
        print("\nlitellm-prefix gateway is ready on http://127.0.0.1:" + port + ". Paste this:\n\n"
              + curl_line(port, key) + "\n\n"
              "The answer's headers x-litellm-prefix-head / x-litellm-prefix-drift show the head fingerprint and "
              "any drift.\nPress Ctrl-C to stop.\n", flush=True)
        return proxy.wait()
    except (KeyboardInterrupt, Stop):
        print("\nStopping.", flush=True)
        return 0
    except (OSError, RuntimeError) as error:  # a port taken meanwhile, a server that did not start: no traceback
        print(f"make run: {error}", file=sys.stderr, flush=True)
        return 1
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):  # a second Ctrl-C must not cut the cleanup short
            signal.signal(sig, signal.SIG_IGN)
        if llama is not None:
            llama.stop()
        for child in children:
            stop_group(child)


if __name__ == "__main__":
    sys.exit(main())
