"""The JSONL log's writer (sinks.LogWriter): off the request path, in batches, bounded, and never
losing a record silently. A burst of records is appended in one write, not one a record (a
thread woken per record takes the GIL from the event loop and opens the file twice a request);
a flush writes at once whatever is queued; a full queue drops the record, counts it and says
so in a warning, at most one a minute."""
from __future__ import annotations

import json
import logging
from collections import Counter

from litellm_prefix.measure.sinks import LogWriter


def _records(n: int, start: int = 0) -> list[dict]:
    return [{"event": "call", "session": f"{i:016x}", "turn": i, "prompt_tokens": 1000 + i} for i in range(start, start + n)]


def test_a_burst_is_one_append_in_order_and_every_record_arrives(tmp_path):
    path = tmp_path / "log.jsonl"
    writer = LogWriter(str(path), Counter(), wait=60.0)  # nothing written before the flush
    sent = _records(200)
    for record in sent:
        writer.put(record)
    writer.flush(timeout=30)
    assert writer.batches == 1
    assert [json.loads(line) for line in path.read_text().splitlines()] == sent
    assert path.read_text().splitlines()[0] == json.dumps(sent[0], ensure_ascii=False, sort_keys=True)


def test_records_after_a_flush_wait_for_their_own_batch(tmp_path):
    path = tmp_path / "log.jsonl"
    writer = LogWriter(str(path), Counter(), wait=60.0)
    for record in _records(3):
        writer.put(record)
    writer.flush(timeout=30)
    for record in _records(4, start=3):
        writer.put(record)
    writer.flush(timeout=30)
    assert writer.batches == 2
    assert [json.loads(line)["turn"] for line in path.read_text().splitlines()] == list(range(7))


def test_a_full_queue_drops_counts_and_warns_once(tmp_path, caplog):
    path = tmp_path / "log.jsonl"
    stats: Counter = Counter()
    writer = LogWriter(str(path), stats, wait=60.0, max_queued=10)
    with caplog.at_level(logging.WARNING, logger="litellm_prefix"):
        for record in _records(30):  # 10 fit, 11 once the thread holds the first one while it waits
            writer.put(record)
    assert writer.dropped in (19, 20) and stats["log_dropped"] == writer.dropped
    assert [r.getMessage() for r in caplog.records].count(
        "litellm-prefix: JSONL log behind; 1 record(s) dropped so far") == 1
    assert sum("JSONL log behind" in r.getMessage() for r in caplog.records) == 1
    writer.flush(timeout=30)
    written = [json.loads(line) for line in path.read_text().splitlines()]
    sent = _records(30)
    assert len(written) == 30 - writer.dropped  # every record taken is written, the dropped ones counted
    assert written[:10] == sent[:10]  # the first ten fit, whenever the thread started
    assert [r["turn"] for r in written] == sorted({r["turn"] for r in written}) and all(r in sent for r in written)


def test_an_unwritable_log_counts_its_records_as_dropped(tmp_path, caplog):
    stats: Counter = Counter()
    writer = LogWriter(str(tmp_path / "no-such-dir" / "log.jsonl"), stats, wait=60.0)
    with caplog.at_level(logging.WARNING, logger="litellm_prefix"):
        for record in _records(5):
            writer.put(record)
        writer.flush(timeout=30)
    assert writer.dropped == 5 and stats["log_dropped"] == 5 and stats["errors"] == 1
    assert "JSONL log not written (FileNotFoundError); 5 record(s) dropped so far" in caplog.text
