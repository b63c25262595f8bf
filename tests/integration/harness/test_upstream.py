"""The recording upstream is a fixture of the e2e tests and of the load benchmark: under a
burst of connections it must accept them all at once, never leave one to a SYN retransmit."""
from __future__ import annotations

import socket

from harness import recording_upstream


def test_a_burst_of_connections_fits_the_listen_backlog():
    # The server accepts nothing yet (no serve_forever): every connection waits in the kernel's
    # backlog. socketserver's default backlog (5) holds 6; the kernel drops the rest, whose
    # connect then waits for a retransmit (1 s) and times out here.
    server = recording_upstream.serve("127.0.0.1", 0, None)
    clients: list[socket.socket] = []
    try:
        for _ in range(64):  # twice bench/load.py's 32 concurrent sessions
            client = socket.socket()
            client.settimeout(0.5)
            client.connect(server.server_address)
            clients.append(client)
        assert len(clients) == 64
    finally:
        for client in clients:
            client.close()
        server.server_close()
