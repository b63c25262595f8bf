"""``litellm-prefix report``: streamed, corrupt lines skipped, sums equal to the log's, HTML self-contained."""
from __future__ import annotations

import base64
import io
import json
import random
import re

from litellm_prefix.measure.classify import CLASSES
from litellm_prefix.offline import report
from litellm_prefix.offline.cli import main


def synthetic_log(path, sessions=5, turns=12, seed=3, agents=("pi", "claude-code")) -> list[dict]:
    rng = random.Random(seed)
    calls = []
    with open(path, "w") as fh:
        for s in range(sessions):
            prompt, deployment = 0, f"dep-{s % 2}"
            for t in range(1, turns + 1):
                prompt += rng.randint(200, 900)
                cls = "first" if t == 1 else rng.choice(["hit"] * 6 + ["client_drift", "provider_miss", "unknown"])
                cached = 0 if cls in ("first", "unknown") else prompt - rng.randint(100, 900) if cls == "hit" \
                    else rng.randint(0, 300)
                previous, deployment = deployment, (f"dep-{(s + t) % 3}" if cls == "provider_miss" else deployment)
                rec = {"event": "call", "session": f"{s:016x}", "turn": t, "model": f"model-{s % 2}", "class": cls,
                       "prompt_tokens": prompt, "cached_tokens": max(0, cached),
                       "reprocessed_tokens": prompt - max(0, cached), "tokens_lost": 0 if cls in ("first", "hit",
                       "unknown") else prompt - 500, "deployment": deployment, "previous_deployment": previous,
                       "agent": agents[s % len(agents)]}
                if cls == "client_drift":
                    rec["where"] = "section:rules"
                    rec["drift"] = {"changed": [rng.choice(["section:rules", "tools"])], "before": "a", "after": "b"}
                    fh.write(json.dumps({"event": "drift", "changed": rec["drift"]["changed"], "session": rec["session"]})
                             + "\n")
                fh.write(json.dumps(rec) + "\n")
                calls.append(rec)
                if t == 5:
                    fh.write('{"event": "call", "prompt_tokens": 12\n')  # a torn line
                    fh.write("not json at all\n")
                    fh.write(json.dumps({"event": "rewrite", "session": rec["session"], "rules": []}) + "\n")
    return calls


def test_json_totals_equal_the_sums_of_the_log(tmp_path, capsys):
    log = tmp_path / "prefix.jsonl"
    calls = synthetic_log(log)
    assert main(["report", str(log), "--json", "--quiet"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["corrupt_lines"] == 2 * 5
    totals = out["totals"]
    assert totals["calls"] == len(calls)
    assert totals["prompt_tokens"] == sum(c["prompt_tokens"] for c in calls)
    assert totals["cached_tokens"] == sum(c["cached_tokens"] for c in calls)
    assert totals["reprocessed_tokens"] == sum(c["prompt_tokens"] - c["cached_tokens"] for c in calls)
    assert set(out["classes"]) == set(CLASSES) | {"write_never_read"}
    for cls in CLASSES:
        mine = [c for c in calls if c["class"] == cls]
        assert out["classes"][cls] == {"calls": len(mine), "tokens_lost": sum(c["tokens_lost"] for c in mine),
                                       "reprocessed_tokens": sum(c["reprocessed_tokens"] for c in mine)}
    assert set(out["agents"]) == {"pi", "claude-code"} and set(out["models"]) == {"model-0", "model-1"}
    assert sum(s["calls"] for s in out["sessions"].values()) == len(calls)
    moved = sum(1 for c in calls if c["previous_deployment"] != c["deployment"])
    assert out["replicas_moved"] == moved > 0
    causes = {c["cause"]: c["calls"] for c in out["drift_causes"]}
    assert sum(causes.values()) == sum(1 for c in calls if c["class"] == "client_drift")
    assert out["other_events"] == {"rewrite": 5}


def test_text_summary_reads_at_a_glance(tmp_path, capsys):
    log = tmp_path / "prefix.jsonl"
    synthetic_log(log)
    assert main(["report", str(log), "--quiet"]) == 0
    text = capsys.readouterr().out
    for needle in ("corrupt line(s) skipped", "per model", "per agent", "top drift causes", "replicas moved",
                   "client_drift", "hit rate"):
        assert needle in text


def test_html_page_is_self_contained_with_the_chart_and_the_sums(tmp_path, capsys):
    log, page = tmp_path / "prefix.jsonl", tmp_path / "report.html"
    calls = synthetic_log(log)
    assert main(["report", str(log), "--html", str(page), "--quiet"]) == 0
    text = page.read_text()
    png = re.search(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", text)
    assert png and base64.b64decode(png.group(1)).startswith(b"\x89PNG\r\n\x1a\n")
    assert not re.search(r"(src|href)=['\"]https?://", text)  # nothing fetched from elsewhere
    numbers = {k: int(re.search(rf"id='{k}'>(\d+)<", text).group(1))
               for k in ("calls", "prompt_tokens", "cached_tokens", "reprocessed_tokens")}
    assert numbers == {"calls": len(calls), "prompt_tokens": sum(c["prompt_tokens"] for c in calls),
                       "cached_tokens": sum(c["cached_tokens"] for c in calls),
                       "reprocessed_tokens": sum(c["reprocessed_tokens"] for c in calls)}
    embedded = json.loads(re.search(r"<script type='application/json' id='summary'>(.*?)</script>", text).group(1))
    assert embedded["totals"]["calls"] == len(calls)


def test_progress_on_long_logs_and_an_empty_log(tmp_path):
    log = tmp_path / "prefix.jsonl"
    with open(log, "w") as fh:
        line = json.dumps({"event": "call", "session": "s", "turn": 1, "model": "m", "class": "hit",
                           "prompt_tokens": 10, "cached_tokens": 8, "tokens_lost": 0})
        fh.write((line + "\n") * 20000)
    progress = io.StringIO()
    summary = report.read(str(log), progress=progress, interval=0.0)
    assert summary.totals.calls == 20000 and summary.totals.cached_tokens == 160000
    assert "lines" in progress.getvalue() and "%" in progress.getvalue()
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert report.read(str(empty)).totals.calls == 0
    assert "0 calls" in report.text(report.read(str(empty)))


def test_missing_log_is_an_error_not_a_traceback(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nope.jsonl")]) == 2
    assert "nope.jsonl" in capsys.readouterr().err
