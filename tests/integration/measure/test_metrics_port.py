"""metricsPort: without the proxy (SDK, Router) the plugin serves prometheus_client's registry on a
port of its own (read over HTTP on 127.0.0.1).
"""
from __future__ import annotations

from litellm_prefix.request.core import Stabilizer
from litellm_prefix.request.target import Target
from litellm_prefix.settings import Settings


def test_metrics_port_serves_the_metrics_standalone(tmp_path):
    """Without the proxy (SDK, Router): metricsPort serves prometheus_client's registry."""
    import httpx

    from harness.procs import free_port
    from litellm_prefix.measure import metrics

    port = free_port()
    stabilizer = Stabilizer(Settings(path_check="absolute", metrics_port=port))
    try:
        data = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "litellm_call_id": "port-1",
                "metadata": {"session_id": "sess-port-1"}}
        stabilizer.stabilize_sync(data, "acompletion", target=Target(model="openai/m", provider="openai"))
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
        assert "# TYPE litellm_prefix_calls_total counter" in text
        assert 'litellm_prefix_requests_total{agent="",model_group="openai/m"}' in text
    finally:
        metrics.stop_serving(port)
