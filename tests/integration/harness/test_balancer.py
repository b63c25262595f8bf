"""The round-robin balancer the real-agent bench puts in front of gateway replicas
(``bench/real_agents.py --replicas N``): each request, not each connection, goes to the next
backend; bodies pass through byte for byte both ways; a streamed answer reaches the client
chunk by chunk, before the backend has finished it."""
from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from harness.balancer import Balancer

RELEASE = threading.Event()
RELEASED: list[bool] = []  # the backend's wait for the test: True where the client saw the first event in time


def _backend(index: int) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["content-length"]))
            if self.path == "/stream":  # server-sent events: the second event only once the test saw the first
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")
                self.end_headers()
                self.wfile.write(b"data: first\n\n")
                self.wfile.flush()
                RELEASED.append(RELEASE.wait(5))
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                return
            answer = b"%d:%s:%s" % (index, self.path.encode(), body)
            self.send_response(201)
            self.send_header("content-type", "application/octet-stream")
            self.send_header("x-backend", str(index))
            self.send_header("x-seen", f"{self.headers.get('x-agent-id', '-')} {self.headers.get('x-other', '-')}")
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture(scope="module")
def balanced(tmp_path_factory):
    backends = [_backend(0), _backend(1)]
    balancer = Balancer(tmp_path_factory.mktemp("balancer"), [f"http://127.0.0.1:{b.server_address[1]}" for b in backends])
    try:
        yield balancer
    finally:
        balancer.stop()
        for b in backends:
            b.shutdown()


def test_each_request_on_one_connection_goes_to_the_next_backend_unchanged(balanced):
    body = bytes(range(256)) * 300  # every byte value, 76 KB
    before = len(balanced.requests())
    with httpx.Client(base_url=balanced.url, timeout=10) as client:  # one keep-alive connection
        answers = [client.post(f"/v1/chat/completions?n={i}", content=body) for i in range(4)]
    assert [a.status_code for a in answers] == [201] * 4
    first = int(answers[0].headers["x-backend"])
    order = [(first + i) % 2 for i in range(4)]
    assert [int(a.headers["x-backend"]) for a in answers] == order
    assert [a.content for a in answers] == [b"%d:/v1/chat/completions?n=%d:%s" % (b, i, body) for i, b in enumerate(order)]
    assert balanced.requests()[before:] == [(b, "POST", "/v1/chat/completions") for b in order]


def test_a_streamed_answer_reaches_the_client_before_the_backend_finishes_it(balanced):
    RELEASE.clear()
    RELEASED.clear()
    seen: list[str] = []
    with httpx.Client(base_url=balanced.url, timeout=10) as client:
        with client.stream("POST", "/stream", content=b"{}") as response:
            for line in response.iter_lines():
                if line:
                    seen.append(line)
                    RELEASE.set()  # the backend sends the rest only now
    assert seen == ["data: first", "data: [DONE]"]
    assert RELEASED == [True]  # a balancer that held the answer back until its end would leave the backend waiting


def test_a_dropped_header_never_reaches_the_backend_and_the_others_do(tmp_path):
    """``--drop``: the real-agent suite's subagents without their header (scenario h)."""
    backend = _backend(0)
    stripping = Balancer(tmp_path, [f"http://127.0.0.1:{backend.server_address[1]}"], drop=("X-Agent-Id",),
                         name="stripping")
    try:
        with httpx.Client(base_url=stripping.url, timeout=10) as client:
            answer = client.post("/v1/messages", content=b"{}", headers={"x-agent-id": "a1", "x-other": "kept"})
        assert answer.status_code == 201 and answer.headers["x-seen"] == "- kept"
        assert answer.content == b"0:/v1/messages:{}"
    finally:
        stripping.stop()
        backend.shutdown()
