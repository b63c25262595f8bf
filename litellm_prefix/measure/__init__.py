"""Measurement: what a request looks like to a prefix cache and what the upstream's answer
proves. ``render`` renders a request as ChatML, ``prefix`` its shape (digests and offsets,
never text) and what it shares with the session's previous request, ``classify`` the cached
tokens an answer reports and the miss class of each call, ``pricing`` what the call cost and
what the cache saved: pure functions. Their outputs: ``sinks`` (the JSONL log, the response
headers, the per-call reports) and ``metrics`` (the Prometheus counters)."""
