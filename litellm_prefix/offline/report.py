"""``litellm-prefix report LOG.jsonl``: what the serving side's cache did, from the JSONL log.

The log is read line by line (any size; a corrupt line is counted and skipped). Each
``call`` record is one completed call with the upstream's own counts (prompt tokens,
cached tokens) and its class (``classify``); ``drift`` records are the head changes the
transform reported. The summary adds them up per model, per agent profile and per
(hashed) session: calls, token hit rate, tokens re-processed (prompt - cached) and
tokens lost by class, the top drift causes and how often a session moved to another
deployment. ``--json`` prints one object; ``--html`` writes a self-contained page with a
per-turn chart (matplotlib PNG inlined as base64, no external resources).
"""
from __future__ import annotations

import base64
import html
import io
import json
import os
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, TextIO

try:
    import orjson

    _loads = orjson.loads
except ImportError:  # pragma: no cover
    _loads = json.loads

from ..measure.classify import CLASSES, WRITE_NEVER_READ

# Every class a report shows: a call's read side (``CLASSES``), then the writing side of a miss.
REPORT_CLASSES = (*CLASSES, WRITE_NEVER_READ)

CHART_SESSIONS = 6  # sessions drawn in the HTML chart (those with the most prompt tokens)
MAX_TURN_POINTS = 500_000  # per-turn points kept for the chart, all sessions together
TOP_SESSIONS = 20


@dataclass
class Group:
    calls: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    reprocessed_tokens: int = 0
    tokens_lost: int = 0
    classes: Counter = field(default_factory=Counter)
    lost_by_class: Counter = field(default_factory=Counter)
    reprocessed_by_class: Counter = field(default_factory=Counter)
    models: set = field(default_factory=set)
    agents: set = field(default_factory=set)
    # Money (USD), over the calls whose model has a known price (``pricing``); the rest are unpriced.
    priced_calls: int = 0
    billed_usd: float = 0.0
    saved_usd: float = 0.0
    drift_usd: float = 0.0
    # Cache writes (Anthropic, OpenAI GPT-5.6+) and those the next call did not read before they expired.
    written_tokens: int = 0
    unread_usd: float = 0.0

    def add_write(self, written: int, unread: Any) -> None:
        """A call's cache write, and the previous write it found unread (``write_never_read``), if any."""
        self.written_tokens += written
        if isinstance(unread, dict) and int(unread.get("tokens") or 0) > 0:
            tokens = int(unread["tokens"])
            self.classes[WRITE_NEVER_READ] = self.classes.get(WRITE_NEVER_READ, 0) + 1
            self.lost_by_class[WRITE_NEVER_READ] = self.lost_by_class.get(WRITE_NEVER_READ, 0) + tokens
            self.unread_usd += float(unread.get("cost_usd") or 0)

    def add(self, prompt: int, cached: int, lost: int, cls: str, cost: Any = None) -> None:
        if isinstance(cost, dict):
            self.priced_calls += 1
            self.billed_usd += float(cost.get("billed") or 0)
            self.saved_usd += float(cost.get("saved") or 0)
            self.drift_usd += float(cost.get("drift") or 0)
        self.calls += 1
        self.prompt_tokens += prompt
        self.cached_tokens += cached
        self.reprocessed_tokens += prompt - cached
        self.tokens_lost += lost
        classes, by_lost, by_reprocessed = self.classes, self.lost_by_class, self.reprocessed_by_class
        classes[cls] = classes.get(cls, 0) + 1
        by_lost[cls] = by_lost.get(cls, 0) + lost
        by_reprocessed[cls] = by_reprocessed.get(cls, 0) + prompt - cached

    def merge(self, other: Group) -> None:
        self.calls += other.calls
        self.prompt_tokens += other.prompt_tokens
        self.cached_tokens += other.cached_tokens
        self.reprocessed_tokens += other.reprocessed_tokens
        self.tokens_lost += other.tokens_lost
        self.priced_calls += other.priced_calls
        self.billed_usd += other.billed_usd
        self.saved_usd += other.saved_usd
        self.drift_usd += other.drift_usd
        self.written_tokens += other.written_tokens
        self.unread_usd += other.unread_usd
        self.classes.update(other.classes)
        self.lost_by_class.update(other.lost_by_class)
        self.reprocessed_by_class.update(other.reprocessed_by_class)
        self.models |= other.models
        self.agents |= other.agents

    @property
    def hit_rate(self) -> float:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    def money(self) -> dict[str, Any]:
        """USD figures; ``None`` where no call of the group has a known price (unknown, not zero)."""
        priced = self.priced_calls > 0
        return {"billed_usd": round(self.billed_usd, 6) if priced else None,
                "saved_usd": round(self.saved_usd, 6) if priced else None,
                "drift_usd": round(self.drift_usd, 6) if priced else None,
                "write_never_read_usd": round(self.unread_usd, 6) if priced else None,
                "priced_calls": self.priced_calls, "unpriced_calls": self.calls - self.priced_calls}

    def to_json(self) -> dict[str, Any]:
        out = {"calls": self.calls, "prompt_tokens": self.prompt_tokens, "cached_tokens": self.cached_tokens,
               "written_tokens": self.written_tokens,
               "reprocessed_tokens": self.reprocessed_tokens, "tokens_lost": self.tokens_lost,
               "hit_rate": round(self.hit_rate, 4),
               "classes": {c: {"calls": self.classes[c], "tokens_lost": self.lost_by_class[c],
                               "reprocessed_tokens": self.reprocessed_by_class[c]} for c in sorted(self.classes)},
               **self.money()}
        if self.models:
            out["models"] = sorted(self.models)
        if self.agents:
            out["agents"] = sorted(self.agents)
        return out


@dataclass
class Summary:
    """Call records are added up once per (session, model, agent); the views fold those groups."""

    path: str = ""
    lines: int = 0
    corrupt: int = 0
    other_events: Counter = field(default_factory=Counter)
    groups: dict[tuple[str, str, str, str], Group] = field(default_factory=dict)  # (session, model, agent, tenant)
    causes: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))  # cause -> [count, lost]
    drift_events: Counter = field(default_factory=Counter)  # cause -> reported head changes
    replicas_moved: int = 0
    turns: dict[str, list[tuple[int, int, int, str]]] = field(default_factory=lambda: defaultdict(list))
    _points: int = 0
    _folded: dict | None = None

    def add(self, rec: dict[str, Any]) -> None:
        kind = rec.get("event")
        if kind != "call":
            if kind == "drift":
                for part in rec.get("changed") or ["(unknown)"]:
                    self.drift_events[str(part)] += 1
            else:
                self.other_events[str(kind)] += 1
            return
        self._folded = None
        prompt, cached = int(rec.get("prompt_tokens") or 0), int(rec.get("cached_tokens") or 0)
        lost, cls = int(rec.get("tokens_lost") or 0), str(rec.get("class") or "unknown")
        session = str(rec.get("session") or "")
        key = (session, str(rec.get("model") or ""), str(rec.get("agent") or ""), str(rec.get("tenant") or ""))
        group = self.groups.get(key)
        if group is None:
            group = self.groups[key] = Group()
        group.add(prompt, cached, lost, cls, rec.get("cost_usd"))
        group.add_write(int(rec.get("cache_write_tokens") or 0), rec.get("write_never_read"))
        if cls == "client_drift":
            drift = rec.get("drift") or {}
            causes = drift.get("changed") or [_cause(str(rec.get("where") or ""))]
            for cause in causes:
                entry = self.causes[str(cause)]
                entry[0] += 1
                entry[1] += lost // len(causes)
        previous, deployment = rec.get("previous_deployment"), rec.get("deployment")
        if previous and deployment and previous != deployment:
            self.replicas_moved += 1
        if self._points < MAX_TURN_POINTS:
            turns = self.turns[session]
            turns.append((int(rec.get("turn") or len(turns) + 1), prompt, cached, cls))
            self._points += 1

    def _fold(self) -> dict:
        if self._folded is None:
            totals, models, agents, sessions = Group(), defaultdict(Group), defaultdict(Group), defaultdict(Group)
            tenants: defaultdict[str, Group] = defaultdict(Group)
            for (session, model, agent, tenant), group in self.groups.items():
                totals.merge(group)
                models[model].merge(group)
                if agent:
                    agents[agent].merge(group)
                if tenant:
                    tenants[tenant].merge(group)
                target = sessions[session]
                target.merge(group)
                target.models.add(model)
                if agent:
                    target.agents.add(agent)
            self._folded = {"totals": totals, "models": dict(models), "agents": dict(agents),
                            "tenants": dict(tenants), "sessions": dict(sessions)}
        return self._folded

    @property
    def totals(self) -> Group:
        return self._fold()["totals"]

    @property
    def models(self) -> dict[str, Group]:
        return self._fold()["models"]

    @property
    def agents(self) -> dict[str, Group]:
        return self._fold()["agents"]

    @property
    def tenants(self) -> dict[str, Group]:
        """Per tenant (a short hash of the team, else the API key hash: never the raw id)."""
        return self._fold()["tenants"]

    @property
    def sessions(self) -> dict[str, Group]:
        return self._fold()["sessions"]

    def to_json(self) -> dict[str, Any]:
        t = self.totals
        top = sorted(self.sessions.items(), key=lambda kv: -kv[1].reprocessed_tokens)
        return {
            "file": self.path, "lines": self.lines, "corrupt_lines": self.corrupt,
            "totals": {"calls": t.calls, "prompt_tokens": t.prompt_tokens, "cached_tokens": t.cached_tokens,
                       "reprocessed_tokens": t.reprocessed_tokens, "tokens_lost": t.tokens_lost,
                       "written_tokens": t.written_tokens,
                       "hit_rate": round(t.hit_rate, 4), "sessions": len(self.sessions), **t.money()},
            "classes": {c: {"calls": t.classes[c], "tokens_lost": t.lost_by_class[c],
                            "reprocessed_tokens": t.reprocessed_by_class[c]} for c in REPORT_CLASSES},
            "models": {m: g.to_json() for m, g in sorted(self.models.items())},
            "agents": {a: g.to_json() for a, g in sorted(self.agents.items())},
            "tenants": {a: g.to_json() for a, g in sorted(self.tenants.items())},
            "sessions": {s: g.to_json() for s, g in top},
            "drift_causes": [{"cause": c, "calls": n, "tokens_lost": lost} for c, (n, lost) in self.top_causes()],
            "drift_events": dict(self.drift_events.most_common()),
            "replicas_moved": self.replicas_moved,
            "other_events": dict(self.other_events),
        }

    def top_causes(self, n: int = 10) -> list[tuple[str, tuple[int, int]]]:
        return sorted(((c, (v[0], v[1])) for c, v in self.causes.items()), key=lambda kv: (-kv[1][1], -kv[1][0]))[:n]


def _cause(where: str) -> str:
    """A history edit is reported as ``messages`` (which message varies by session)."""
    return "messages" if where.startswith("messages[") else (where or "(unknown)")


def read(path: str, progress: TextIO | None = None, interval: float = 1.0) -> Summary:
    """Stream the log into a Summary; progress lines go to ``progress`` (about once a second)."""
    summary = Summary(path=path)
    size = os.path.getsize(path) if path != "-" else 0
    last = time.monotonic()
    done = 0
    fh = sys.stdin.buffer if path == "-" else open(path, "rb")
    try:
        for raw in fh:
            summary.lines += 1
            done += len(raw)
            if not raw.strip():
                continue
            try:
                rec = _loads(raw)
                if not isinstance(rec, dict):
                    raise ValueError("not an object")
                summary.add(rec)
            except (ValueError, TypeError):
                summary.corrupt += 1
            if progress is not None and summary.lines % 4096 == 0 and time.monotonic() - last >= interval:
                last = time.monotonic()
                share = f" ({done / size:.0%})" if size else ""
                print(f"report: {summary.lines} lines, {done / 1e6:.1f} MB read{share}", file=progress, flush=True)
    finally:
        if fh is not sys.stdin.buffer:
            fh.close()
    return summary


# -- text ------------------------------------------------------------------------------


def _pct(x: float) -> str:
    return f"{x:.1%}"


def _table(rows: list[tuple], header: tuple) -> str:
    cells = [tuple(str(c) for c in header)] + [tuple(str(c) for c in row) for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = []
    for n, row in enumerate(cells):
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def usd(value: float | None, partial: bool = False) -> str:
    """A dollar figure; "unknown" for no known price; "*" when some of the calls were unpriced."""
    if value is None:
        return "unknown"
    return (f"${value:,.2f}" if abs(value) >= 1 else f"${value:.4f}") + ("*" if partial else "")


def _money_cells(g: Group) -> tuple[str, str, str]:
    m, partial = g.money(), 0 < g.priced_calls < g.calls
    return usd(m["billed_usd"], partial), usd(m["saved_usd"], partial), usd(m["drift_usd"], partial)


def _group_rows(groups: dict[str, Group], limit: int | None = None, key=None) -> list[tuple]:
    items = sorted(groups.items(), key=key or (lambda kv: -kv[1].prompt_tokens))[:limit]
    return [(name or "(none)", g.calls, _pct(g.hit_rate), g.prompt_tokens, g.reprocessed_tokens, g.tokens_lost,
             *_money_cells(g), ", ".join(f"{c} {n}" for c, n in g.classes.most_common())) for name, g in items]


GROUP_HEADER = ("{}", "calls", "hit rate", "prompt", "re-processed", "lost", "billed", "saved", "drift cost",
                "classes")


def text(summary: Summary) -> str:
    t = summary.totals
    out = [f"{summary.path}: {t.calls} calls in {len(summary.sessions)} session(s); {t.prompt_tokens} prompt tokens, "
           f"{t.cached_tokens} cached ({_pct(t.hit_rate)}), {t.reprocessed_tokens} re-processed, "
           f"{t.tokens_lost} lost to misses"
           + (f"; {summary.corrupt} corrupt line(s) skipped" if summary.corrupt else ""),
           "input cost {}, saved by cache reads {}, cost of misses against hits {}".format(*_money_cells(t))
           + (f" (* {t.calls - t.priced_calls} call(s) of models with no known price left out)"
              if 0 < t.priced_calls < t.calls else ""), ""]
    if t.written_tokens:
        m = t.money()
        out[-1:-1] = [f"cache writes {t.written_tokens} tokens; {t.lost_by_class[WRITE_NEVER_READ]} of them never read "
                      f"before they expired, costing {usd(m['write_never_read_usd'])} above sending them uncached"]
    rows = [(c, t.classes[c], t.reprocessed_by_class[c], t.lost_by_class[c]) for c in REPORT_CLASSES if t.classes[c]]
    out += [_table(rows, ("class", "calls", "re-processed", "tokens lost")), ""]
    out += ["per model", _table(_group_rows(summary.models), tuple(h.format("model") for h in GROUP_HEADER)), ""]
    if summary.agents:
        out += ["per agent", _table(_group_rows(summary.agents), tuple(h.format("agent") for h in GROUP_HEADER)), ""]
    if summary.tenants:
        out += ["per tenant (hashed)",
                _table(_group_rows(summary.tenants), tuple(h.format("tenant") for h in GROUP_HEADER)), ""]
    causes = summary.top_causes()
    if causes:
        out += ["top drift causes (measured)",
                _table([(c, n, lost) for c, (n, lost) in causes], ("changed", "calls", "tokens lost")), ""]
    if summary.drift_events:
        out += ["head changes reported: " + ", ".join(f"{c} {n}" for c, n in summary.drift_events.most_common(10)), ""]
    out += [f"sessions (top {TOP_SESSIONS} by re-processed tokens)",
            _table(_group_rows(summary.sessions, TOP_SESSIONS, key=lambda kv: -kv[1].reprocessed_tokens),
                   tuple(h.format("session") for h in GROUP_HEADER)), ""]
    out.append(f"replicas moved: {summary.replicas_moved} call(s) served by another deployment than the session's "
               "previous call")
    return "\n".join(out)


# -- HTML ------------------------------------------------------------------------------

CLASS_COLORS = {"first": "#9e9e9e", "hit": "#2e7d32", "client_drift": "#d84315", "provider_miss": "#6a1b9a",
                "below_minimum": "#f9a825", "unknown": "#455a64"}


def chart_png(summary: Summary) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator

    chosen = sorted(summary.turns, key=lambda s: -summary.sessions[s].prompt_tokens)[:CHART_SESSIONS]
    rows = max(1, len(chosen))
    fig, axes = plt.subplots(rows, 1, figsize=(9, 2.4 * rows + 0.6), dpi=110, squeeze=False)
    for ax, session in zip(axes[:, 0], chosen):
        turns = summary.turns[session]
        xs = list(range(1, len(turns) + 1))
        edges = [x - 0.5 for x in xs] + [len(xs) + 0.5]
        # one patch per series (stairs), not one per bar: fast on long sessions
        ax.stairs([p for _, p, _, _ in turns], edges, fill=True, color="#cfd8dc", label="prompt tokens")
        ax.stairs([c for _, _, c, _ in turns], edges, fill=True, color="#1565c0", label="cached tokens")
        ax.scatter(xs, [p for _, p, _, _ in turns], c=[CLASS_COLORS.get(k, "#000") for _, _, _, k in turns],
                   s=18, zorder=3)
        group = summary.sessions[session]
        ax.set_title(f"session {session}  ({', '.join(sorted(group.models)) or '?'}; hit rate {_pct(group.hit_rate)})",
                     fontsize=9, loc="left")
        ax.set_ylabel("tokens", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes[-1, 0].set_xlabel("turn", fontsize=8)
    handles = [Patch(color="#cfd8dc", label="prompt"), Patch(color="#1565c0", label="cached")] + [
        Line2D([], [], marker="o", linestyle="", color=color, label=cls) for cls, color in CLASS_COLORS.items()]
    fig.legend(handles=handles, loc="upper center", ncol=8, fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.35 / (2.4 * rows + 0.6)))
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def _html_table(rows: list[tuple], header: tuple) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def html_page(summary: Summary) -> str:
    t = summary.totals
    png = base64.b64encode(chart_png(summary)).decode() if summary.turns else ""
    data = summary.to_json()
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>litellm-prefix report</title><style>"
        "body{font-family:system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:.5em 0 1.5em}"
        "th,td{border:1px solid #ccc;padding:.25em .6em;text-align:right}th:first-child,td:first-child{text-align:left}"
        "th{background:#f3f3f3}img{max-width:100%}</style></head><body>",
        f"<h1>litellm-prefix report</h1><p>{html.escape(summary.path)}: <b id='calls'>{t.calls}</b> calls in "
        f"{len(summary.sessions)} session(s); <b id='prompt_tokens'>{t.prompt_tokens}</b> prompt tokens, "
        f"<b id='cached_tokens'>{t.cached_tokens}</b> cached ({_pct(t.hit_rate)}), "
        f"<b id='reprocessed_tokens'>{t.reprocessed_tokens}</b> re-processed, {t.tokens_lost} lost to misses; "
        f"{summary.corrupt} corrupt line(s) skipped.</p>",
        "<p>Input cost <b id='billed_usd'>{}</b>, saved by cache reads <b id='saved_usd'>{}</b>, cost of misses "
        "against hits <b id='drift_usd'>{}</b>.</p>".format(*(html.escape(c) for c in _money_cells(t))),
        "<h2>Classes</h2>" + _html_table(
            [(c, t.classes[c], t.reprocessed_by_class[c], t.lost_by_class[c]) for c in REPORT_CLASSES],
            ("class", "calls", "re-processed", "tokens lost")),
    ]
    if png:
        parts.append(f"<h2>Per turn: prompt vs cached tokens</h2><img alt='per-turn chart' "
                     f"src='data:image/png;base64,{png}'>")
    parts.append("<h2>Per model</h2>" + _html_table(_group_rows(summary.models),
                                                    tuple(h.format("model") for h in GROUP_HEADER)))
    if summary.agents:
        parts.append("<h2>Per agent</h2>" + _html_table(_group_rows(summary.agents),
                                                        tuple(h.format("agent") for h in GROUP_HEADER)))
    if summary.tenants:
        parts.append("<h2>Per tenant (hashed)</h2>" + _html_table(_group_rows(summary.tenants),
                                                                  tuple(h.format("tenant") for h in GROUP_HEADER)))
    causes = summary.top_causes()
    if causes:
        parts.append("<h2>Top drift causes</h2>" + _html_table([(c, n, lost) for c, (n, lost) in causes],
                                                               ("changed", "calls", "tokens lost")))
    parts.append(f"<h2>Sessions (top {TOP_SESSIONS} by re-processed tokens)</h2>" + _html_table(
        _group_rows(summary.sessions, TOP_SESSIONS, key=lambda kv: -kv[1].reprocessed_tokens),
        tuple(h.format("session") for h in GROUP_HEADER)))
    parts.append(f"<p>Replicas moved: {summary.replicas_moved}</p>")
    parts.append("<script type='application/json' id='summary'>"
                 + json.dumps(data).replace("<", "\\u003c") + "</script></body></html>")
    return "".join(parts)
