"""Start and stop a local llama.cpp server (prefix caching on) with the tiny model, from a wheel.

The server is llama.cpp's own HTTP server as shipped by the ``xllamacpp`` wheel (PyPI,
manylinux2014 x86_64, AVX2 baseline; no compiler, no system package): this file, run as
a script (``python -m harness.llama_server --port N``), starts ``xllamacpp.Server`` in its
own process and serves until SIGTERM/SIGINT or until its parent dies. ``LlamaServer``
launches that process, waits for ``/health`` and stops it by process group.

Settings match ``llama-server -np 1 --cache-prompt --cache-ram 0 --jinja``: one slot by
default, prompt caching on and no RAM prompt cache, so the server reuses exactly the
longest common token prefix with the previous request of a slot (what the replay's model
counts); ``n_parallel`` slots get ``ctx_per_slot`` tokens each. The model's own ChatML
template (harness/make_tiny_model.py) renders chats. Listens on 127.0.0.1 only. Answers
carry ``timings.prompt_n`` / ``timings.cache_n`` and
``usage.prompt_tokens_details.cached_tokens``.

Used by ``make run`` (the default upstream), the benchmarks and the end-to-end tests. Where
the wheel is missing but ``make llama-server`` has built the binary from source, that
binary runs instead, with the same settings.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.error import URLError
from urllib.request import urlopen

from harness.make_tiny_model import ensure_model

ROOT = Path(__file__).resolve().parent.parent


def _with_root(pythonpath: str | None) -> str:
    """PYTHONPATH for ``python -m harness.…`` children: the repository root first."""
    return os.pathsep.join(filter(None, [str(ROOT), pythonpath]))


WHEEL = "xllamacpp"
# OpenMP threads that sleep instead of spinning between batches: on a busy 2-core machine
# (tests, proxies and other jobs beside the server) prefill ran about twice as fast so.
SERVER_ENV = {"OMP_WAIT_POLICY": "passive"}


class PortTaken(OSError):
    """The port is already in use on 127.0.0.1."""


def healthy(url: str) -> bool:
    try:
        with urlopen(f"{url}/health", timeout=2) as response:
            return response.status == 200
    except (URLError, OSError, ValueError):
        return False


def port_is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def source_build() -> Path | None:
    """The llama-server binary of the opt-in source build, if there is one."""
    from harness.llama_build import binary_path

    path = binary_path()
    return path if path.is_file() and os.access(path, os.X_OK) else None


def server_version() -> str:
    """Which llama.cpp build serves: the xllamacpp wheel's version."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"{WHEEL} {version(WHEEL)}"
    except PackageNotFoundError:
        return f"{WHEEL} (not installed)"


class LlamaServer:
    """A llama.cpp server process on 127.0.0.1:``port``; ``.url``, ``.port``, ``.stop()``."""

    def __init__(self, port: int, log: Path | None = None, *, n_parallel: int = 1, ctx_per_slot: int = 32768,
                 threads: int = 2, n_predict: int = 512, model: Path | None = None, timeout: float = 120,
                 chat_template: Path | None = None) -> None:
        # chat_template: a Jinja template file to render chats with instead of the model's own
        built = source_build()
        if importlib.util.find_spec(WHEEL) is None and built is None:
            raise RuntimeError(f"the {WHEEL} wheel (llama.cpp's server) is not installed in {sys.executable}: "
                               "run `make test` or `make run` once (they install it into .venv), "
                               f"or `{sys.executable} -m pip install {WHEEL}`; without a wheel for this machine, "
                               "`make llama-server` builds one from source")
        if not port_is_free(port):
            raise PortTaken(f"port {port} on 127.0.0.1 is taken: cannot start llama.cpp's server there")
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.log = log
        self.model = model or ensure_model()
        out = log.open("a") if log else subprocess.DEVNULL
        if importlib.util.find_spec(WHEEL) is not None:
            cmd = [sys.executable, "-m", "harness.llama_server", "--port", str(port), "--model", str(self.model),
                   "--n-parallel", str(n_parallel), "--ctx-per-slot", str(ctx_per_slot), "--threads", str(threads),
                   "--n-predict", str(n_predict)] + (["--chat-template-file", str(chat_template)] if chat_template else [])
        else:  # the opt-in source build (tools/build_llama_server.py), same settings as flags
            cmd = [str(built), "-m", str(self.model), "--host", "127.0.0.1", "--port", str(port),
                   "-np", str(n_parallel), "-c", str(ctx_per_slot * n_parallel), "--cache-prompt",
                   "--cache-ram", "0", "--jinja", "--no-webui", "-t", str(threads), "-n", str(n_predict)]
            if chat_template:
                cmd += ["--chat-template-file", str(chat_template)]
        self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env={**os.environ, **SERVER_ENV, "PYTHONPATH": _with_root(os.environ.get("PYTHONPATH"))},
                                     start_new_session=True)
        if log:
            out.close()
        try:
            deadline = time.monotonic() + timeout
            while not healthy(self.url):
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    tail = log.read_text(errors="replace")[-3000:] if log and log.exists() else ""
                    raise RuntimeError(f"llama.cpp's server ({server_version()}) did not come up on {self.url}"
                                       + (f"; log {log}:\n{tail}" if log else ""))
                time.sleep(0.2)
        except BaseException:  # also Ctrl-C while waiting: never leave the process behind
            self.stop()
            raise

    def stop(self) -> None:
        if self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=10)
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def __enter__(self) -> LlamaServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve(port: int, model: Path, n_parallel: int, ctx_per_slot: int, threads: int, n_predict: int,
          chat_template: Path | None = None) -> int:
    """Run llama.cpp's server in this process until SIGTERM/SIGINT or the parent's death."""
    for name, value in SERVER_ENV.items():  # before libgomp loads with xllamacpp
        os.environ.setdefault(name, value)
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(model)
    params.hostnames = ["127.0.0.1"]
    params.port = port
    params.n_parallel = n_parallel
    params.n_ctx = ctx_per_slot * n_parallel  # split evenly: each slot keeps its own prefix
    params.kv_unified = False
    params.cache_prompt = True
    params.cache_ram_mib = 0  # no RAM prompt cache: exactly one slot's longest common prefix
    params.use_jinja = True  # the model's ChatML template
    if chat_template is not None:  # or the one given (a strict one, in the tests)
        params.chat_template = chat_template.read_text()
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.n_predict = n_predict  # a cap: random weights rarely stop on their own; max_tokens below it wins
    params.ui = False
    params.warmup = False
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: stopping.set())
    parent = os.getppid()
    server = xllamacpp.Server(params)  # serves HTTP on its own threads from here on
    print(f"{server_version()} listening on {server.listening_address}, {n_parallel} slot(s) of {ctx_per_slot} "
          "tokens, cache_prompt on, cache_ram 0", flush=True)
    while not stopping.wait(0.5):
        if os.getppid() != parent:  # the launcher died without stopping us: do not linger
            break
    sys.stdout.flush()
    os._exit(0)  # the server's threads end with the process; no slow destructor on the way out


def main() -> int:
    parser = argparse.ArgumentParser(description="Serve the tiny model with llama.cpp's server (xllamacpp wheel).")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--model", type=Path, default=None, help="GGUF file (default: the tiny model)")
    parser.add_argument("--n-parallel", type=int, default=1)
    parser.add_argument("--ctx-per-slot", type=int, default=32768)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n-predict", type=int, default=512, help="most tokens one answer may generate")
    parser.add_argument("--chat-template-file", type=Path, default=None,
                        help="Jinja chat template to use instead of the model's own")
    args = parser.parse_args()
    return serve(args.port, args.model or ensure_model(), args.n_parallel, args.ctx_per_slot, args.threads,
                 args.n_predict, args.chat_template_file)


if __name__ == "__main__":
    sys.exit(main())
