"""The Grafana dashboard in config/grafana names only metrics and labels the plugin exports.

Every query's metric names are looked up in a fresh registry holding the plugin's metrics
(``metrics.Metrics``), every label a query groups by or selects on must be one of that
metric's labels (``le`` for a histogram's buckets), and every ``event="..."`` value must be an
internal counter the package counts. The file must equal what tools/make_dashboard.py writes.
"""
from __future__ import annotations

import json
import re

import pytest
from prometheus_client import CollectorRegistry

from litellm_prefix.measure.metrics import Metrics
from tests.support import ROOT

DASHBOARD = ROOT / "config" / "grafana" / "litellm-prefix.json"
METRIC = re.compile(r"\blitellm_prefix_[a-z_]+\b")
SELECTOR = re.compile(r"(litellm_prefix_[a-z_]+)\{([^}]*)\}")
BY = re.compile(r"\bby \(([^)]*)\)")
VARIABLE_QUERY = re.compile(r"label_values\((litellm_prefix_[a-z_]+), *([a-z_]+)\)")


@pytest.fixture(scope="module")
def exported() -> dict[str, set[str]]:
    """Sample name -> its labels, for every series the plugin's metrics can export."""
    registry = CollectorRegistry()
    Metrics(registry)
    names: dict[str, set[str]] = {}
    for collector, found in registry._collector_to_names.items():  # (prometheus_client keeps this map)
        labels = set(getattr(collector, "_labelnames", ()))
        for name in found:
            names[name] = labels | ({"le"} if name.endswith("_bucket") else set())
    return names


def _queries(board: dict) -> list[str]:
    return [t["expr"] for p in board["panels"] for t in p["targets"]]


def test_the_dashboard_is_what_the_generator_writes():
    from tools import make_dashboard

    assert DASHBOARD.read_text() == make_dashboard.render(), "run tools/make_dashboard.py"


def test_every_query_names_an_exported_metric_with_labels_it_has(exported):
    board = json.loads(DASHBOARD.read_text())
    queries = _queries(board)
    assert len(queries) >= 14
    used = set()
    for expr in queries:
        metrics = METRIC.findall(expr)
        assert metrics, expr
        for name in metrics:
            assert name in exported, (name, expr)
            used.add(name)
        for name, selector in SELECTOR.findall(expr):
            for label in re.findall(r"([a-z_]+)\s*=~?", selector):
                assert label in exported[name], (label, name, expr)
        for grouping in BY.findall(expr):
            labels = {label.strip() for label in grouping.split(",")}
            assert all(labels <= exported[name] for name in metrics), (labels, expr)
    # what the issue asks to see: hit rate, re-processed tokens and their cost, drift by part,
    # miss classes, affinity moves, store fallbacks
    for needed in ("litellm_prefix_cached_tokens_total", "litellm_prefix_prompt_tokens_total",
                   "litellm_prefix_drift_cost_usd_total", "litellm_prefix_input_cost_usd_total",
                   "litellm_prefix_drift_events_total", "litellm_prefix_calls_total",
                   "litellm_prefix_internal_events_total"):
        assert needed in used, needed


def test_internal_event_names_are_counted_by_the_package():
    board = json.loads(DASHBOARD.read_text())
    source = "\n".join(p.read_text() for p in (ROOT / "litellm_prefix").rglob("*.py"))
    events = {e for expr in _queries(board) for e in re.findall(r'event="([a-z_]+)"', expr)}
    assert events >= {"affinity_moves", "store_fallbacks"}
    for event in events:
        assert f'stats["{event}"]' in source, event


def test_template_variables_read_exported_labels(exported):
    board = json.loads(DASHBOARD.read_text())
    variables = [v for v in board["templating"]["list"] if v["type"] == "query"]
    assert {v["name"] for v in variables} == {"model_group", "agent"}
    for v in variables:
        metric, label = VARIABLE_QUERY.search(v["definition"]).groups()
        assert label == v["name"] and label in exported[metric]
    # every $variable a query uses is defined
    defined = {v["name"] for v in board["templating"]["list"]} | {"__rate_interval", "__range"}
    for expr in _queries(board):
        for name in re.findall(r"\$([a-z_]+)", expr):
            assert name in defined, (name, expr)


def test_a_wrong_metric_or_label_is_caught(exported):
    """The checks above can fail: a misspelt metric and a label the metric lacks are found."""
    assert "litellm_prefix_cache_hits_total" not in exported
    assert "tenant" not in exported["litellm_prefix_calls_total"]  # unbounded: never a label
    assert "part" not in exported["litellm_prefix_calls_total"]
