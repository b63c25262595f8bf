"""Write config/grafana/litellm-prefix.json: the Grafana dashboard for the plugin's Prometheus metrics.

    .venv/bin/python tools/make_dashboard.py        # rewrites the JSON (committed; tests check it)

The panels are declared here as (title, unit, queries) so that the JSON stays consistent
(ids, grid positions, the datasource variable); ``tests/unit/measure/test_dashboard.py`` checks that every
query names metrics and labels the plugin exports and that the file equals this output.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "config" / "grafana" / "litellm-prefix.json"
DS = {"type": "prometheus", "uid": "${datasource}"}
SEL = 'model_group=~"$model_group", agent=~"$agent"'
W = "$__rate_interval"

# (title, unit, [(legend, expr)], kind) in reading order; two panels a row.
PANELS: list[tuple[str, str, list[tuple[str, str]], str]] = [
    ("Prompt-token hit rate per model group", "percentunit", [(
        "{{model_group}}",
        f"sum by (model_group) (rate(litellm_prefix_cached_tokens_total{{{SEL}}}[{W}]))"
        f" / sum by (model_group) (rate(litellm_prefix_prompt_tokens_total{{{SEL}}}[{W}]))")], "timeseries"),
    ("Prompt-token hit rate per agent", "percentunit", [(
        "{{agent}}",
        f"sum by (agent) (rate(litellm_prefix_cached_tokens_total{{{SEL}}}[{W}]))"
        f" / sum by (agent) (rate(litellm_prefix_prompt_tokens_total{{{SEL}}}[{W}]))")], "timeseries"),
    ("Re-processed prompt tokens per second", "short", [(
        "{{model_group}}",
        f"sum by (model_group) (rate(litellm_prefix_prompt_tokens_total{{{SEL}}}[{W}]))"
        f" - sum by (model_group) (rate(litellm_prefix_cached_tokens_total{{{SEL}}}[{W}]))")], "timeseries"),
    ("Tokens lost to misses, by class", "short", [(
        "{{class}}", f"sum by (class) (rate(litellm_prefix_tokens_lost_total{{{SEL}}}[{W}]))")], "timeseries"),
    ("Input cost, cache savings and drift cost (USD, range)", "currencyUSD", [
        ("billed", f"sum(increase(litellm_prefix_input_cost_usd_total{{{SEL}}}[$__range]))"),
        ("saved by cache reads", f"sum(increase(litellm_prefix_cache_saved_usd_total{{{SEL}}}[$__range]))"),
        ("cost of misses (writes never read included)",
         f"sum(increase(litellm_prefix_drift_cost_usd_total{{{SEL}}}[$__range]))"),
        ], "stat"),
    ("Cache writes never read (USD above sending them uncached, per hour)", "currencyUSD", [(
        "{{model_group}}",
        f'sum by (model_group) (rate(litellm_prefix_drift_cost_usd_total{{{SEL}, class="write_never_read"}}[{W}]))'
        " * 3600")], "timeseries"),
    ("Cost of misses per model group (USD per hour)", "currencyUSD", [(
        "{{model_group}}",
        f"sum by (model_group) (rate(litellm_prefix_drift_cost_usd_total{{{SEL}}}[{W}])) * 3600")], "timeseries"),
    ("Calls by cache class (miss classes)", "reqps", [(
        "{{class}}", f"sum by (class) (rate(litellm_prefix_calls_total{{{SEL}}}[{W}]))")], "timeseries"),
    ("Calls of models with no known price", "short", [(
        "{{model_group}}",
        f"sum by (model_group) (increase(litellm_prefix_unpriced_calls_total{{{SEL}}}[$__range]))")], "stat"),
    ("Drift events by changed part (sections)", "short", [(
        "{{part}}", f"sum by (part) (increase(litellm_prefix_drift_events_total{{{SEL}}}[$__range]))")], "barchart"),
    ("Rewrites by rule", "reqps", [(
        "{{rule}}", f"sum by (rule) (rate(litellm_prefix_rewrites_total{{{SEL}}}[{W}]))")], "timeseries"),
    ("Affinity moves and store fallbacks", "short", [
        ("affinity moves", f'sum(increase(litellm_prefix_internal_events_total{{event="affinity_moves"}}[{W}]))'),
        ("store fallbacks", f'sum(increase(litellm_prefix_internal_events_total{{event="store_fallbacks"}}[{W}]))'),
        ("internal errors (passed through)",
         f'sum(increase(litellm_prefix_internal_events_total{{event="errors"}}[{W}]))'),
        ], "timeseries"),
    ("Transform time (p50, p99) and sessions held", "s", [
        ("p50", f"histogram_quantile(0.5, sum by (le) (rate(litellm_prefix_transform_seconds_bucket[{W}])))"),
        ("p99", f"histogram_quantile(0.99, sum by (le) (rate(litellm_prefix_transform_seconds_bucket[{W}])))"),
        ], "timeseries"),
    ("Sessions held in local stores", "short", [("sessions", "sum(litellm_prefix_sessions)")], "stat"),
    ("Requests seen by the plugin", "reqps", [(
        "{{model_group}} {{agent}}",
        f"sum by (model_group, agent) (rate(litellm_prefix_requests_total{{{SEL}}}[{W}]))")], "timeseries"),
]


def panel(i: int, title: str, unit: str, queries: list[tuple[str, str]], kind: str) -> dict:
    return {
        "id": i + 1, "type": kind, "title": title, "datasource": DS,
        "gridPos": {"h": 8, "w": 12, "x": 12 * (i % 2), "y": 8 * (i // 2)},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}} if kind != "stat" else {
            "reduceOptions": {"calcs": ["lastNotNull"]}, "textMode": "value_and_name"},
        "targets": [{"refId": chr(ord("A") + n), "datasource": DS, "expr": expr, "legendFormat": legend}
                    for n, (legend, expr) in enumerate(queries)],
    }


def variable(name: str, label: str) -> dict:
    return {"name": name, "label": label, "type": "query", "datasource": DS,
            "query": {"query": f"label_values(litellm_prefix_requests_total, {name})", "refId": name},
            "definition": f"label_values(litellm_prefix_requests_total, {name})",
            "includeAll": True, "multi": True, "allValue": ".*", "refresh": 2, "sort": 1,
            "current": {"selected": True, "text": ["All"], "value": ["$__all"]}}


def dashboard() -> dict:
    return {
        "uid": "litellm-prefix", "title": "litellm-prefix: prefix caching", "tags": ["litellm", "litellm-prefix"],
        "timezone": "browser", "schemaVersion": 39, "version": 1, "editable": True, "refresh": "1m",
        "time": {"from": "now-6h", "to": "now"},
        "description": "Hit rate, re-processed tokens and their cost, drift, miss classes, affinity moves and "
                       "store fallbacks from litellm-prefix's Prometheus metrics (litellm_prefix_*).",
        "templating": {"list": [
            {"name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus",
             "current": {}, "hide": 0},
            variable("model_group", "model group"), variable("agent", "agent")]},
        "panels": [panel(i, *p) for i, p in enumerate(PANELS)],
    }


def render() -> str:
    return json.dumps(dashboard(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(render())
    print(f"wrote {OUT}", file=sys.stderr)
