"""The shared store's deployment URLs: a single Redis, a Cluster, a Sentinel set-up, each named
from its URL. The deployments themselves, real: tests/integration/fleet/store/test_store_deployments.py.
"""
from __future__ import annotations

import pytest

from litellm_prefix.fleet.store import kind_of
from litellm_prefix.fleet.store.cluster import cluster_nodes
from litellm_prefix.fleet.store.redis import sentinel_nodes
from litellm_prefix.settings import Settings


def test_urls_name_their_deployment():
    assert [kind_of(u) for u in ("redis://h:1/0", "rediss://h:1", "unix:///tmp/r.sock", "redis+cluster://a:1,b:2",
                                 "redis+sentinel://a:1/svc")] == ["single", "single", "single", "cluster", "sentinel"]
    assert cluster_nodes("redis+cluster://u:p%40ss@10.0.0.1:7000,[::1]:7001") == (
        [("10.0.0.1", 7000), ("::1", 7001)], {"username": "u", "password": "p@ss", "tls": False})
    assert sentinel_nodes("rediss+sentinel://:pw@s1:26379,s2/mymaster/2") == (
        [("s1", 26379), ("s2", 26379)], "mymaster", 2, {"password": "pw", "ssl": True})
    with pytest.raises(ValueError, match="names the service"):
        sentinel_nodes("redis+sentinel://s1:26379")
    with pytest.raises(ValueError, match="redis\\+sentinel"):
        Settings(store="sentinel://s1")
