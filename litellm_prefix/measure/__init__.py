"""Measurement: what a request looks like to a prefix cache and what the upstream's answer
proves. ``render`` renders a request as ChatML, ``prefix`` its shape (digests and offsets,
never text) and what it shares with the session's previous request, ``classify`` the cached
tokens an answer reports and the miss class of each call, ``pricing`` what the call cost and
what the cache saved. Pure functions: the outputs (log, metrics, headers) live in ``sinks``."""
