"""Real LiteLLM proxies for a run of real agents: one, or several sharing a redis-server store
behind the round-robin balancer. The real-agent benchmark (bench/real_agents.py) and the hook
recorder (harness/hook_record.py) run their agents through it."""
from __future__ import annotations

from pathlib import Path


class Fleet:
    """One proxy (``replicas`` 1), or ``replicas`` proxies sharing a redis-server store behind a
    round-robin balancer (``harness.balancer``: each request to the next replica, so that an
    agent's turns land on the replicas in turn). Each proxy writes its own JSONL log."""

    def __init__(self, work: Path, config: dict, replicas: int) -> None:
        self.work, self.config, self.replicas = work, config, replicas
        self.proxies: list = []
        self.redis = self.balancer = None

    def __enter__(self) -> Fleet:
        from harness.balancer import Balancer
        from harness.procs import Proxy, RedisServer

        try:
            env: dict[str, str] = {}
            if self.replicas > 1:
                self.redis = RedisServer(self.work)
                env["LITELLM_PREFIX_STORE"] = self.redis.url
            key = None
            for i in range(self.replicas):
                log = self.work / ("prefix.jsonl" if self.replicas == 1 else f"prefix-{i}.jsonl")
                proxy = Proxy(self.work, self.config, {**env, "LITELLM_PREFIX_LOG": str(log)},
                              name="proxy" if self.replicas == 1 else f"proxy-{i}", key=key)
                key = proxy.key
                self.proxies.append(proxy)
            for proxy in self.proxies:
                proxy.wait_ready()
            if self.replicas > 1:
                self.balancer = Balancer(self.work, [p.url for p in self.proxies])
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    @property
    def url(self) -> str:
        return self.balancer.url if self.balancer else self.proxies[0].url

    @property
    def key(self) -> str:
        return self.proxies[0].key

    @property
    def logs(self) -> list[Path]:
        return [Path(p.env["LITELLM_PREFIX_LOG"]) for p in self.proxies]

    def spread(self) -> list[int] | None:
        """Requests each replica got through the balancer (None: one proxy, no balancer)."""
        if self.balancer is None:
            return None
        counts = [0] * self.replicas
        for index, _, _ in self.balancer.requests():
            counts[index] += 1
        return counts

    def __exit__(self, *exc) -> None:
        for proc in (self.balancer, *self.proxies, self.redis):
            if proc is not None:
                proc.stop()
