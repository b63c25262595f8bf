"""Redis on the proxy's own event loop: one connection, many requests in flight, the budget
judged on the wire.

The shared store makes one or two Redis calls per request. redis-py's blocking client on
worker threads judges the budget on the wire (the kernel's socket timeout), but while the
event loop is busy most of each call's CPU is the worker and the loop handing the GIL back
and forth, and a call can overrun the budget waiting for the GIL; redis-py's asyncio client
needs a connection per concurrent call and leaves the budget to a timer around its coroutine
(``asyncio.wait_for``), which expires on a busy loop while the answer waits unread. This
client:

- speaks RESP on one asyncio connection per event loop: every call is written at once and
  answered in order (Redis answers a connection's commands in the order they came), the
  replies parsed by hiredis (a dependency of ``litellm[proxy]``), all on the loop's thread
  (its cost per call against the other clients: ``bench/store_calls.py``);
- judges the budget on the wire. A reply settles its caller's future in the very callback
  that reads it from the socket, and the loop reads its sockets before it runs the timers
  that came due (asyncio and libuv alike), so a loop that ran late finds the answers that
  came in time. When a call's timer fires, the call is abandoned only if its command has
  left this process (nothing in the transport's write buffer) and nothing has come back
  from Redis since the timer was set (no reply bytes read, none waiting in the socket): a
  Redis that sends nothing for a whole budget is slow, one that is still sending gets
  another budget. The same rule holds for the connect: a socket the kernel has connected
  is not a slow Redis;
- abandons a call by failing its caller only: its reply, when it comes, is read and dropped
  in its turn, so the connection stays in step.

It serves ``redis://``, ``rediss://`` and ``unix://`` URLs (user, password, database,
``ssl_cert_reqs``); any other URL, and ``store: proxy`` (LiteLLM's own Redis set-ups: IAM,
cluster, sentinel), use redis-py's blocking client on worker threads.
"""
from __future__ import annotations

import asyncio
import select
import socket
import ssl
from collections import deque
from typing import Any
from urllib.parse import unquote, urlparse

try:
    import hiredis
except ImportError:  # pragma: no cover - litellm[proxy] requires hiredis
    hiredis = None


# The URL options this client understands; a URL with any other (TLS client certificates, a
# CA file, socket options) goes to redis-py's blocking client, which knows them all.
OPTIONS = {"db", "ssl_cert_reqs"}


def supported(url: str) -> bool:
    parsed = urlparse(url)
    options = {part.split("=", 1)[0] for part in parsed.query.split("&") if part}
    return hiredis is not None and parsed.scheme in ("redis", "rediss", "unix") and options <= OPTIONS


def encode(args: tuple) -> bytes:
    """One RESP command (an array of bulk strings). Text is UTF-8, a lone surrogate (valid in
    JSON, so in a prompt) included: the replies decode it back the same way."""
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode("utf-8", "surrogatepass")
        parts += (b"$%d\r\n" % len(data), data, b"\r\n")
    return b"".join(parts)


def _ready(fd: int, events: int) -> bool:
    """Whether the kernel has ``events`` for ``fd`` right now (poll: any descriptor number)."""
    try:
        poller = select.poll()
        poller.register(fd, events)
        return bool(poller.poll(0))
    except (OSError, ValueError):
        return False


class _Protocol(asyncio.Protocol):
    """One connection: the callers' futures in the order their commands were written."""

    def __init__(self) -> None:
        self.reader = hiredis.Reader(encoding="utf-8", errors="surrogatepass")
        self.waiting: deque[asyncio.Future] = deque()
        self.transport: Any = None
        self.received = 0  # reply bytes read so far: progress on the wire
        self.lost: BaseException | None = None
        self.closed = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.received += len(data)
        self.reader.feed(data)
        while (reply := self.reader.gets()) is not False:
            if not self.waiting:  # pragma: no cover - Redis answered a command nobody sent
                self.transport.close()
                return
            future = self.waiting.popleft()
            if future.done():  # abandoned (slow) or cancelled: its reply is read and dropped
                continue
            if isinstance(reply, hiredis.ReplyError):
                future.set_exception(reply)
            else:
                future.set_result(reply)

    def connection_lost(self, exc: BaseException | None) -> None:
        self.lost = ConnectionError(f"connection to Redis lost ({exc or 'closed by the server'})")
        while self.waiting:
            future = self.waiting.popleft()
            if not future.done():
                future.set_exception(self.lost)
        if not self.closed.done():
            self.closed.set_result(None)

    def pending_on_wire(self) -> bool:
        """Bytes from Redis this process has not read yet (a loop that runs late)."""
        transport = self.transport
        sock = transport.get_extra_info("socket") if transport is not None else None
        return sock is not None and _ready(sock.fileno(), select.POLLIN)

    def unsent(self) -> bool:
        transport = self.transport
        return transport is not None and transport.get_write_buffer_size() > 0


class RedisWire:
    """Calls to one Redis server from any event loop (one connection per loop)."""

    def __init__(self, url: str, budget: float, cap: float) -> None:
        parsed = urlparse(url)
        self.unix = parsed.scheme == "unix"
        self.path = unquote(parsed.path) if self.unix else None
        self.host = parsed.hostname or "localhost"
        self.port = parsed.port or 6379
        self.tls = parsed.scheme == "rediss"
        query = dict(part.split("=", 1) for part in parsed.query.split("&") if "=" in part)
        database = query.get("db") or (parsed.path.lstrip("/") if not self.unix else "") or "0"
        self.db = int(database)
        self.username = unquote(parsed.username) if parsed.username else None
        self.password = unquote(parsed.password) if parsed.password else None
        self.verify = query.get("ssl_cert_reqs", "required").lower() not in ("none", "cert_none")
        self.budget = budget
        self.cap = cap  # the loop's own limit on a name lookup and a TLS handshake
        self.sends = 0  # commands written (round trips when each waits for its answer)
        # Per event loop (a forked child, a test, a thread with its own loop): its connection,
        # and the task opening it; a closed loop's are dropped when another loop connects.
        self._connections: dict[asyncio.AbstractEventLoop, _Protocol] = {}
        self._connecting: dict[asyncio.AbstractEventLoop, asyncio.Task] = {}

    # -- calls --------------------------------------------------------------------------

    async def call(self, *args: Any) -> Any:
        return await self._call((args,), False)

    async def pipeline(self, *commands: tuple) -> list[Any]:
        """Several commands written together, one round trip."""
        return await self._call(commands, True)

    async def _call(self, commands: tuple, all_replies: bool) -> Any:
        protocol = await self._connection()
        try:
            return await self._send(protocol, commands, all_replies)
        except ConnectionError as exc:
            if exc is not protocol.lost:
                raise
        # The connection died under the call: once more, at once, on a new one. A restarted Redis
        # leaves the old connection dead, and this process may write on it before it has read the
        # close. Safe for every call the store makes: reads, text writes, and a compare-and-set
        # that Redis may have run already fails its second run (the request then reloads).
        protocol = await self._connection()
        return await self._send(protocol, commands, all_replies)

    async def _send(self, protocol: _Protocol, commands: tuple, all_replies: bool = False) -> Any:
        loop = asyncio.get_running_loop()
        payload = b"".join(encode(args) for args in commands)  # before any future joins the queue
        futures = [loop.create_future() for _ in commands]
        protocol.waiting.extend(futures)
        protocol.transport.write(payload)
        self.sends += 1
        seen = [protocol.received]

        def answering() -> bool:  # the command still on its way out, or Redis sending since the last look
            moving = protocol.unsent() or protocol.received != seen[0] or protocol.pending_on_wire()
            seen[0] = protocol.received
            return moving

        try:  # the replies come in order: the last one answers them all
            await self._within_budget(futures[-1], answering, lambda: TimeoutError(
                f"no answer from Redis within {self.budget * 1000:.0f} ms on the wire"))
        finally:
            for future in futures:  # abandoned: their replies are dropped when they come
                if not future.done():
                    future.cancel()
        return [f.result() for f in futures] if all_replies else futures[0].result()

    async def _within_budget(self, waited: asyncio.Future, progressing: Any, failure: Any) -> Any:
        """Await ``waited``. Each time a budget passes without it, ``progressing()`` says whether
        the wire shows progress (then another budget), else ``waited`` is given up and
        ``failure()`` raised (see the module's docstring)."""
        loop = asyncio.get_running_loop()
        expired = False

        def check() -> None:
            nonlocal handle, expired
            if waited.done():
                return
            if progressing():
                handle = loop.call_later(self.budget, check)
                return
            expired = True
            waited.cancel()

        handle = loop.call_later(self.budget, check)
        try:
            return await waited
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if expired and not (task is not None and task.cancelling()):  # given up here, not cancelled by the caller
                raise failure() from None
            raise
        finally:
            handle.cancel()

    # -- the connection -------------------------------------------------------------------

    async def _connection(self) -> _Protocol:
        loop = asyncio.get_running_loop()
        protocol = self._connections.get(loop)
        if protocol is not None and protocol.lost is None and not protocol.transport.is_closing():
            return protocol
        connecting = self._connecting.get(loop)
        if connecting is None or connecting.done():
            self._connections.pop(loop, None)
            for other in [other for other in self._connecting if other.is_closed()]:
                self._connections.pop(other, None)
                self._connecting.pop(other, None)
            connecting = self._connecting[loop] = loop.create_task(self._connect())
            # Retrieved here too: every caller may have gone away before the connect failed.
            connecting.add_done_callback(lambda task: task.cancelled() or task.exception())
        return await asyncio.shield(connecting)

    async def _connect(self) -> _Protocol:
        loop = asyncio.get_running_loop()
        if self.unix:
            family, address = socket.AF_UNIX, self.path
        else:
            infos = await asyncio.wait_for(loop.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM), self.cap)
            family, _, _, _, address = infos[0]
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            if family != socket.AF_UNIX:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            # A socket the kernel has connected (writable) is not a slow Redis: this loop runs late.
            await self._within_budget(asyncio.ensure_future(loop.sock_connect(sock, address)),
                                      lambda: _ready(sock.fileno(), select.POLLOUT), lambda: ConnectionError(
                                          f"no connection to Redis within {self.budget * 1000:.0f} ms"))
            context = None
            if self.tls:
                context = ssl.create_default_context()
                if not self.verify:
                    context.check_hostname = False
                    context.verify_mode = ssl.CERT_NONE
            _, protocol = await asyncio.wait_for(loop.create_connection(
                _Protocol, sock=sock, ssl=context, server_hostname=self.host if context else None), self.cap)
        except BaseException:
            sock.close()
            raise
        hello: list[tuple] = []
        if self.password is not None:
            hello.append(("AUTH", self.username, self.password) if self.username else ("AUTH", self.password))
        if self.db:
            hello.append(("SELECT", self.db))
        if hello:
            try:
                await self._send(protocol, tuple(hello), all_replies=True)
            except BaseException:
                protocol.transport.close()
                raise
        self._connections[loop] = protocol
        return protocol

    async def close(self) -> None:
        """Close this loop's connection."""
        protocol = self._connections.pop(asyncio.get_running_loop(), None)
        if protocol is not None and protocol.transport is not None:
            protocol.transport.close()
            await protocol.closed
