"""The examples the docs show run (docs/getting-started.md: the SDK example, the proxy's config line,
the example settings file)."""
from __future__ import annotations

import yaml

from tests.support import ROOT


def test_proxy_config_registers_the_instance():
    config = yaml.safe_load((ROOT / "config" / "proxy.yaml").read_text())
    assert config["litellm_settings"]["callbacks"] == ["litellm_prefix.proxy_handler"]
    assert config["general_settings"]["master_key"] == "os.environ/LITELLM_MASTER_KEY"


def test_example_settings_file_is_valid(monkeypatch):
    from litellm_prefix.settings import load_settings

    monkeypatch.setenv("LITELLM_PREFIX_CONFIG", str(ROOT / "config" / "litellm-prefix.example.json"))
    settings = load_settings()
    assert settings.models["gemini/*"].supports_mid_conversation_system is False
