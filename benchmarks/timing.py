"""
What the benchmarks share: timing a function, CPU time of child processes, peak memory.

    best_of(fn, repeat) -> (median s, best s, fn's last result)
    median_ms(fn, repeat) -> median ms
    children_cpu_s() -> user + system seconds of the finished child processes
    peak_rss_mb() -> this process's peak resident memory (MB)

Import it from a benchmark run as a script (``python benchmarks/bench_x.py``: its folder is on
sys.path).
"""

import resource
import time

import numpy as np


def best_of(fn, repeat):
    """(median seconds, best seconds, the last call's result) of ``repeat`` calls of ``fn``."""
    times, out = [], None
    for _ in range(max(1, int(repeat))):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times)), float(np.min(times)), out


def median_ms(fn, repeat):
    """Median milliseconds of ``repeat`` calls of ``fn``."""
    return 1e3 * best_of(fn, repeat)[0]


def children_cpu_s():
    """User + system CPU seconds of this process's finished children (getrusage)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def peak_rss_mb():
    """Peak resident memory of this process so far, MB (getrusage; Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
