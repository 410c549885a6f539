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

from . import speech
from .speech import N_


def get_device() -> torch.device:
    """CUDA when a GPU is present, else the CPU (the course's default)."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def seed_everything(seed: int = 0) -> None:
    """Seed Python's and PyTorch's random generators so reruns print the same numbers."""
    random.seed(seed)
    torch.manual_seed(seed)


def time_call(fn: Callable[..., Any], *args: Any, repeat: int = 5, warmup: int = 1, fastest: bool = False,
              **kwargs: Any) -> float:
    """Median wall-clock seconds of `fn(*args, **kwargs)` over `repeat` runs, after `warmup` runs; with `fastest`,
    the fastest run instead: what the code costs when nothing else competes for the CPU (on a busy machine the
    other runs are slower, never faster), the measure to compare two algorithms by."""
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
    return min(times) if fastest else statistics.median(times)


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


class ProbeLayer(torch.nn.Module):
    """A small layer on (L, d) inputs whose dependence on each position is known: for probing with gradients (03).

    `kind` is "full" or "causal" self-attention, "leaky" (a causal mask off by one: each query also sees the next
    key), "per_position" (an MLP applied to each position alone, its outputs a softmax over features) or
    "prefix_mean" (y[t] = mean(x[0..t]) @ W). Weights are drawn from `seed`; the output width is `d_out` (d if None).
    """

    KINDS = ("full", "causal", "leaky", "per_position", "prefix_mean")

    def __init__(self, kind: str, d: int = 4, d_out: int | None = None, seed: int = 0,
                 dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        if kind not in self.KINDS:
            raise ValueError(f"kind must be one of {self.KINDS}, got {kind!r}")
        self.kind, d_out = kind, d if d_out is None else d_out
        g = torch.Generator().manual_seed(seed)
        shapes = {"W_q": (d, d), "W_k": (d, d), "W_v": (d, d_out)} if kind in ("full", "causal", "leaky") else (
            {"W_1": (d, 2 * d), "W_2": (2 * d, d_out)} if kind == "per_position" else {"W": (d, d_out)})
        for name, shape in shapes.items():
            self.register_parameter(name, torch.nn.Parameter(torch.randn(*shape, generator=g).to(dtype) / d ** 0.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (..., L, d) -> (..., L, d_out)
        if self.kind == "per_position":
            return torch.softmax(torch.tanh(x @ self.W_1) @ self.W_2, dim=-1)
        L = x.shape[-2]
        if self.kind == "prefix_mean":
            counts = torch.arange(1, L + 1, dtype=x.dtype, device=x.device)[:, None]  # (L, 1)
            return (x.cumsum(dim=-2) / counts) @ self.W
        scores = (x @ self.W_q) @ (x @ self.W_k).transpose(-2, -1) / x.shape[-1] ** 0.5  # (..., L, L)
        i, j = torch.arange(L, device=x.device)[:, None], torch.arange(L, device=x.device)[None, :]
        if self.kind != "full":
            scores = scores.masked_fill(j > i + (self.kind == "leaky"), float("-inf"))
        return torch.softmax(scores, dim=-1) @ (x @ self.W_v)


# -- optional "going further" sections ------------------------------------------------------------------------------
GOING_FURTHER = "# going further"


def is_going_further(source: str) -> bool:
    """Is this code cell optional: does one of the comment lines it starts with begin `# going further`? (A cell may
    start with nbval's `# NBVAL_IGNORE_OUTPUT` first.)"""
    for line in source.splitlines():
        if not line.strip():
            continue
        if not line.lstrip().startswith("#"):
            return False
        if line.strip().lower().startswith(GOING_FURTHER):
            return True
    return False


def _going_further_cell(lines: list[str]) -> list[str]:
    """IPython's last input transformer: an optional cell (`is_going_further`) becomes one line that says it was
    skipped, while `skip_going_further(True)` holds."""
    if _SKIP_GOING_FURTHER and is_going_further("".join(lines)):
        return [f"print({speech._(SKIPPED_GOING_FURTHER)!r})\n"]
    return lines


_SKIP_GOING_FURTHER = False
SKIPPED_GOING_FURTHER = N_("(skipped: an optional \"going further\" cell; skip_going_further(False) in the setup cell "
                         "runs it)")


def skip_going_further(skip: bool = True) -> None:
    """Let Run All skip (or, with False, run) the notebook's optional "going further" sections: every code cell that
    starts with a `# going further` comment then prints one line instead of running. The core of the notebook never reads a
    name such a cell defines (tests/test_notebook_cells.py), so skipping them breaks nothing. Works in any IPython
    kernel (JupyterLab, Colab, nbval); elsewhere it changes nothing."""
    global _SKIP_GOING_FURTHER
    _SKIP_GOING_FURTHER = bool(skip)
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - the course installs IPython with JupyterLab
        return
    shell = get_ipython()
    if shell is not None and _going_further_cell not in shell.input_transformers_post:
        shell.input_transformers_post.append(_going_further_cell)
