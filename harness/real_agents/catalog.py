"""Every agent spec present, in order (``SPECS``): the run (``harness.py``) and the installer
(``install.py``) both read it, and neither imports the other for it."""
from __future__ import annotations

from harness.real_agents.spec import AgentSpec


def _specs() -> list[AgentSpec]:
    """Every spec module present (pi here; Claude Code, Codex, opencode; Qwen Code, Gemini CLI)."""
    import importlib

    found: list[AgentSpec] = []
    for module in ("specs_pi", "specs_cc", "specs_gq"):
        try:
            loaded = importlib.import_module(f"harness.real_agents.{module}")
        except ModuleNotFoundError as exc:
            if exc.name != f"real_agents.{module}":
                raise
            continue
        found.extend(loaded.SPECS)
    return found


SPECS: list[AgentSpec] = _specs()
