"""kernel_sets: each of TensorFlow's two x86 kernel sets timed and profiled in a process of its own."""

import platform
import sys
import time

import pytest

from course_utils import kernel_sets, op_profile, processes
from process_checks import alive

X86 = platform.machine().lower() in ("x86_64", "amd64")


@pytest.fixture
def started_pids(monkeypatch):
    """The pid of every ``processes.Piped`` child started during the test, in order."""
    pids = []

    class Recorded(processes.Piped):
        def __init__(self, *args, **kw):
            super().__init__(*args, **kw)
            pids.append(self.proc.pid)

    monkeypatch.setattr(processes, "Piped", Recorded)
    return pids


def test_compare_alternates_the_sets_order_and_keeps_each_set_s_rounds(monkeypatch, tmp_path):
    started = []

    def fake(setting, **job):
        started.append((setting, job["profile_dir"].name))
        assert job["peak_size"] == 256  # passed on to every child
        return {"setting": setting}

    monkeypatch.setattr(kernel_sets, "run_child", fake)
    found = kernel_sets.compare(batch=8, steps=1, rounds=3, image_shape=(4, 4, 1), num_classes=2, run_dir=tmp_path,
                                peak_size=256)
    assert [s for s, _ in started] == ["0", "1", "1", "0", "0", "1"]  # one at a time, the order alternating
    assert found == {"0": [{"setting": "0"}] * 3, "1": [{"setting": "1"}] * 3}
    assert len({d for _, d in started}) == 6  # a profile directory of its own for every child
    with pytest.raises(ValueError, match="rounds, steps and batch must be >= 1"):
        kernel_sets.compare(batch=8, steps=1, rounds=0, image_shape=(4, 4, 1), num_classes=2, run_dir=tmp_path)


def test_bad_settings_and_timeouts_are_refused_before_any_process_starts(tmp_path, monkeypatch):
    monkeypatch.setattr(processes, "Piped", lambda *a, **kw: pytest.fail("a process was started"))
    job = dict(batch=8, steps=1, image_shape=(4, 4, 1), num_classes=2)
    with pytest.raises(ValueError, match=r"settings must be among 0, 1 \(TF_ENABLE_ONEDNN_OPTS\), got \['default'\]"):
        kernel_sets.run_child("default", profile_dir=tmp_path, **job)
    with pytest.raises(ValueError, match="settings must be among"):  # checked before the first round's "1" runs
        kernel_sets.compare(rounds=1, run_dir=tmp_path, settings=("1", "default"), **job)
    with pytest.raises(ValueError, match="give each setting once"):
        kernel_sets.compare(rounds=1, run_dir=tmp_path, settings=("1", "1"), **job)
    with pytest.raises(ValueError, match="timeout must be a positive number of seconds"):
        kernel_sets.compare(rounds=1, run_dir=tmp_path, timeout=float("inf"), **job)
    with pytest.raises(ValueError, match=r"peak_size must be a whole number >= 64 \(the matmul's side\), got 32"):
        kernel_sets.compare(rounds=1, run_dir=tmp_path, peak_size=32, **job)


def test_a_child_that_gives_no_result_is_stopped_at_its_timeout_not_after_a_grace(tmp_path, started_pids):
    hangs = [sys.executable, "-c", "import time; print('starting', flush=True); time.sleep(600)"]
    started = time.perf_counter()
    with pytest.raises(RuntimeError, match=r"(?s)TF_ENABLE_ONEDNN_OPTS=1 child gave no result in 1 s.*starting"):
        kernel_sets.run_child("1", batch=8, steps=1, image_shape=(4, 4, 1), num_classes=2, profile_dir=tmp_path,
                              timeout=1, command=hangs)
    assert time.perf_counter() - started < 15  # not the 30 s grace a child with its result gets
    assert len(started_pids) == 1 and not alive(started_pids[0]) and not processes.LIVE


@pytest.mark.notebook
def test_a_child_that_fails_is_reported_with_its_own_words_and_stopped(tmp_path):
    with pytest.raises(RuntimeError, match=r"(?s)ended \(exit 1\) without a result.*num_classes must be"):
        kernel_sets.run_child("0", batch=8, steps=1, image_shape=(4, 4, 1), num_classes=1, profile_dir=tmp_path)
    assert not processes.LIVE


@pytest.mark.notebook
@pytest.mark.skipif(not X86, reason="TF_ENABLE_ONEDNN_OPTS chooses between the kernel sets on x86 only")
def test_each_setting_reaches_its_child_and_selects_its_kernels(tmp_path, started_pids):
    found = {s: kernel_sets.run_child(s, batch=16, steps=2, image_shape=(12, 12, 1), num_classes=3,
                                      profile_dir=tmp_path / s, peak_size=256) for s in kernel_sets.SETS}
    assert not processes.LIVE
    for setting, result in found.items():
        assert result["onednn"] is (setting == "1")
        arithmetic = [t for t in result["op_types"] if op_profile.owner(t) not in (op_profile.OTHER, op_profile.INPUT)]
        assert arithmetic and all(t.startswith("_Mkl") is (setting == "1") for t in arithmetic), arithmetic
        assert result["images_per_second"] > 0 and result["step_ms"] > 0
        assert set(result["owner_ms"]) >= {op_profile.CONV_FILTER, op_profile.CONV_INPUT, op_profile.DENSE}
        assert (tmp_path / setting).is_dir()  # its trace, where it was asked to write it
        before, after = result["peak_flops_each"]  # its own float32 peak, timed around its steps
        assert set(before) == set(after) == {"tensorflow_float32", "numpy_float32"}
        assert result["peak_flops"] == {k: max(before[k], after[k]) for k in before}
        assert all(v > 0 for v in result["peak_flops"].values())
    assert len(started_pids) == 2 and not any(alive(pid) for pid in started_pids)  # each child stopped and reaped
