"""The machine a notebook ran on, in one line: CPU model, cores, GPUs (outcomes are compared within one machine)."""

from __future__ import annotations

import os
import platform


def cpu_model(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The CPU's model name (Linux's ``/proc/cpuinfo``), else what ``platform`` knows, else ``"unknown CPU"``."""
    try:
        with open(cpuinfo) as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown CPU"


def cores() -> int:
    """The cores this process may run on (a cgroup or ``taskset`` may allow fewer than the machine has)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def describe(gpus: int | None = None) -> str:
    """``"AMD EPYC 9B14, 2 cores, no GPU"``; ``gpus``: the GPU count (None: ask TensorFlow)."""
    if gpus is None:
        import tensorflow as tf  # noqa: PLC0415

        gpus = len(tf.config.list_physical_devices("GPU"))
    return f"{cpu_model()}, {cores()} cores, " + (f"{gpus} GPU{'s' * (gpus > 1)}" if gpus else "no GPU")
