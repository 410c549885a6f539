"""Building blocks the notebooks share: device choice, seeding, timing and memory measurement."""

from __future__ import annotations

import contextlib
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch


def get_device() -> torch.device:
    """CUDA when a GPU is present, else the CPU (the course's default)."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def seed_everything(seed: int = 0) -> None:
    """Seed Python's and PyTorch's random generators so reruns print the same numbers."""
    random.seed(seed)
    torch.manual_seed(seed)


def time_call(fn: Callable[..., Any], *args: Any, repeat: int = 5, warmup: int = 1, **kwargs: Any) -> float:
    """Median wall-clock seconds of `fn(*args, **kwargs)` over `repeat` runs, after `warmup` runs."""
    if repeat < 1:
        raise ValueError(f"repeat must be at least 1, got {repeat}")
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    for _ in range(warmup):
        fn(*args, **kwargs)
    sync()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn(*args, **kwargs)
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def peak_memory_bytes(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> int:
    """Peak bytes allocated by tensors while `fn(*args, **kwargs)` runs (CUDA allocator or CPU profiler)."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        fn(*args, **kwargs)
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - base
    return tensor_peak_bytes(fn, *args, **kwargs)


def tensor_peak_bytes(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> int:
    """Peak bytes held by tensors allocated while `fn(*args, **kwargs)` runs, counted by PyTorch's profiler.

    The profiler records each tensor allocation and free (on any device), so the count depends only on what `fn`
    does, never on what the process allocated and freed before it (unlike its resident memory).
    """
    from torch.profiler import ProfilerActivity, profile

    with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn(*args, **kwargs)
    # "[memory]" events are single allocations (+bytes) and frees (-bytes): the running sum's maximum is the peak.
    events = sorted(
        (e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"), key=lambda e: e.start_ns()
    )
    level = peak = 0
    for event in events:
        level += event.nbytes()
        peak = max(peak, level)
    return peak


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Silence the profiler's C++ start/stop lines on file descriptor 2 (they would read as errors)."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def proc_status_kib(pid: int | str, field: str) -> int:
    """A field of /proc/PID/status, in KiB (VmHWM: the peak resident memory; VmRSS: the current)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)
