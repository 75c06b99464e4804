"""This machine's physical limit: matrix-multiply peak FLOP/s, and the FLOPs a model needs per training image.

``matmul_peak()`` times square matrix multiplies with TensorFlow (float32, bfloat16) and NumPy's BLAS at
the thread count TensorFlow uses; ``training_flops(model)`` counts a Keras model's FLOPs per training
image from its layer shapes (forward pass x 3: the backward pass costs about twice the forward, one
product for the inputs' gradient and one for the weights'); ``profiled_forward_flops(model)`` asks
TensorFlow's profiler for the forward pass, as a cross-check.
"""

from __future__ import annotations

import time

import numpy as np


def _best_seconds(fn, repeats: int) -> float:
    fn()  # warm-up: allocation, thread start, oneDNN's kernel choice
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def matmul_peak(size: int = 2048, repeats: int = 5, dtypes=("float32", "bfloat16")) -> dict[str, float]:
    """FLOP/s of the fastest of ``repeats`` ``size`` x ``size`` matrix multiplies, per library and dtype.

    Keys: ``tensorflow_float32``, ``tensorflow_bfloat16`` (each dtype asked for) and ``numpy_float32``.
    A matrix multiply of two n x n matrices costs 2 n^3 FLOPs (n^3 multiply-adds).
    """
    import tensorflow as tf  # noqa: PLC0415

    if size < 64 or repeats < 1:
        raise ValueError(f"need size >= 64 and repeats >= 1, got size={size}, repeats={repeats}")
    flops = 2.0 * size**3
    a = np.random.default_rng(0).random((size, size), dtype=np.float32)
    found = {}
    matmul = tf.function(lambda m: tf.linalg.matmul(m, m))
    for name in dtypes:
        x = tf.cast(tf.constant(a), getattr(tf, name))
        found[f"tensorflow_{name}"] = flops / _best_seconds(lambda x=x: matmul(x).numpy(), repeats)
    found["numpy_float32"] = flops / _best_seconds(lambda: a @ a, repeats)
    return found


def fp32_peak(peak: dict[str, float]) -> float:
    """The fastest float32 figure of a :func:`matmul_peak` result (TensorFlow's or NumPy's)."""
    return max(v for k, v in peak.items() if k.endswith("float32"))


def _forward_flops(layer, input_shape) -> int:
    """2 x multiply-adds of one Dense or Conv2D layer for one example; other layers count 0."""
    kind = type(layer).__name__
    if kind == "Dense":
        return 2 * int(np.prod(input_shape[1:-1] or [1])) * int(input_shape[-1]) * layer.units
    if kind == "Conv2D":
        out = layer.compute_output_shape(input_shape)
        kh, kw = layer.kernel_size
        return 2 * int(out[1]) * int(out[2]) * kh * kw * int(input_shape[-1]) * layer.filters
    return 0


def training_flops(model) -> int:
    """FLOPs per training image of a built Sequential model of Conv2D/Dense layers: forward x 3."""
    shape = (1, *model.inputs[0].shape[1:])
    forward = 0
    for layer in model.layers:
        forward += _forward_flops(layer, shape)
        shape = tuple(layer.compute_output_shape(shape))
    return 3 * forward


def profiled_forward_flops(model) -> int | None:
    """TensorFlow's profiler's count of the forward pass for one image (None where it gives none)."""
    import tensorflow as tf  # noqa: PLC0415

    spec = tf.TensorSpec((1, *model.inputs[0].shape[1:]), tf.float32)
    graph = tf.function(lambda x: model(x, training=False)).get_concrete_function(spec).graph
    options = tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()
    options["output"] = "none"
    found = tf.compat.v1.profiler.profile(graph, options=options)
    return int(found.total_float_ops) if found is not None and found.total_float_ops else None


def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> set[str]:
    """The CPU's feature flags (Linux); empty where ``/proc/cpuinfo`` is missing."""
    try:
        text = open(cpuinfo).read()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def mixed_precision_policy(num_gpus: int | None = None, flags: set[str] | None = None) -> tuple[str | None, str]:
    """The Keras mixed-precision policy worth trying here, and why: ``mixed_float16`` on GPUs (Tensor
    Cores), ``mixed_bfloat16`` on a CPU with bfloat16 instructions (``avx512_bf16`` or ``amx_bf16``),
    else ``None`` (without them bfloat16 on a CPU is emulated and slower than float32)."""
    if num_gpus is None:
        import tensorflow as tf  # noqa: PLC0415

        num_gpus = len(tf.config.list_logical_devices("GPU"))
    if num_gpus:
        return "mixed_float16", f"{num_gpus} GPU(s): float16 with loss scaling"
    flags = cpu_flags() if flags is None else flags
    found = sorted(flags & {"avx512_bf16", "amx_bf16"})
    if found:
        return "mixed_bfloat16", f"this CPU reports {', '.join(found)}"
    return None, "this CPU reports neither avx512_bf16 nor amx_bf16: no mixed precision worth trying"
