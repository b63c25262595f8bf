"""A round-robin HTTP balancer in front of gateway replicas, as a load balancer in front of a
fleet of LiteLLM proxies: each request (not each connection) goes to the next backend, so one
agent's turns land on the replicas in turn, the hardest case for the session journal they
share. Request and response bodies pass through unchanged (the response streamed chunk by chunk,
server-sent events included). Every request's backend is one line of the log (``<index> <method>
<path>``). ``--drop NAME`` removes that request header on the way (one backend: a client whose
header never reaches the gateway, as behind a proxy that strips it). Run as its own process,
stopped by pid::

    python -m harness.balancer --port P --backend http://127.0.0.1:A --backend http://127.0.0.1:B [--drop NAME]
"""
from __future__ import annotations

import argparse
import http.client
import itertools
import os
import signal
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

from harness.procs import free_port, stop, wait_port

# Headers of one hop (RFC 9110 7.6.1) and the ones this balancer sets itself.
HOP = {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "host",
       "content-length"}


def serve(port: int, backends: list[str], drop: frozenset[str] = frozenset()) -> ThreadingHTTPServer:
    turn = itertools.cycle(range(len(backends)))
    skipped = HOP | {name.lower() for name in drop}
    lock = threading.Lock()
    targets = [urlsplit(b) for b in backends]

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args) -> None:  # one line per request, from _forward
            pass

        def _body(self) -> bytes:
            if "chunked" in (self.headers.get("transfer-encoding") or "").lower():
                out = bytearray()
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                            pass
                        return bytes(out)
                    out += self.rfile.read(size)
                    self.rfile.readline()
            length = int(self.headers.get("content-length") or 0)
            return self.rfile.read(length) if length else b""

        def _forward(self) -> None:
            body = self._body()
            with lock:
                index = next(turn)
            target = targets[index]
            print(index, self.command, self.path.split("?")[0], flush=True)
            conn = http.client.HTTPConnection(target.hostname, target.port, timeout=900)
            try:
                headers = {k: v for k, v in self.headers.items() if k.lower() not in skipped}
                conn.request(self.command, self.path, body=body if body or self.command != "GET" else None,
                             headers=headers)
                response = conn.getresponse()
                self.send_response_only(response.status, response.reason)
                for name, value in response.getheaders():
                    if name.lower() not in HOP:
                        self.send_header(name, value)
                if self.command == "HEAD" or response.status in (204, 304):
                    self.send_header("content-length", "0")
                    self.end_headers()
                    return
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                while chunk := response.read1(65536):
                    self.wfile.write(b"%x\r\n%b\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except OSError:
                self.close_connection = True
            finally:
                conn.close()

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _forward

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    return server


class Balancer:
    """``python -m harness.balancer`` in its own process group on 127.0.0.1; stopped by pid."""

    def __init__(self, workdir: Path, backends: list[str], drop: tuple[str, ...] = (), name: str = "balancer") -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = workdir / f"{name}.log"
        root = str(Path(__file__).resolve().parent.parent)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "harness.balancer", "--port", str(self.port),
             *(a for b in backends for a in ("--backend", b)), *(a for d in drop for a in ("--drop", d))],
            stdout=self.log.open("w"), stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))})
        wait_port(self.port, self.proc, 30, self.log, "balancer")

    def requests(self) -> list[tuple[int, str, str]]:
        """(backend index, method, path) of every request so far, in order."""
        out = []
        for line in self.log.read_text().splitlines():
            parts = line.split(" ", 2)
            if len(parts) == 3 and parts[0].isdigit():
                out.append((int(parts[0]), parts[1], parts[2]))
        return out

    def stop(self) -> None:
        stop(self.proc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--backend", action="append", required=True)
    parser.add_argument("--drop", action="append", default=[], help="a request header not passed on")
    args = parser.parse_args()
    server = serve(args.port, args.backend, frozenset(args.drop))
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    server.serve_forever()


if __name__ == "__main__":
    main()
