"""System metrics while training: per-core CPU utilisation (psutil) and, where present, GPU utilisation
and memory (NVML), sampled in a background thread at a fixed interval.

    with SystemMonitor(interval=0.25) as monitor:
        monitor.mark("naive")
        model.fit(...)
        monitor.mark("tuned")
        model.fit(...)
    monitor.cpu          # samples x cores, percent
    monitor.summary()    # per phase: mean utilisation, cores under half busy

The thread is stopped and joined when the ``with`` block ends, also when it ends with an exception;
an error inside the thread is raised there too, never lost. GPU metrics need NVML's Python binding
(``pip install nvidia-ml-py``, imported as ``pynvml``); without a GPU or the binding the GPU series are
empty and :attr:`gpu_note` says why.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np
import psutil


@dataclass
class Phase:
    label: str
    start: float  # seconds since the monitor started
    end: float


def _load_nvml():
    try:
        import pynvml  # noqa: PLC0415
    except ImportError:
        return None
    return pynvml


class SystemMonitor:
    """Sample CPU (and GPU) utilisation every ``interval`` seconds until the ``with`` block ends.

    ``nvml`` is the NVML module to use (default: ``pynvml`` if it imports; ``False``: no GPU metrics).
    """

    def __init__(self, interval: float = 0.25, *, nvml=None):
        if not interval > 0:
            raise ValueError(f"interval must be > 0 seconds, got {interval!r}")
        self.interval = float(interval)
        self._nvml = _load_nvml() if nvml is None else (nvml or None)
        self._handles: list = []
        self._gpu_count = 0  # GPUs sampled (kept after the handles are released)
        self.gpu_note = ""
        self.times: list[float] = []
        self._cpu: list[list[float]] = []
        self._gpu_util: list[list[float]] = []
        self._gpu_mem: list[list[float]] = []
        self._marks: list[tuple[str, float]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._t0 = 0.0
        self._t_end: float | None = None

    # -- lifecycle ------------------------------------------------------------------------------------
    def __enter__(self) -> SystemMonitor:
        if self._thread is not None:
            raise RuntimeError("a SystemMonitor runs once: create a new one for another measurement")
        self._open_gpus()
        psutil.cpu_percent(percpu=True)  # the first call only sets psutil's reference point
        self._t0 = time.perf_counter()
        self._thread = threading.Thread(target=self._run, name="SystemMonitor", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self._stop.set()
        self._thread.join()
        self._t_end = self.now()
        self._close_gpus()
        if self._error is not None and exc_type is None:
            raise RuntimeError(f"the monitor's sampling thread failed: {self._error!r}") from self._error

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def now(self) -> float:
        """Seconds since the monitor started (the time axis of every series)."""
        return time.perf_counter() - self._t0

    def mark(self, label: str) -> None:
        """Start a phase called ``label`` now; it lasts until the next mark or the end of the block."""
        self._marks.append((label, self.now()))

    # -- sampling -------------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            while not self._stop.wait(self.interval):
                cpu = psutil.cpu_percent(percpu=True)
                util, mem = [], []
                for handle in self._handles:
                    util.append(float(self._nvml.nvmlDeviceGetUtilizationRates(handle).gpu))
                    info = self._nvml.nvmlDeviceGetMemoryInfo(handle)
                    mem.append(100.0 * info.used / info.total)
                self.times.append(self.now())
                self._cpu.append(cpu)
                self._gpu_util.append(util)
                self._gpu_mem.append(mem)
        except BaseException as error:  # noqa: BLE001  (kept, and raised by __exit__)
            self._error = error

    def _open_gpus(self) -> None:
        if self._nvml is None:
            self.gpu_note = "no GPU metrics: NVML's Python binding is not installed (pip install nvidia-ml-py)"
            return
        try:
            self._nvml.nvmlInit()
        except Exception as error:  # noqa: BLE001  (no driver: a CPU-only machine)
            self._nvml = None
            self.gpu_note = f"no GPU metrics: NVML did not start ({error}); no NVIDIA driver here?"
            return
        count = self._nvml.nvmlDeviceGetCount()
        self._handles = [self._nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        self._gpu_count = count
        self.gpu_note = f"{count} GPU(s) through NVML" if count else "no GPU metrics: NVML sees no GPU"

    def _close_gpus(self) -> None:
        if self._nvml is not None:
            self._handles = []
            self._nvml.nvmlShutdown()

    # -- results --------------------------------------------------------------------------------------
    @property
    def cpu(self) -> np.ndarray:
        """Per-core CPU utilisation in percent, one row per sample."""
        return np.array(self._cpu, dtype=float).reshape(len(self._cpu), -1)

    @property
    def gpu_utilization(self) -> np.ndarray:
        """Per-GPU utilisation in percent (NVML's "GPU busy" time), one row per sample; no columns without GPUs."""
        return np.array(self._gpu_util, dtype=float).reshape(len(self._gpu_util), self._gpu_count)

    @property
    def gpu_memory(self) -> np.ndarray:
        """Per-GPU memory in use, percent of the GPU's total, one row per sample."""
        return np.array(self._gpu_mem, dtype=float).reshape(len(self._gpu_mem), self._gpu_count)

    def phases(self) -> list[Phase]:
        """The marked phases in order, each with its start and end (seconds since the start)."""
        end = self.now() if self._t_end is None else self._t_end
        starts = [t for _, t in self._marks[1:]] + [end]
        return [Phase(label, t, t_next) for (label, t), t_next in zip(self._marks, starts)]

    def summary(self, busy: float = 50.0) -> dict[str, dict[str, float]]:
        """Per phase: samples, mean CPU utilisation over all cores, mean of the least busy core,
        the fraction of core-samples below ``busy`` percent, and (with GPUs) the mean GPU utilisation."""
        times, cpu, gpu = np.array(self.times), self.cpu, self.gpu_utilization
        found = {}
        for phase in self.phases():
            rows = (times > phase.start) & (times <= phase.end)
            if not rows.any():
                continue
            entry = {"samples": int(rows.sum()), "cpu_mean": float(cpu[rows].mean()),
                     "least_busy_core": float(cpu[rows].mean(axis=0).min()),
                     "idle_fraction": float((cpu[rows] < busy).mean())}
            if gpu.shape[1]:
                entry["gpu_mean"] = float(gpu[rows].mean())
            found[phase.label] = entry
        return found

    def table(self, busy: float = 50.0) -> str:
        """:meth:`summary` as aligned text, one line per phase."""
        rows = self.summary(busy)
        width = max([len(label) for label in rows] + [5])
        lines = [f"{'phase':<{width}}  {'CPU mean':>8}  {'least busy core':>15}  {f'core-samples < {busy:.0f} %':>20}"]
        for label, s in rows.items():
            line = (f"{label:<{width}}  {s['cpu_mean']:7.0f}%  {s['least_busy_core']:14.0f}%  "
                    f"{s['idle_fraction']:20.0%}")
            lines.append(line + (f"  GPU {s['gpu_mean']:.0f}%" if "gpu_mean" in s else ""))
        return "\n".join(lines)
