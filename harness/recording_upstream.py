"""A tiny OpenAI/Anthropic/Responses-compatible upstream that records request bytes.

Used by the end-to-end tests (they assert on the exact bytes a real LiteLLM proxy
forwarded) and by ``make run`` as a stand-in model when no upstream is configured.
Standard library only; listens on 127.0.0.1.

    python harness/recording_upstream.py --port 18080 --record /tmp/requests.jsonl

Every POST is appended to the record file as one JSON line:
``{"path": ..., "headers": {...}, "body": "<raw body text>"}``.
``GET /_recorded`` returns the same lines; ``POST /_reset`` clears them. ``POST /_fault``
with ``{"status": 429}`` answers every model call with that status from then on, ``{"delay": 8}``
answers them only after 8 s (neither recorded), ``{}`` ends the fault.
Answers are fixed text; ``cached_tokens`` in ``usage`` reports the length (in
characters / 4) of the longest prefix this body shares with the previous body of the
same path, so callers can see prefix reuse without a real model.
"""
from __future__ import annotations

import argparse
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REPLY = "ok"


def _common_prefix_len(a: str, b: str) -> int:
    """Length of the common prefix, by binary search on slice equality (fast on 500 KB bodies).

    (The same search as litellm_prefix.request.drift.first_difference, kept here on purpose: this
    upstream is a test fixture and imports nothing from the package it checks.)"""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) // 2
        if a[lo : mid + 1] == b[lo : mid + 1]:
            lo = mid + 1
        else:
            hi = mid
    return lo


class _State:
    def __init__(self, record_path: str | None) -> None:
        self.lock = threading.Lock()
        self.records: list[dict] = []
        self.last_body: dict[str, str] = {}
        self.record_path = record_path
        self.fault_status: int | None = None  # POST /_fault: answer model calls with this status
        self.fault_delay = 0.0  # ... or only after this many seconds (a slow upstream)

    def add(self, path: str, headers: dict, body: str) -> int:
        with self.lock:
            entry = {"path": path, "headers": headers, "body": body}
            self.records.append(entry)
            if self.record_path:
                with open(self.record_path, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps(entry) + "\n")
            prev = self.last_body.get(path, "")
            self.last_body[path] = body
            return _common_prefix_len(prev, body)


def _chat_response(model: str, prompt_chars: int, cached_chars: int) -> dict:
    return {
        "id": "chatcmpl-rec",
        "object": "chat.completion",
        "created": 1700000000,
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": REPLY}, "finish_reason": "stop"}
        ],
        "usage": {
            "prompt_tokens": max(1, prompt_chars // 4),
            "completion_tokens": 1,
            "total_tokens": max(1, prompt_chars // 4) + 1,
            "prompt_tokens_details": {"cached_tokens": cached_chars // 4},
        },
    }


def _chat_stream(model: str, prompt_chars: int, cached_chars: int) -> list[bytes]:
    base = {"id": "chatcmpl-rec", "object": "chat.completion.chunk", "created": 1700000000, "model": model}
    chunks = [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": REPLY}, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {**base, "choices": [], "usage": _chat_response(model, prompt_chars, cached_chars)["usage"]},
    ]
    return [f"data: {json.dumps(c)}\n\n".encode() for c in chunks] + [b"data: [DONE]\n\n"]


def _anthropic_response(model: str, prompt_chars: int, cached_chars: int) -> dict:
    return {
        "id": "msg_rec",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": REPLY}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": max(1, (prompt_chars - cached_chars) // 4),
            "output_tokens": 1,
            "cache_read_input_tokens": cached_chars // 4,
            "cache_creation_input_tokens": 0,
        },
    }


def _responses_response(model: str, prompt_chars: int, cached_chars: int) -> dict:
    return {
        "id": "resp_rec",
        "object": "response",
        "created_at": 1700000000,
        "status": "completed",
        "model": model,
        "output": [
            {
                "type": "message",
                "id": "msg_rec",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": REPLY, "annotations": []}],
            }
        ],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": max(1, prompt_chars // 4),
            "output_tokens": 1,
            "total_tokens": max(1, prompt_chars // 4) + 1,
            "input_tokens_details": {"cached_tokens": cached_chars // 4},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


class JsonHandler(BaseHTTPRequestHandler):
    """A quiet keep-alive handler that answers JSON or a server-sent event stream (also the
    real-agent suite's scripted model's base)."""

    protocol_version = "HTTP/1.1"
    # Buffered writes: status, headers and body leave in one send (unbuffered, they go as
    # separate small packets and Nagle + delayed ACK add ~40 ms to a keep-alive client).
    wbufsize = 1 << 16

    def log_message(self, fmt, *args):  # keep test output quiet
        pass

    def _send_json(self, obj, status=200):
        raw = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def _send_stream(self, chunks, flush_each: bool = True) -> None:
        """An event stream of ``chunks`` (bytes), then the connection closes."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        for chunk in chunks:
            self.wfile.write(chunk)
            if flush_each:
                self.wfile.flush()
        self.wfile.flush()
        self.close_connection = True


def make_handler(state: _State):
    class Handler(JsonHandler):
        state = None  # set below, for in-process users (examples)

        def do_GET(self):
            if self.path.startswith("/_recorded"):
                with state.lock:
                    self._send_json(list(state.records))
            elif self.path.startswith("/health") or self.path.startswith("/v1/models"):
                self._send_json({"status": "ok", "data": [{"id": "recording-upstream", "object": "model"}]})
            else:
                self._send_json({"error": "not found"}, 404)

        def do_POST(self):
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length).decode("utf-8", errors="replace")
            if self.path.startswith("/_reset"):
                with state.lock:
                    state.records.clear()
                    state.last_body.clear()
                self._send_json({"ok": True})
                return
            if self.path.startswith("/_fault"):
                fault = json.loads(raw or "{}")
                state.fault_status, state.fault_delay = fault.get("status"), float(fault.get("delay") or 0)
                self._send_json({"ok": True})
                return
            if state.fault_status:  # a faulty upstream: an error answer, nothing recorded
                self._send_json({"error": {"message": "injected fault", "type": "server_error"}},
                                state.fault_status)
                return
            if state.fault_delay:  # a slow upstream: it answers, too late to be recorded
                time.sleep(state.fault_delay)
                self._send_json(_chat_response("slow", len(raw), 0))
                return
            headers = {k.lower(): v for k, v in self.headers.items() if k.lower() not in ("authorization", "x-api-key")}
            cached = state.add(self.path, headers, raw)
            try:
                body = json.loads(raw) if raw else {}
            except ValueError:
                body = {}
            model = str(body.get("model", "recording-upstream"))
            n = len(raw)
            if self.path.endswith("/messages"):
                self._send_json(_anthropic_response(model, n, cached))
            elif self.path.endswith("/responses"):
                self._send_json(_responses_response(model, n, cached))
            elif self.path.endswith("/chat/completions"):
                if body.get("stream"):
                    self._send_stream(_chat_stream(model, n, cached))
                else:
                    self._send_json(_chat_response(model, n, cached))
            else:
                self._send_json({"error": f"unknown path {self.path}"}, 404)

    Handler.state = state
    return Handler


class Server(ThreadingHTTPServer):
    # socketserver's default listen backlog is 5: a proxy that opens 32 connections at once
    # overflows it, and each connection the kernel drops waits for a SYN retransmit (1 s, then
    # 3 s): seconds of latency that belong to neither the proxy nor the plugin.
    request_queue_size = 1024
    daemon_threads = True


def serve(host: str, port: int, record_path: str | None) -> ThreadingHTTPServer:
    return Server((host, port), make_handler(_State(record_path)))


def run_server(serve_on, name: str, description: str, default_port: int) -> None:
    """A test server's command line (``--host``, ``--port``, ``--record``): serve until interrupted."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=default_port)
    parser.add_argument("--record", default=None, help="append each request as a JSON line to this file")
    args = parser.parse_args()
    server = serve_on(args.host, args.port, args.record)
    print(f"{name} listening on http://{args.host}:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def main() -> None:
    run_server(serve, "recording upstream", __doc__.splitlines()[0],
               int(os.environ.get("RECORDING_UPSTREAM_PORT", "18080")))


if __name__ == "__main__":
    main()
