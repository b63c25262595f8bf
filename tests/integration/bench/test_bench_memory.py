"""bench/proxy_memory.py reads a process group's resident set: real processes of their own (the
rest of the module: tests/unit/bench/test_bench_memory.py).
"""
from __future__ import annotations

from bench.proxy_memory import group_rss_kib
from tests.unit.bench.test_bench_memory import _holding


def test_the_resident_set_of_a_process_group_counts_its_processes_and_no_others():
    big, small = _holding(64), _holding(0)
    try:
        held, other = group_rss_kib(big.pid), group_rss_kib(small.pid)  # pgid == pid: each leads its own
        assert held >= 64 * 1024  # the 64 MiB it touched, and its interpreter
        assert 0 < other < 32 * 1024  # an interpreter alone: the other group's 64 MiB is not counted
    finally:
        for child in (big, small):
            child.stdin.close()
            child.wait(timeout=10)
    assert group_rss_kib(big.pid) == 0  # gone
