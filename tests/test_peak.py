"""course_utils.peak: FLOPs counted from the layer shapes (and TensorFlow's profiler agreeing), the matmul
peak measured, and the mixed-precision policy chosen from the hardware's flags or by timing its matmuls (fakes:
no GPU here)."""

from __future__ import annotations

import pytest

from course_utils import models, peak


def test_training_flops_follow_the_layer_shapes_of_the_course_cnn():
    model = models.build_cnn()
    # conv1 26x26x32 from 3x3x1, conv2 24x24x64 from 3x3x32, Dense 36864->64, logits 64->10; 2 FLOP per multiply-add
    forward = 2 * (26 * 26 * 32 * 9 + 24 * 24 * 64 * 9 * 32 + 24 * 24 * 64 * 64 + 64 * 10)
    assert peak.training_flops(model) == 3 * forward
    assert round(peak.training_flops(model) / 1e6) == 79
    assert peak.training_flops(models.build_cnn((32, 32, 3))) > peak.training_flops(model)
    profiled = peak.profiled_forward_flops(model)  # counts biases and ReLUs too: a little more
    assert profiled is not None and forward <= profiled <= 1.01 * forward


def test_matmul_peak_reports_each_library_and_dtype():
    found = peak.matmul_peak(size=128, repeats=2)
    assert set(found) == {"tensorflow_float32", "tensorflow_bfloat16", "numpy_float32"}
    assert all(v > 1e6 for v in found.values())
    assert peak.fp32_peak({"tensorflow_float32": 2.0, "numpy_float32": 3.0, "tensorflow_bfloat16": 9.0}) == 3.0
    with pytest.raises(ValueError, match="size"):
        peak.matmul_peak(size=8)


def test_mixed_precision_policy_follows_the_hardware(tmp_path):
    assert peak.mixed_precision_policy(num_gpus=1)[0] == "mixed_float16"
    policy, why = peak.mixed_precision_policy(num_gpus=0, flags={"avx2", "avx512_bf16"})
    assert policy == "mixed_bfloat16" and "avx512_bf16" in why
    policy, why = peak.mixed_precision_policy(num_gpus=0, flags={"avx2", "fma"})
    assert policy is None and "neither" in why
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx2 amx_bf16\n")
    assert peak.cpu_flags(str(cpuinfo)) == {"fpu", "avx2", "amx_bf16"}
    assert peak.cpu_flags(str(tmp_path / "missing")) == set()


def _fake_timer(seconds_of, calls):
    """A matmul timer that returns the given seconds per dtype, round after round, and records its calls."""
    rounds = {dtype: iter(found) for dtype, found in seconds_of.items()}

    def time_matmul(dtype):
        calls.append(dtype)
        return next(rounds[dtype])

    return time_matmul


def test_mixed_precision_is_chosen_only_when_the_16_bit_matmul_measures_faster():
    n = 1000  # 2 n^3 = 2 GFLOP per matmul: seconds s give 2 / s GFLOP/s
    calls = []
    slower = _fake_timer({"bfloat16": [0.0125, 0.0130, 0.0128], "float32": [0.0067, 0.0069, 0.0070]}, calls)
    policy, why = peak.mixed_precision_choice(size=n, repeats=3, num_gpus=0, time_matmul=slower)
    assert policy is None
    assert why == ("bfloat16 matmul 154-160 vs float32 286-299 GFLOP/s (1000x1000, 3 repeats): slower here, "
                   "mixed precision not tried")
    assert calls == ["bfloat16", "float32", "float32", "bfloat16", "bfloat16", "float32"]  # interleaved, alternating
    faster = _fake_timer({"bfloat16": [0.004, 0.0041], "float32": [0.0067, 0.0069]}, [])
    policy, why = peak.mixed_precision_choice(size=n, repeats=2, num_gpus=0, time_matmul=faster)
    assert policy == "mixed_bfloat16" and why.endswith(": faster here, mixed_bfloat16 chosen")
    assert why.startswith("bfloat16 matmul 488-500 vs float32 290-299 GFLOP/s")
    overlap = _fake_timer({"bfloat16": [0.0060, 0.0070], "float32": [0.0065, 0.0068]}, [])
    policy, why = peak.mixed_precision_choice(size=n, repeats=2, num_gpus=0, time_matmul=overlap)
    assert policy is None and "not faster here (ranges overlap)" in why
    gpu = _fake_timer({"float16": [0.001, 0.001], "float32": [0.004, 0.004]}, [])
    policy, why = peak.mixed_precision_choice(size=n, repeats=2, num_gpus=1, time_matmul=gpu)
    assert policy == "mixed_float16" and why.startswith("float16 matmul 2,000-2,000 vs float32 500-500 GFLOP/s")
    with pytest.raises(ValueError, match="repeats >= 2"):
        peak.mixed_precision_choice(repeats=1, num_gpus=0, time_matmul=gpu)


def test_mixed_precision_choice_measures_tensorflow_quickly():
    import time

    start = time.perf_counter()
    policy, why = peak.mixed_precision_choice(size=256, repeats=2)
    assert time.perf_counter() - start < 10  # the notebook default (1024, 5 repeats) is kept under ~3 s by its budget
    assert policy in (None, "mixed_bfloat16", "mixed_float16") and isinstance(why, str)
    assert "matmul" in why and "GFLOP/s (256x256, 2 repeats)" in why and "\n" not in why
