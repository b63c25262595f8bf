"""Prometheus metrics (optional: ``pip install 'litellm-prefix[metrics]'``, i.e. prometheus_client).

Registered once per process in prometheus_client's default ``REGISTRY``: the LiteLLM
proxy serves that registry on its own ``/metrics`` when its Prometheus callback is on
(``litellm_settings: {callbacks: ["prometheus", "litellm_prefix.proxy_handler"]}``);
elsewhere (SDK, Router) ``metricsPort`` starts prometheus_client's own HTTP server.
With ``PROMETHEUS_MULTIPROC_DIR`` set (several proxy workers) prometheus_client writes
the values to that directory and the proxy aggregates them.

Labels are bounded: model group, rule, class, changed part kind, agent profile name,
internal event name. Never session ids, tenants or text.
"""
from __future__ import annotations

import logging
import threading
from collections import Counter
from typing import Any

from ..request.sections import PI_SECTIONS

logger = logging.getLogger("litellm_prefix")

NAMESPACE = "litellm_prefix"
_LOCK = threading.Lock()
_METRICS: Metrics | None | bool = False  # False: not tried yet; None: prometheus_client missing
_SERVED: dict[int, Any] = {}  # port -> prometheus_client's HTTP server
# pi's own section names, the memory block and the system text; any other section (an
# extension's) is reported as "section:extension" (a bounded label).
KNOWN_SECTIONS = PI_SECTIONS | {"memory", "system"}
LATENCY_BUCKETS = (0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0)


class Metrics:
    def __init__(self, registry: Any = None) -> None:
        from prometheus_client import REGISTRY, Counter as PCounter, Gauge, Histogram

        reg = REGISTRY if registry is None else registry
        by_call = ["model_group", "class", "agent"]
        self.requests = PCounter(f"{NAMESPACE}_requests", "Requests the transform saw", ["model_group", "agent"],
                                 registry=reg)
        self.rewrites = PCounter(f"{NAMESPACE}_rewrites", "Requests a rule changed, by rule",
                                 ["rule", "model_group", "agent"], registry=reg)
        self.drift = PCounter(f"{NAMESPACE}_drift_events", "Genuine head changes, by changed part",
                              ["part", "model_group", "agent"], registry=reg)
        self.calls = PCounter(f"{NAMESPACE}_calls", "Completed calls, by cache class", by_call, registry=reg)
        self.prompt_tokens = PCounter(f"{NAMESPACE}_prompt_tokens", "Prompt tokens the upstream reported",
                                      by_call, registry=reg)
        self.cached_tokens = PCounter(f"{NAMESPACE}_cached_tokens", "Prompt tokens the upstream read from its cache",
                                      by_call, registry=reg)
        self.lost_tokens = PCounter(f"{NAMESPACE}_tokens_lost", "Tokens a stable client on a warm cache would "
                                    "have read from the cache, by class", by_call, registry=reg)
        self.input_cost = PCounter(f"{NAMESPACE}_input_cost_usd", "Input tokens' billed cost (cache reads and "
                                   "writes at their prices), USD", by_call, registry=reg)
        self.saved_cost = PCounter(f"{NAMESPACE}_cache_saved_usd", "What cache reads saved against no cache, USD",
                                   by_call, registry=reg)
        self.drift_cost = PCounter(f"{NAMESPACE}_drift_cost_usd", "What tokens lost to a miss cost against a hit, USD",
                                   by_call, registry=reg)
        self.unpriced_calls = PCounter(f"{NAMESPACE}_unpriced_calls", "Completed calls whose model has no known "
                                       "price (not counted in the cost metrics)", by_call, registry=reg)
        self.internal = PCounter(f"{NAMESPACE}_internal_events", "Internal events: errors, store_fallbacks, "
                                 "save_conflicts, journal_reset, ...", ["event"], registry=reg)
        self.transform_seconds = Histogram(f"{NAMESPACE}_transform_seconds", "Time the request transform took",
                                           buckets=LATENCY_BUCKETS, registry=reg)
        self.sessions = Gauge(f"{NAMESPACE}_sessions", "Sessions held in this process's local store",
                              multiprocess_mode="livesum", registry=reg)
        self._children: dict[tuple, Any] = {}
        self._incs: dict[tuple, Any] = {}

    def count(self, metric: Any, values: tuple[str, ...], amount: float = 1) -> None:
        """``metric.labels(*values).inc(amount)`` for a counter, by the child's own value's ``inc``,
        kept per child: a request counts into about fifteen children, and ``Counter.inc``
        re-checks on every call what holds for a child once made (observable, no exemplar)."""
        if amount < 0:
            raise ValueError("Counters can only be incremented by non-negative amounts.")
        key = (metric, values)  # a metric object is its own key (hashed and compared by identity)
        inc = self._incs.get(key)
        if inc is None:
            inc = self._incs[key] = _value_inc(self.child(metric, *values))
        inc(amount)

    def child(self, metric: Any, *values: str) -> Any:
        """``metric.labels(*values)``, kept: every request counts into the same few children
        (the labels are bounded), and ``labels`` validates and locks on each call."""
        key = (metric, values)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*values)
        return found


def _value_inc(child: Any) -> Any:
    """The ``inc`` of a counter child's value (prometheus_client's ``MutexValue`` or, with
    ``PROMETHEUS_MULTIPROC_DIR``, its file-backed value): what ``Counter.inc`` calls after its
    checks. The child's own ``inc`` where the child is not laid out that way (another version)."""
    value = getattr(child, "_value", None)
    inc = getattr(value, "inc", None)
    return inc if getattr(child, "_type", None) == "counter" and callable(inc) else child.inc


def get() -> Metrics | None:
    """The process's metrics, created on first use; None when prometheus_client is not installed."""
    global _METRICS
    if _METRICS is False:
        with _LOCK:
            if _METRICS is False:
                try:
                    _METRICS = Metrics()
                except ImportError:
                    logger.info("litellm-prefix: prometheus_client not installed; no metrics")
                    _METRICS = None
                except ValueError as exc:  # already registered under these names by another copy
                    logger.warning("litellm-prefix: metrics not registered (%s)", exc)
                    _METRICS = None
    return _METRICS or None


def serve(port: int, addr: str = "127.0.0.1") -> bool:
    """Expose the default registry on ``addr:port`` (once per port); False when that is not possible."""
    if not port or get() is None:
        return False
    with _LOCK:
        if port in _SERVED:
            return True
        try:
            from prometheus_client import start_http_server

            started = start_http_server(port, addr=addr)
        except OSError as exc:
            logger.warning("litellm-prefix: metrics server on %s:%d failed (%s)", addr, port, exc)
            return False
        _SERVED[port] = started[0] if isinstance(started, tuple) else started
    logger.info("litellm-prefix: metrics on http://%s:%d/metrics", addr, port)
    return True


def stop_serving(port: int) -> None:
    """Stop the metrics server on ``port`` (tests; a gateway keeps it for its lifetime)."""
    with _LOCK:
        server = _SERVED.pop(port, None)
    if server is not None and hasattr(server, "shutdown"):
        server.shutdown()
        server.server_close()


def part_label(where: str) -> str:
    """A bounded label for where a head changed: tools, system, section:<pi section> or section:extension."""
    if where == "tools" or where.startswith("system"):
        return "tools" if where == "tools" else "system"
    name = where.split(":", 1)[1] if where.startswith("section:") else where
    name = name.rsplit(":", 1)[-1]  # "1:docs" (a later system segment) -> docs
    return f"section:{name}" if name in KNOWN_SECTIONS else "section:extension"


class Stats(Counter):
    """The stabilizer's internal counters; every increase is mirrored to ``litellm_prefix_internal_events``
    (``Metrics.count``)."""

    def __setitem__(self, key: str, value: int) -> None:
        delta = value - self.get(key, 0)
        super().__setitem__(key, value)
        if delta > 0:
            try:
                metrics = get()
                if metrics is not None:
                    metrics.count(metrics.internal, (key,), delta)
            except Exception:  # metrics never break a call
                pass
