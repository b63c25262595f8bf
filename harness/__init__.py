"""The test and benchmark harness: processes and servers (``procs``: the recording upstream,
a LiteLLM proxy, redis-server; ``llama_server``: llama.cpp's server from the xllamacpp
wheel; ``recording_upstream``), agent sessions and requests (``sessions``, ``realistic``,
``agent_requests``) and the real agents' CLIs (``real_agents``). Imported from the
repository root: pytest puts it on the path (``pythonpath`` in pyproject), benchmarks run
as ``python -m bench.NAME`` from the root. Not part of the installed package."""
