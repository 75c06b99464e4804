"""course_utils.peak: FLOPs counted from the layer shapes (and TensorFlow's profiler agreeing), the matmul
peak measured, and the mixed-precision policy chosen from the hardware (fakes: no GPU here)."""

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
