"""What the benchmarks report about the machine they ran on: the CPU model and how much of the CPU other processes
took while a figure was measured. Shared by ``bench_standup_env.py``, ``bench_self_collisions.py``,
``bench_backends.py`` and ``standup_learning.py``."""

from __future__ import annotations

import os
import platform
import resource
import time


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else the platform's processor or machine type."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


class CpuMeter:
    """Share of the machine's CPU time used by *other* processes between :meth:`start` and :meth:`stop`
    (``/proc/stat`` busy time minus this process's user + system time), in [0, 1] of all CPUs."""

    def __init__(self):
        self._t0 = self._busy0 = self._own0 = 0.0

    @staticmethod
    def _busy() -> float:
        try:
            with open("/proc/stat") as f:
                fields = [float(x) for x in f.readline().split()[1:]]
        except OSError:
            return float("nan")
        user, nice, system, _idle, _iowait, irq, softirq = fields[:7]
        return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")

    @staticmethod
    def _own() -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    def start(self) -> CpuMeter:
        """Start (or restart) the measurement; returns self."""
        self._t0, self._busy0, self._own0 = time.perf_counter(), self._busy(), self._own()
        return self

    def stop(self) -> float:
        """Others' share of all CPUs since :meth:`start`, in [0, 1] (NaN without ``/proc/stat``)."""
        wall = time.perf_counter() - self._t0
        others = (self._busy() - self._busy0) - (self._own() - self._own0)
        return max(0.0, others / (wall * (os.cpu_count() or 1)))


def latency_percentiles(ms) -> dict[str, float]:
    """``{"min", "p50", "p90", "p99"}`` of a list of latencies (ms in, ms out; p50 is the median). Shared by the
    latency benchmarks (``bench_vla_onnx.py``, ``bench_policy_server.py``) so that their tables mean the same.

    Raises:
        ValueError: ``ms`` is empty.
    """
    import numpy as np

    a = np.asarray(ms, dtype=np.float64)
    if a.size == 0:
        raise ValueError("latency_percentiles: no samples")
    return {
        "min": float(a.min()),
        "p50": float(np.percentile(a, 50)),
        "p90": float(np.percentile(a, 90)),
        "p99": float(np.percentile(a, 99)),
    }


def record_iteration_times(runner, warmup: int, total: int, label: str = "", stream=None) -> list[tuple[float, float]]:
    """Make ``runner`` (an :class:`~upright.training.runner.UprightRunner`) report each PPO iteration's (collection s,
    update s), rsl-rl's ``collect_time`` and ``learn_time``, into the returned list, and print a progress line per
    iteration to ``stream`` (default stderr), the first ``warmup`` tagged as warm-up."""
    import sys

    times: list[tuple[float, float]] = []
    log = runner.logger.log
    out = stream or sys.__stderr__

    def timed_log(*a, **kw):
        times.append((kw["collect_time"], kw["learn_time"]))
        tag = "warm-up" if len(times) <= warmup else "timed"
        print(
            f"  {label}PPO iteration {len(times)}/{total} ({tag}): collection {kw['collect_time']:.2f} s, "
            f"update {kw['learn_time']:.2f} s",
            file=out,
            flush=True,
        )
        return log(*a, **kw)

    runner.logger.log = timed_log
    return times
