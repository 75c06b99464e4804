"""course_utils.monitor: samples at its interval, sees a busy core, GPU metrics through NVML (a fake here:
no GPU in CI), and its thread always stopped and joined, errors raised, never lost."""

from __future__ import annotations

import bisect
import threading
import time
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import psutil  # noqa: E402
import pytest  # noqa: E402

from course_utils import plots  # noqa: E402
from course_utils.monitor import SystemMonitor  # noqa: E402
from process_checks import wait_until  # noqa: E402


def monitor_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "SystemMonitor"]


class FakeNVML:
    """pynvml's calls the monitor makes, for ``count`` GPUs; ``fail_after`` samples, utilisation raises."""

    def __init__(self, count=2, fail_after=None, init_error=None):
        self.count, self.fail_after, self.init_error = count, fail_after, init_error
        self.calls = 0
        self.started = self.shut_down = False

    def nvmlInit(self):
        if self.init_error:
            raise self.init_error
        self.started = True

    def nvmlShutdown(self):
        self.shut_down = True

    def nvmlDeviceGetCount(self):
        return self.count

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetUtilizationRates(self, handle):
        self.calls += 1
        if self.fail_after is not None and self.calls > self.fail_after:
            raise OSError("NVML: GPU is lost")
        return SimpleNamespace(gpu=40 + 10 * handle)

    def nvmlDeviceGetMemoryInfo(self, handle):
        return SimpleNamespace(used=(handle + 1) * 2**30, total=16 * 2**30)


def wait_for_samples(monitor, n: int, spin: bool = False, timeout: float = 60.0) -> None:
    """Return once the monitor has taken ``n`` samples after this call began: a handshake with the sampling
    thread, not a guess of how long it needs (a loaded machine gives it the CPU late). ``spin``: keep this
    thread busy meanwhile (one loaded core); otherwise poll at a tenth of the interval."""
    since, deadline = monitor.now(), time.monotonic() + timeout
    # samples are appended in time order; count those taken after ``since``
    while len(monitor.times) - bisect.bisect_right(monitor.times, since) < n:
        assert monitor.running, "the sampling thread stopped"
        assert time.monotonic() < deadline, f"the monitor took fewer than {n} samples in {timeout:g} s"
        if not spin:
            time.sleep(monitor.interval / 10)


def whole_windows(times: np.ndarray, start: float, end: float):
    """The samples whose whole window (from the sample before to this one, what psutil's counts cover) lies
    in [start, end]: their indices, their windows' lengths, and the fraction of [start, end] left uncovered."""
    rows = np.array([i for i in range(1, len(times)) if times[i - 1] >= start and times[i] <= end], dtype=int)
    lengths = times[rows] - times[rows - 1]
    return rows, lengths, 1 - lengths.sum() / (end - start)


def busy_percent(before, after) -> float:
    """Utilisation of all cores between two ``psutil.cpu_times()``, as the kernel counted it (counted
    as psutil counts it on Linux: waiting for I/O is idle, guest time is already in user time)."""
    def delta(field):
        return getattr(after, field, 0) - getattr(before, field, 0)

    total = sum(after) - sum(before) - delta("guest") - delta("guest_nice")
    return 100.0 * (1 - (delta("idle") + delta("iowait")) / total)


def test_samples_every_core_at_its_interval_and_sees_a_busy_core():
    interval, n = 0.1, 10  # phases of n samples each, however long the machine takes to give them
    spans = {}
    with SystemMonitor(interval=interval, nvml=False) as monitor:
        for label, busy in [("sleep", False), ("busy", True)]:
            monitor.mark(label)
            before = (monitor.now(), psutil.cpu_times(), time.thread_time())
            wait_for_samples(monitor, n, spin=busy)
            spans[label] = before, (monitor.now(), psutil.cpu_times(), time.thread_time())
    assert not monitor.running and not monitor_threads()
    times = np.array(monitor.times)
    assert monitor.cpu.shape == (len(times), psutil.cpu_count()) and len(times) >= 2 * n
    # never sooner than the interval (later, on a loaded machine): the first a whole interval after the
    # start, each a whole interval after the one before, so at most one per interval over the block
    assert times[0] >= interval and (np.diff(times) >= interval).all(), np.diff(times)
    assert len(times) <= monitor.phases()[-1].end / interval
    assert ((monitor.cpu >= 0) & (monitor.cpu <= 100)).all()
    summary = monitor.summary()
    assert list(summary) == ["sleep", "busy"]
    assert all(summary[label]["samples"] >= n for label in summary), summary
    for label, ((start, kernel_before, _), (end, kernel_after, _)) in spans.items():
        rows, lengths, uncovered = whole_windows(times, start, end)
        assert len(rows) >= n - 1
        # the phase's mean agrees with the kernel's own count over the phase (whatever else loads the
        # machine): weighted by window length, as the kernel counts time; the part of the phase no whole
        # window covers may differ by up to 100 %, the rest by rounding (10 points)
        mean = np.average(monitor.cpu[rows].mean(axis=1), weights=lengths)
        kernel = busy_percent(kernel_before, kernel_after)
        assert abs(mean - kernel) <= 100 * uncovered + 10, (label, mean, kernel, uncovered)
    # this thread spun through "busy": the CPU it got (time.thread_time, however it migrated between cores)
    # shows in the sum over the cores; the uncovered part of the phase may hold up to all of its CPU
    (start, _, spun_before), (end, _, spun_after) = spans["busy"]
    share = (spun_after - spun_before) / (end - start)
    rows, lengths, uncovered = whole_windows(times, start, end)
    total = np.average(monitor.cpu[rows].sum(axis=1), weights=lengths)
    assert total >= 100 * (share - uncovered) - 10, (total, share, uncovered)
    assert monitor.gpu_utilization.shape == (len(times), 0)
    assert "nvidia-ml-py" in monitor.gpu_note
    assert "busy" in monitor.table() and "least busy core" in monitor.table()


def test_gpu_utilisation_and_memory_through_nvml():
    nvml = FakeNVML(count=2)
    with SystemMonitor(interval=0.02, nvml=nvml) as monitor:
        monitor.mark("train")
        wait_for_samples(monitor, 3)
    assert nvml.started and nvml.shut_down
    assert monitor.gpu_note == "2 GPU(s) through NVML"
    assert monitor.gpu_utilization.shape == (len(monitor.times), 2)
    assert (monitor.gpu_utilization == [40.0, 50.0]).all()
    assert (monitor.gpu_memory == [100 / 16, 200 / 16]).all()
    assert monitor.summary()["train"]["gpu_mean"] == pytest.approx(45.0)
    fig = plots.plot_system(monitor, rates={"train": 1234.0})
    assert len(fig.axes) == 2 and "1,234 images/s" in fig.axes[0].texts[0].get_text()


def test_no_driver_is_said_plainly():
    monitor = SystemMonitor(interval=0.02, nvml=FakeNVML(init_error=OSError("libnvidia-ml.so not found")))
    with monitor:
        wait_for_samples(monitor, 2)  # plot_system needs samples
    assert "NVML did not start" in monitor.gpu_note and "libnvidia-ml.so" in monitor.gpu_note
    assert monitor.gpu_utilization.shape[1] == 0
    assert len(plots.plot_system(monitor).axes) == 1


def test_thread_stopped_and_joined_when_the_block_raises():
    with pytest.raises(ValueError, match="the training failed"):
        with SystemMonitor(interval=0.01, nvml=False) as monitor:
            wait_for_samples(monitor, 2)
            raise ValueError("the training failed")
    assert not monitor.running and not monitor_threads()
    assert monitor.times  # what was sampled before the error is kept


def test_thread_stopped_on_keyboard_interrupt():
    with pytest.raises(KeyboardInterrupt):
        with SystemMonitor(interval=0.01, nvml=False) as monitor:
            raise KeyboardInterrupt
    assert not monitor.running and not monitor_threads()


def test_an_error_in_the_sampling_thread_is_raised_at_exit():
    nvml = FakeNVML(count=1, fail_after=2)
    with pytest.raises(RuntimeError, match="GPU is lost"):
        with SystemMonitor(interval=0.01, nvml=nvml) as monitor:
            # the third sample fails and ends the thread: wait for that, not for a guessed time
            wait_until(lambda: not monitor.running, timeout=60, what="the sampling thread to fail")
    assert nvml.shut_down and not monitor_threads()
    assert len(monitor.times) == 2  # the samples before the failure are kept


def test_bad_interval_and_second_use_are_refused():
    with pytest.raises(ValueError, match="interval"):
        SystemMonitor(interval=0)
    monitor = SystemMonitor(interval=0.01, nvml=False)
    with monitor:
        pass
    with pytest.raises(RuntimeError, match="runs once"):
        monitor.__enter__()


def test_phases_run_from_mark_to_mark_and_the_end():
    with SystemMonitor(interval=0.01, nvml=False) as monitor:
        monitor.mark("a")
        time.sleep(0.05)
        monitor.mark("b")
        time.sleep(0.05)
    a, b = monitor.phases()
    assert (a.label, b.label) == ("a", "b") and a.end == b.start and b.end >= b.start + 0.04
