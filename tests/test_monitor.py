"""course_utils.monitor: samples at its interval, sees a busy core, GPU metrics through NVML (a fake here:
no GPU in CI), and its thread always stopped and joined, errors raised, never lost."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")

import psutil  # noqa: E402
import pytest  # noqa: E402

from course_utils import plots  # noqa: E402
from course_utils.monitor import SystemMonitor  # noqa: E402


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


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def busy_percent(before, after) -> float:
    """Utilisation of all cores between two ``psutil.cpu_times()``, as the kernel counted it (counted
    as psutil counts it on Linux: waiting for I/O is idle, guest time is already in user time)."""
    def delta(field):
        return getattr(after, field, 0) - getattr(before, field, 0)

    total = sum(after) - sum(before) - delta("guest") - delta("guest_nice")
    return 100.0 * (1 - (delta("idle") + delta("iowait")) / total)


def test_samples_every_core_at_its_interval_and_sees_a_busy_core():
    with SystemMonitor(interval=0.05, nvml=False) as monitor:
        kernel = [psutil.cpu_times()]
        monitor.mark("sleep")
        time.sleep(0.6)
        kernel.append(psutil.cpu_times())
        monitor.mark("busy")
        spin(0.6)
        kernel.append(psutil.cpu_times())
    assert not monitor.running and not monitor_threads()
    assert monitor.cpu.shape == (len(monitor.times), psutil.cpu_count())
    # a sample every 0.05 s over the block's 1.2 s, or fewer if the sampling thread gets the CPU late
    expected = monitor.phases()[-1].end / 0.05
    assert 0.6 * expected <= len(monitor.times) <= expected
    assert ((monitor.cpu >= 0) & (monitor.cpu <= 100)).all()
    summary = monitor.summary()
    assert list(summary) == ["sleep", "busy"]
    # one Python thread spinning keeps one core busy: the busiest core of "busy" is near 100 %
    busy_rows = [i for i, t in enumerate(monitor.times) if t > monitor.phases()[1].start + 0.1]
    assert monitor.cpu[busy_rows].max(axis=1).mean() > 70
    # each phase's mean agrees with the kernel's own count over the phase (whatever else loads the machine)
    for phase, before, after in zip(["sleep", "busy"], kernel, kernel[1:]):
        assert abs(summary[phase]["cpu_mean"] - busy_percent(before, after)) < 20, (phase, summary, kernel)
    assert monitor.gpu_utilization.shape == (len(monitor.times), 0)
    assert "nvidia-ml-py" in monitor.gpu_note
    assert "busy" in monitor.table() and "least busy core" in monitor.table()


def test_gpu_utilisation_and_memory_through_nvml():
    nvml = FakeNVML(count=2)
    with SystemMonitor(interval=0.02, nvml=nvml) as monitor:
        monitor.mark("train")
        time.sleep(0.2)
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
        time.sleep(0.05)
    assert "NVML did not start" in monitor.gpu_note and "libnvidia-ml.so" in monitor.gpu_note
    assert monitor.gpu_utilization.shape[1] == 0
    assert len(plots.plot_system(monitor).axes) == 1


def test_thread_stopped_and_joined_when_the_block_raises():
    with pytest.raises(ValueError, match="the training failed"):
        with SystemMonitor(interval=0.01, nvml=False) as monitor:
            time.sleep(0.05)
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
        with SystemMonitor(interval=0.01, nvml=nvml):
            time.sleep(0.2)
    assert nvml.shut_down and not monitor_threads()


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
