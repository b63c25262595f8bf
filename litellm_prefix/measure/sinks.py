"""Where the transform's events and the upstream's measurements go: the ``litellm_prefix``
logger, the JSONL log (``LITELLM_PREFIX_LOG``), the proxy's response headers, Prometheus
metrics, opt-in symlinks; and the measured cache use of every call with its class.

Two moments per call:

- ``transformed`` (request path, after the transform): log rewrites and drift, and keep
  what the classifier will need under the call's ``litellm_call_id``: the session, the
  request's ``Shape`` (digests and offsets, never text) and what it shares with the
  session's previous request (``prefix.compare``).
- ``completed`` (LiteLLM's success callback, streaming included): read the cached tokens
  the upstream reported, classify the call (``classify.classify``), write one ``call``
  record to the JSONL log (a drift's record carries the measured cost of the turn that
  followed it) and count it in the metrics.

The JSONL log is written by ``LogWriter``, off the request path: a call hands its record
(a dict of hashes, offsets, counts and names) to a bounded queue and returns; one daemon
thread wakes at a record, waits a quarter of a second for the ones behind it (a flush cuts the
wait short), encodes them and appends them in one write. A full queue drops the record
and counts it (``log_dropped`` in the internal-events metric and a warning line, at most one a
minute, with the count so far): no record is lost silently. ``flush`` waits for the queue to
drain (``stabilize_sync`` and the process's exit call it).

Per session only the last call's shape, measured prompt tokens, end time and deployment
id are kept, in a bounded in-process map (``maxSessions``, ``sessionTtlSeconds``).
Nothing here may fail a call: every entry point catches, logs and counts.
"""
from __future__ import annotations

import atexit
import hashlib
import json
import logging
import queue
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from cachetools import LRUCache, TTLCache

from ..caches import Expiring
from ..request.disk import forget_path
from ..request.events import AgentSeen, BillingBlock, Drift, Event, HeadSeen, payload
from ..request.symlink import ensure_symlink
from ..request.target import Target, cost_map_value
from ..settings import Settings
from . import classify, metrics, prefix, pricing

logger = logging.getLogger("litellm_prefix")

# A link that could not be made is tried again after this long (a failure per request would
# cost a syscall and a log line on every request).
LINK_RETRY_SECONDS = 60.0

_BOOKKEEPING = frozenset({"texts", "need_texts", "drift", "head", "agent"})
# Bytes of the recent sessions' last measured shapes (``prefix.Seen``: digests, no text), from
# which the next request is measured where the incremental path proved its leading messages
# equal; a session past the bound is measured whole.
SEEN_BYTES = 32 << 20
SEEN_OBJECT_BYTES = 400  # a Seen's and its Shape's own objects, beside the digests they hold


def _seen_size(seen: prefix.Seen) -> int:
    shape = seen.shape
    return SEEN_OBJECT_BYTES + len(shape.digests) + 4 * len(shape.lengths) + sum(map(len, shape.pieces.values()))


class LogWriter:
    """The JSONL log's writer: a bounded queue drained by one daemon thread (see the module docstring)."""

    MAX_QUEUED = 10_000  # records; at a few hundred bytes each, a few MB at most
    BATCH = 512
    # A first record waits this long for the ones behind it (a burst of requests brings two
    # each): the thread wakes and appends once a batch, not once a record. Woken per record,
    # it took the GIL from the event loop and opened the file twice a request: with the log on,
    # a proxy spent about 1 ms more a request (bench/load.py --log, three runs pooled).
    WAIT = 0.25
    WARN_EVERY = 60.0  # seconds between two warnings about dropped records

    def __init__(self, path: str, stats: Any, *, wait: float | None = None, max_queued: int | None = None) -> None:
        self.path, self.stats = path, stats
        self.wait = self.WAIT if wait is None else wait
        self.dropped = 0
        self.batches = 0  # appends to the file so far
        self._queue: queue.Queue = queue.Queue(maxsize=self.MAX_QUEUED if max_queued is None else max_queued)
        self._hurry = threading.Event()  # a flush is waiting: write what is queued now
        self._warned = 0.0
        self._thread = threading.Thread(target=self._drain, name="litellm-prefix-log", daemon=True)
        self._thread.start()
        _WRITERS.add(self)

    def put(self, record: Mapping[str, Any]) -> None:
        try:
            self._queue.put_nowait(record)
        except queue.Full:
            self.dropped += 1
            self.stats["log_dropped"] += 1
            now = time.monotonic()
            if now - self._warned >= self.WARN_EVERY:
                self._warned = now
                logger.warning("litellm-prefix: JSONL log behind; %d record(s) dropped so far", self.dropped)

    def flush(self, timeout: float = 10.0) -> None:
        """Wait until every record queued so far is written (or ``timeout`` passes)."""
        done = threading.Event()
        self._hurry.set()  # first: a full queue makes room only once the writer stops waiting
        try:
            self._queue.put(done, timeout=timeout)
        except queue.Full:
            return
        self._hurry.set()  # and again: the writer may have taken a record and begun a wait since
        done.wait(timeout)

    def _drain(self) -> None:
        while True:
            batch = [self._queue.get()]
            if not isinstance(batch[0], threading.Event):
                self._hurry.wait(self.wait)  # the rest of the burst; a flush cuts it short
            self._hurry.clear()
            while len(batch) < self.BATCH:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            lines = [json.dumps(r, ensure_ascii=False, sort_keys=True, default=str) + "\n"
                     for r in batch if not isinstance(r, threading.Event)]
            if lines:
                try:
                    with open(self.path, "a", encoding="utf-8") as fh:
                        fh.write("".join(lines))
                    self.batches += 1
                except OSError as exc:
                    self.dropped += len(lines)
                    self.stats["log_dropped"] += len(lines)
                    self.stats["errors"] += 1
                    logger.warning("litellm-prefix: JSONL log not written (%s); %d record(s) dropped so far",
                                   type(exc).__name__, self.dropped)
            for r in batch:
                if isinstance(r, threading.Event):
                    r.set()


_WRITERS: weakref.WeakSet[LogWriter] = weakref.WeakSet()


@atexit.register
def flush_logs(timeout: float = 5.0) -> None:
    """Wait until every JSONL log of this process holds every record handed to it so far."""
    for writer in list(_WRITERS):
        writer.flush(timeout=timeout)


@dataclass
class Report:
    """What one request produced, kept briefly for the proxy's response header."""

    head: str
    drift: Drift | None = None
    agent: str | None = None


@dataclass
class CallRecord:
    """The last call of a session: what the next call is compared with."""

    shape: prefix.Shape
    turn: int = 1
    tokens: int | None = None  # prompt tokens the upstream reported
    end: float | None = None  # when it completed (time.time())
    deployment: str = ""
    cached: int = 0  # tokens it read from the cache
    written: int = 0  # tokens it wrote to the cache (paid writes: Anthropic, OpenAI GPT-5.6+)
    write_ttl: int = 300  # seconds that write stays readable
    write_1h: bool = False


@dataclass
class Pending:
    session: str  # hashed session key (16 hex digits)
    record: CallRecord
    previous: CallRecord | None
    shared: prefix.Shared | None
    drift: Drift | None
    model_group: str
    agent: str
    provider: str
    started: float


def agent_of(events: list[Event]) -> str:
    """The agent profile's name where the request was recognised as one (its ``agent`` event)."""
    seen = payload(events, AgentSeen)
    return seen.name if seen is not None else ""


def _tenant_of(slo: Mapping[str, Any]) -> str:
    """A short hash of the call's tenant (team, else API key hash) for the report's per-tenant
    figures; "" for an unauthenticated call. Never the raw id."""
    meta = slo.get("metadata")
    if not isinstance(meta, Mapping):
        return ""
    team, key = meta.get("user_api_key_team_id"), meta.get("user_api_key_hash")
    tenant = f"team:{team}" if isinstance(team, str) and team else f"key:{key}" if isinstance(key, str) and key else ""
    return hashlib.sha256(tenant.encode()).hexdigest()[:12] if tenant else ""


def _cost_map_min_tokens(model: str, provider: str) -> int | None:
    return cost_map_value(model, provider, "prompt_cache_min_tokens", int)


def _usage(kwargs: Mapping[str, Any], response: Any) -> Any:
    slo = kwargs.get("standard_logging_object")
    usage = None
    if isinstance(slo, Mapping):
        meta = slo.get("metadata")
        if isinstance(meta, Mapping):
            usage = meta.get("usage_object")
    if not usage:
        usage = response.get("usage") if isinstance(response, Mapping) else getattr(response, "usage", None)
    return usage


def _timings(response: Any) -> Any:
    """llama.cpp's ``timings`` block (an attribute LiteLLM's response object rarely has: looked up
    only when the usage block does not say what was cached, the missing attribute being costly)."""
    return response.get("timings") if isinstance(response, Mapping) else getattr(response, "timings", None)


def _reprefill_cost(drift: Drift, target: Target | None) -> float | None:
    """What the drift's tokens to prefill again cost against reading them (USD, the cost map's
    prices; None when unknown): at the write price where the target bills writes and reads only
    at marks (Anthropic 1.25x, OpenAI GPT-5.6+ 1.25x: a changed byte early in the prompt is
    written again), else at the input price."""
    if target is None or not target.model:
        return None
    prices = pricing.prices_for(target.model, target.provider)
    if prices.input is None:
        return None
    paid = pricing.write_price(prices) if (target.reads_cache_control or target.reads_prompt_cache_breakpoint) \
        else prices.input
    read = prices.input if prices.cache_read is None else prices.cache_read
    return round(max(0, drift.reprefill_tokens_est) * max(0.0, (paid or 0.0) - read), 9)


def _measured(kwargs: Mapping[str, Any], response: Any) -> classify.Measured:
    """``classify.measure(usage, timings)``: the timings are read only where they could change it."""
    usage = _usage(kwargs, response)
    measured = classify.measure(usage)
    if measured is None or measured.cached is None:
        measured = classify.measure(usage, _timings(response))
    return measured or classify.Measured(prompt=0, cached=None)


class Sinks:
    def __init__(self, settings: Settings, stats: Any) -> None:
        self.settings = settings
        self.stats = stats
        self.reports: Expiring = Expiring(maxsize=4096, seconds=600)
        self.pending: Expiring = Expiring(maxsize=16384, seconds=3600)
        self.sessions: TTLCache[str, CallRecord] = TTLCache(maxsize=settings.max_sessions,
                                                             ttl=settings.session_ttl_seconds)
        # The last request of recent sessions as measured (prefix.Seen: it holds the messages),
        # so that the next one is rendered and hashed from where it differs; bounded by bytes.
        self.seen: LRUCache[str, prefix.Seen] = LRUCache(maxsize=SEEN_BYTES, getsizeof=_seen_size)
        # What the incremental path proved of a session's request before it is measured
        # (``expect_same``): session key -> (its last message, the serial of the stream record it
        # was compared with, leading body messages equal to that request's output, body length,
        # the serial of the record it leaves).
        self._same: LRUCache[str, tuple[Any, int | None, int, int, int | None]] = LRUCache(maxsize=4096)
        self._linked: dict[str, float] = {}  # root -> when a link to it was last tried (monotonic)
        self._log_lock = threading.Lock()
        self._log_writer: LogWriter | None = None
        self._lock = threading.Lock()
        self.metrics = metrics.get()
        port = getattr(settings, "metrics_port", 0)
        if port:
            metrics.serve(port)

    # -- request path ------------------------------------------------------------------

    def transformed(
        self,
        call_id: str | None,
        key: str | None,
        data: Mapping[str, Any],
        wire_name: str,
        events: list[Event],
        drift: Drift | None,
        settings: Settings,
        target: Target | None,
        model_group: str = "",
        seconds: float | None = None,
        sessions_held: Callable[[], int | None] | None = None,
        tools_text: str | None = None,
    ) -> None:
        """``tools_text``: the JSON the rules made of the request's tools (their fingerprint's), when they ran."""
        try:
            session = key[:16] if key else None
            agent = agent_of(events)
            rules = [e for e in events if e.kind not in _BOOKKEEPING]
            seen = payload(events, HeadSeen)
            head = seen.fingerprint if seen is not None else None
            group = model_group or (target.model if target else "")
            if call_id and head:
                self.reports[call_id] = Report(head=head, agent=agent or None)
            billing = payload(events, BillingBlock)
            if billing is not None and billing.action == "removed":
                self.stats["billing_removed"] += 1
            if rules and session:
                if logger.isEnabledFor(logging.DEBUG):
                    logger.debug("litellm-prefix: session %s rules %s", session, [e.kind for e in rules])
                if self.settings.log:  # (the record is built only when there is a log to write it to)
                    self.jsonl({"event": "rewrite", "session": session, "agent": agent or None,
                                "rules": [{"rule": e.kind, **e.record()} for e in rules]})
            if drift:
                self.stats["drift"] += 1
                logger.warning(
                    "litellm-prefix: head changed in session %s: %s at char %d (~token %d), ~%d tokens to prefill "
                    "again, %s -> %s",
                    session, ",".join(drift.changed), drift.first_diff_char, drift.first_diff_token_est,
                    drift.reprefill_tokens_est, drift.before, drift.after,
                )
                self.jsonl({**drift.record(), "session": session, "model": (target.model if target else ""),
                            "agent": agent or None, "reprefill_cost_usd_est": _reprefill_cost(drift, target)})
                if call_id and call_id in self.reports:
                    self.reports[call_id].drift = drift
            if self.metrics is not None and key is not None:
                self._count_request(group, agent, rules, drift, seconds, sessions_held)
            if call_id and key:
                self._remember(call_id, key, data, wire_name, drift, group, agent, target, tools_text)
        except Exception as exc:
            self.stats["errors"] += 1
            logger.warning("litellm-prefix: reporting failed (%s)", type(exc).__name__)

    def _count_request(self, group, agent, rules, drift, seconds, sessions_held) -> None:
        m = self.metrics
        m.count(m.requests, (group, agent))
        for rule in sorted({e.kind for e in rules}):
            m.count(m.rewrites, (rule, group, agent))
        if drift:
            m.count(m.drift, (metrics.part_label(drift.first_diff_in), group, agent))
        if seconds is not None:
            m.transform_seconds.observe(seconds)
        held = sessions_held() if sessions_held is not None else None
        if held is not None:
            m.sessions.set(held)

    def expect_same(self, key: str, last: Any, previous: int | None, same_body: int, body: int,
                    serial: int | None) -> None:
        """The transform's word on the request of session ``key`` it just wrote, whose last message
        is the object ``last``: its first ``same_body`` body messages (of ``body``) are byte for byte
        those of the output of the request the stream record ``previous`` holds (the incremental
        path proved it), and the stream record it leaves is ``serial`` (None: none). Read once, by
        this request's measurement (``_remember``), which checks it is that very request."""
        with self._lock:
            self._same[key] = (last, previous, same_body, body, serial)

    def _same_as_seen(self, key: str, data: Mapping[str, Any], seen: prefix.Seen | None) -> tuple[int, int | None]:
        """(leading messages of ``data`` known equal to the ``seen`` request's, the serial to tag
        this request's Seen with): what ``expect_same`` said, where it is about this very request
        (its last message the same object) and the seen request is the one it was compared with."""
        with self._lock:
            said = self._same.pop(key, None)
        messages = data.get("messages")
        if said is None or not isinstance(messages, list) or not messages or messages[-1] is not said[0]:
            return 0, None
        last, previous, same_body, body, serial = said
        if seen is None or previous is None or seen.serial != previous or same_body <= 0:
            return 0, serial
        return len(messages) - body + same_body, serial

    def _remember(self, call_id, key, data, wire_name, drift, group, agent, target, tools_text=None) -> None:
        """Keep this request's shape and what it shares with the session's previous request."""
        # (render.hoists asks target.hoists_system_messages, as the rules do)
        hoisting = {"provider": target.provider, "system_messages_first": target.system_messages_first
                    } if target else {}
        with self._lock:
            seen = self.seen.get(key)
        same, serial = self._same_as_seen(key, data, seen)
        shape, texts, seen = prefix.measure(data, wire_name, hoisting, tools_text, seen, same, serial)
        with self._lock:
            if seen is not None and self.seen.getsizeof(seen) <= self.seen.maxsize:
                self.seen[key] = seen
            else:  # measured whole only, or one request larger than the bound: the next one is too
                self.seen.pop(key, None)
            previous = self.sessions.get(key)
            record = CallRecord(shape=shape, turn=(previous.turn + 1) if previous else 1)
            self.sessions[key] = record
        shared = prefix.compare(previous.shape, shape, texts) if previous else None
        self.pending[call_id] = Pending(session=key[:16], record=record, previous=previous, shared=shared,
                                        drift=drift, model_group=group, agent=agent,
                                        provider=target.provider if target else "", started=time.time())

    # -- success callback --------------------------------------------------------------

    def completed(self, kwargs: Mapping[str, Any], response: Any) -> dict[str, Any] | None:
        """Classify a finished call; returns the JSONL record written (None when the call was not ours)."""
        try:
            slo = kwargs.get("standard_logging_object")
            slo = slo if isinstance(slo, Mapping) else {}
            call_id = kwargs.get("litellm_call_id") or slo.get("litellm_call_id")
            pending = self.pending.pop(call_id, None) if isinstance(call_id, str) else None
            if pending is None:
                return None
            return self._classify(pending, kwargs, slo, response)
        except Exception as exc:
            self.stats["errors"] += 1
            logger.warning("litellm-prefix: measuring the call failed (%s)", type(exc).__name__)
            return None

    def _classify(self, pending: Pending, kwargs, slo, response) -> dict[str, Any]:
        measured = _measured(kwargs, response)
        deployment = str(slo.get("model_id") or "")
        provider = str(slo.get("custom_llm_provider") or kwargs.get("custom_llm_provider") or pending.provider or "")
        model = str(slo.get("model") or kwargs.get("model") or "")
        api_base = str(slo.get("api_base") or "")
        pol = classify.policy(provider, model, api_base, _cost_map_min_tokens(model, provider))
        now = time.time()
        record, previous, shared = pending.record, pending.previous, pending.shared
        record.tokens, record.end, record.deployment = measured.prompt, now, deployment
        expected = classify.Expected(first=True, deployment=deployment)
        if previous is not None and shared is not None:
            size = max(1, record.shape.length)
            # Bytes to tokens at this request's own ratio, unless the upstream measured the exact count.
            previous_tokens = previous.tokens if previous.tokens is not None else round(
                previous.shape.length * measured.prompt / size)
            reusable = previous_tokens if shared.whole else round(shared.bytes * measured.prompt / size)
            where = ""
            if not shared.whole:
                where = pending.drift.first_diff_in if pending.drift else shared.where
            expected = classify.Expected(
                reusable=min(reusable, measured.prompt), previous=previous_tokens, drift=not shared.whole,
                where=where, idle=(pending.started - previous.end) if previous.end else None,
                deployment=deployment, previous_deployment=previous.deployment)
        verdict = classify.classify(measured, expected, pol)
        cached = measured.cached or 0
        record.cached, record.written = cached, measured.written or 0
        record.write_ttl, record.write_1h = classify.write_ttl(provider, measured.written_1h), bool(measured.written_1h)
        out: dict[str, Any] = {
            "event": "call", "session": pending.session, "turn": record.turn, "model": pending.model_group or model,
            "class": verdict.cls, "prompt_tokens": measured.prompt, "cached_tokens": cached,
            "reprocessed_tokens": max(0, measured.prompt - cached), "expected_tokens": expected.reusable,
            "tokens_lost": verdict.tokens_lost, "deployment": deployment,
        }
        if measured.cached is None:
            out["cache_reported"] = False
        if measured.written:
            out["cache_write_tokens"] = measured.written
            if measured.written_1h:
                out["cache_write_1h_tokens"] = measured.written_1h
        if pending.agent:
            out["agent"] = pending.agent
        tenant = _tenant_of(slo)
        if tenant:
            out["tenant"] = tenant
        params = kwargs.get("litellm_params")
        prices = pricing.prices_for(model, provider, slo, params if isinstance(params, Mapping) else None)
        cost = pricing.cost_of(prices, measured.prompt, cached, measured.written or 0, verdict.tokens_lost,
                               measured.written_1h)
        out["cost_usd"] = cost.to_json()  # null: the model's price is unknown (never read as zero)
        unread, unread_cost = 0, None
        if previous is not None and previous.written:  # the previous call's write, read back or never
            unread = previous.written - classify.write_read_back(previous.written, previous.cached, cached,
                                                                 expected.idle, previous.write_ttl)
            if unread:
                unread_cost = pricing.unread_write_cost(prices, unread, previous.write_1h)
                out["write_never_read"] = {"tokens": unread, "cost_usd": None if unread_cost is None
                                           else round(unread_cost, 9)}
        if previous is not None:
            out["previous_deployment"] = previous.deployment
            if expected.idle is not None:
                out["idle_s"] = round(expected.idle, 3)
        if verdict.cls == "client_drift":
            out["where"] = expected.where
        if verdict.reason:
            out["reason"] = verdict.reason
        if pending.drift:  # the drift event's measured cost: the turn that followed it
            d = pending.drift
            out["drift"] = {"changed": d.changed, "first_diff_in": d.first_diff_in, "before": d.before,
                            "after": d.after, "reprefill_tokens_est": d.reprefill_tokens_est}
        if verdict.cls not in ("first", "hit"):
            logger.info("litellm-prefix: session %s turn %d %s: %d of %d prompt tokens cached, ~%d lost%s",
                        pending.session, record.turn, verdict.cls, cached, measured.prompt, verdict.tokens_lost,
                        f" ({expected.where})" if verdict.cls == "client_drift" else
                        f" ({verdict.reason})" if verdict.reason else "")
        self.jsonl(out)
        if self.metrics is not None:
            m, labels = self.metrics, (pending.model_group or model, verdict.cls, pending.agent)
            m.count(m.calls, labels)
            m.count(m.prompt_tokens, labels, measured.prompt)
            m.count(m.cached_tokens, labels, cached)
            if verdict.tokens_lost:
                m.count(m.lost_tokens, labels, verdict.tokens_lost)
            if cost.billed is None:
                m.count(m.unpriced_calls, labels)
            else:
                m.count(m.input_cost, labels, cost.billed)
                if cost.saved:
                    m.count(m.saved_cost, labels, cost.saved)
                if cost.drift:
                    m.count(m.drift_cost, labels, cost.drift)
            if unread:  # the writing side of a miss: its own class, no call counted twice
                unread_labels = (labels[0], classify.WRITE_NEVER_READ, labels[2])
                m.count(m.lost_tokens, unread_labels, unread)
                if unread_cost:
                    m.count(m.drift_cost, unread_labels, unread_cost)
        return out

    # -- symlinks, JSONL, headers ------------------------------------------------------

    def link(self, root: str, settings: Settings) -> None:
        """``createSymlink``: point stablePath at ``root`` (``rules/paths.link_target`` chose it),
        before the rules run; tried at most once a minute per root, never raises."""
        now = time.monotonic()
        if now - self._linked.get(root, -LINK_RETRY_SECONDS) < LINK_RETRY_SECONDS:
            return
        self._linked[root] = now
        outcome = ensure_symlink(settings.resolved_stable_path, root)
        forget_path(settings.resolved_stable_path)  # the rule sees the link as it is now
        record = {"event": "symlink", "stable_path": settings.resolved_stable_path, "target": root, "outcome": outcome}
        (logger.warning if outcome.startswith(("failed", "skipped")) else logger.info)(
            "litellm-prefix: symlink %s -> %s: %s", record["stable_path"], root, outcome
        )
        try:
            self.jsonl(record)
        except OSError as exc:
            self.stats["errors"] += 1
            logger.warning("litellm-prefix: reporting failed (%s)", type(exc).__name__)

    def jsonl(self, record: Mapping[str, Any]) -> None:
        """Queue one record for the JSONL log (``LogWriter``); returns at once."""
        path = self.settings.log
        if not path:
            return
        writer = self._log_writer
        if writer is None or writer.path != path:
            with self._log_lock:
                writer = self._log_writer
                if writer is None or writer.path != path:
                    writer = self._log_writer = LogWriter(path, self.stats)
        writer.put(record)

    def flush(self) -> None:
        """Wait until the JSONL log holds every record handed to it so far."""
        if self._log_writer is not None:
            self._log_writer.flush()

    def response_headers(self, call_id: str | None) -> dict[str, str]:
        report = self.reports.get(call_id) if call_id else None
        if report is None or not self.settings.drift_header:
            return {}
        headers = {"x-litellm-prefix-head": report.head}
        if report.agent:
            headers["x-litellm-prefix-agent"] = report.agent
        if report.drift:
            d = report.drift
            headers["x-litellm-prefix-drift"] = (
                f"changed={','.join(d.changed)}; first_diff_char={d.first_diff_char}; "
                f"reprefill_tokens_est={d.reprefill_tokens_est}; before={d.before}; after={d.after}"
            )
        return headers
