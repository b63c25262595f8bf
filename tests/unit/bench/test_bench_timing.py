"""bench/load.py reads the plugin's own CPU from inside each proxy (bench/proxy_gc.py): each hook
is timed in thread CPU over its own steps only. A hook that waits (on Redis) lets the event loop
run other requests on the same thread; their CPU must not be charged to the plugin."""
from __future__ import annotations

import asyncio
import struct

import pytest


@pytest.fixture(scope="module")
def proxy_gc():
    from bench import proxy_gc as module

    return module


class Clock:
    """A thread-CPU clock that only moves when a coroutine says it spent CPU."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def spend(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(proxy_gc, monkeypatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(proxy_gc.time, "thread_time", clock)
    return clock


def test_a_hook_is_charged_its_own_steps_not_the_loop_s_other_work(proxy_gc, clock):
    charged: list[float] = []

    async def hook():
        clock.spend(0.002)
        await asyncio.sleep(0.01)  # waits on the store: the loop runs another request meanwhile
        clock.spend(0.003)
        return "result"

    async def other_request():
        await asyncio.sleep(0.001)
        clock.spend(0.020)

    async def main():
        result, _ = await asyncio.gather(proxy_gc._OwnCpu(hook(), charged.append), other_request())
        return result

    assert asyncio.run(main()) == "result"
    assert charged == [pytest.approx(0.005)]


def test_a_failing_or_cancelled_hook_is_charged_too(proxy_gc, clock):
    charged: list[float] = []

    async def failing():
        clock.spend(0.001)
        await asyncio.sleep(0)
        raise ValueError("store said no")

    async def waiting():
        clock.spend(0.004)
        await asyncio.sleep(10)

    async def main():
        with pytest.raises(ValueError):
            await proxy_gc._OwnCpu(failing(), charged.append)
        task = asyncio.ensure_future(proxy_gc._OwnCpu(waiting(), charged.append))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert charged == [pytest.approx(0.001), pytest.approx(0.004)]


def test_the_totals_are_read_from_the_mapped_file(proxy_gc, tmp_path):
    path = tmp_path / "memory.plugin-cpu"
    cpu = proxy_gc._CpuFile(str(path))
    cpu.add(0.002, request=True)
    cpu.add(0.0005)
    cpu.add(0.001, request=True)
    assert struct.unpack("2d", path.read_bytes()[:16]) == (2.0, pytest.approx(0.0035))


def test_the_load_run_says_how_far_it_resolves_the_cpu_ratio():
    """bench/load.py reports the CPU ratio with two standard errors of the turn-by-turn difference:
    equal configurations give an interval around 1, a known difference one that excludes 1, and
    a difference common to both waves of a turn (a slower machine that turn) is no uncertainty."""
    from bench import load
    noisy = [0.5, 0.62, 0.44, 0.58, 0.5, 0.47, 0.55, 0.6, 0.41, 0.53]  # CPU seconds per wave, ±15%
    same = load._cpu_ratio_interval(noisy[::-1], noisy)
    assert same["cpu_ratio_interval"][0] < 1 < same["cpu_ratio_interval"][1]
    assert 0.03 < same["cpu_ratio_two_se"] < 0.25
    more = load._cpu_ratio_interval([w * 1.3 for w in noisy], noisy)
    assert more["cpu_ratio_interval"][0] > 1
    shifted = load._cpu_ratio_interval([w + 0.05 for w in noisy], noisy)  # +10%, whatever the turn's speed
    assert shifted["cpu_ratio_two_se"] < 1e-9 and abs(shifted["cpu_ratio_interval"][0] - 1.1) < 0.01
    assert load._cpu_ratio_interval([0.5], noisy) == {}


def test_the_same_process_comparison_sends_its_sessions_to_the_switched_off_group():
    """bench/load.py's ``memory-off`` sessions name the model group whose deployment switches the
    plugin off; the others keep the client's own group."""
    import json

    from bench import load
    off = json.loads(load.Session(0, 2, "t", load.OFF_GROUP).advance(0))
    on = json.loads(load.Session(0, 2, "t").advance(0))
    assert off["model"] == load.OFF_GROUP != on["model"] == "chat-model"
    assert off["messages"] == on["messages"]
    assert set(load.SAME_PROCESS) == {*load.PLUGIN, "calibration"}
    assert all(off in load.CONFIGS and off.endswith("-off") for off in load.SAME_PROCESS.values())


class TickingClock:
    """A thread-CPU clock that moves 1 ms each time it is read: a busy loop ends after N reads."""

    def __init__(self) -> None:
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return self.reads / 1000


def test_latency_cpu_s_hooks_wait_without_cpu_and_burn_without_waiting(monkeypatch, proxy_gc):
    """bench/latency_cpu.py tells latency from CPU: its sleep hook awaits the loop's sleep for its
    time and reads no CPU clock, its burn hook spins on the thread-CPU clock until its time is
    spent and never awaits; both hand the request on unchanged. (No timing is asserted: the
    clocks are replaced, so the verdict does not depend on how busy the machine is.)"""
    monkeypatch.setenv("BENCH_SLEEP_MS", "80")
    monkeypatch.setenv("BENCH_BURN_MS", "20")
    from bench import latency_hooks as hooks
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    clock = TickingClock()
    monkeypatch.setattr(hooks.asyncio, "sleep", sleep)
    monkeypatch.setattr(proxy_gc.time, "thread_time", clock)
    data = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    assert asyncio.run(hooks.Sleep().async_pre_call_hook(None, None, data, "acompletion")) is data
    assert slept == [pytest.approx(0.08)] and clock.reads == 0
    # (latency_cpu's burning proxy runs proxy_gc.calibration, a Burn.)
    assert asyncio.run(proxy_gc.Burn().async_pre_call_hook(None, None, data, "acompletion")) is data
    assert slept == [pytest.approx(0.08)] and 20 <= clock.reads <= 22


def test_latency_cpu_switches_the_plugin_off_for_the_sessions_group_only():
    from bench import latency_cpu
    config = {"model_list": [
        {"model_name": "chat-model", "litellm_params": {"model": "openai/x"}, "model_info": {"mode": "chat"}},
        {"model_name": "other", "litellm_params": {"model": "openai/y"}}]}
    off = latency_cpu.switched_off(config)
    assert off["model_list"][0]["model_info"] == {"mode": "chat", "litellm_prefix": {"enabled": False}}
    assert off["model_list"][1] == config["model_list"][1]
    assert config["model_list"][0]["model_info"] == {"mode": "chat"}  # the original is left as it was


def test_the_calibration_hook_spares_the_group_it_is_told_to_skip(monkeypatch, proxy_gc):
    """bench/load.py's ``calibration-off`` wave goes to the calibration proxy itself: its known cost
    is read against the same process, so the burning hook must skip that group and only that one.
    (The thread-CPU clock is replaced: the burn is counted in clock reads, not measured.)"""
    monkeypatch.setenv("BENCH_BURN_MS", "20")
    monkeypatch.setenv("BENCH_BURN_SKIP_MODEL", "chat-model-off")
    burn = proxy_gc.Burn()
    for model, burns in (("chat-model-off", False), ("chat-model", True)):
        clock = TickingClock()
        monkeypatch.setattr(proxy_gc.time, "thread_time", clock)
        data = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
        assert asyncio.run(burn.async_pre_call_hook(None, None, data, "acompletion")) is data
        assert (clock.reads >= 20) == burns and (clock.reads == 0) != burns, (model, clock.reads)


def test_several_runs_are_pooled_wave_by_wave():
    """``bench/load.py --pool`` reads runs of the same code as one: every configuration against
    its twin and against another process, the waves paired within their run."""
    from bench import load

    def report(extra: float, noise: list[float]) -> dict:
        configs = {}
        for config in load.CONFIGS:
            plugin = config in load.SAME_PROCESS  # memory, redis, replicas, calibration: dearer
            configs[config] = {"cpu_ms_per_request_by_turn": [20 + n + (extra if plugin else 0) for n in noise],
                               "p50_ms": 500 * (1.06 if plugin else 1.0)}
        return {"configs": configs}

    pooled = load.pool([report(1.0, [0.0, 1.0, -1.0, 0.5]), report(3.0, [2.0, -2.0, 0.0, 1.0])])
    assert set(pooled) == set(load.SAME_PROCESS)
    for config, readings in pooled.items():
        for key in ("same_process", "another_process"):
            r = readings[key]
            assert r["waves"] == 8 and r["runs"] == 2
            assert r["extra_cpu_ms_per_request"] == pytest.approx(2.0)  # (1 + 3) / 2: every wave counts
            assert r["cpu_ratio"] == pytest.approx(1 + 2.0 / 20.1875)
            assert r["p50_ratios"] == [pytest.approx(1.06)] * 2
        assert readings["same_process"]["against"] == load.SAME_PROCESS[config]
        assert readings["another_process"]["against"] == load.AGAINST[config]
