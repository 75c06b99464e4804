"""This machine's physical limit: matrix-multiply peak FLOP/s, and the FLOPs a model needs per training image.

``matmul_peak()`` times square matrix multiplies with TensorFlow (float32, bfloat16) and NumPy's BLAS at
the thread count TensorFlow uses; ``training_flops(model)`` counts a Keras model's FLOPs per training
image from its layer shapes (forward pass x 3: the backward pass costs about twice the forward, one
product for the inputs' gradient and one for the weights'); ``profiled_forward_flops(model)`` asks
TensorFlow's profiler for the forward pass, as a cross-check. ``mixed_precision_choice()`` chooses a
mixed-precision policy only where TensorFlow's 16-bit matmul measures faster than its float32 one
(``mixed_precision_policy()``, the older guess from the CPU's flags, is kept for its callers).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from course_utils import verdicts


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
    """The CPU flags' guess at the Keras mixed-precision policy worth trying here, and why: ``mixed_float16``
    on GPUs (Tensor Cores), ``mixed_bfloat16`` on a CPU with bfloat16 instructions (``avx512_bf16`` or
    ``amx_bf16``), else ``None`` (without them bfloat16 on a CPU is emulated and slower than float32).

    A guess: the flags do not say how fast TensorFlow's 16-bit kernels are. A CPU with ``avx512_bf16`` and no
    AMX can run TensorFlow's bfloat16 matmul at half its float32 speed, and ``mixed_bfloat16`` train slower
    than float32; :func:`mixed_precision_choice` measures instead. Kept for its callers."""
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


def _tf_matmul_timer(size: int, dtypes: tuple[str, ...], repeats: int, budget: float) -> tuple[Callable, int]:
    """A timer for :func:`mixed_precision_choice`: ``dtype -> seconds``, the best of a few ``size`` x ``size``
    TensorFlow matmuls on the default device, and the repeats that fit ``budget`` seconds (at least 2; the
    best of 3 calls per timing, or of 1 when even that is too slow: bfloat16 emulated on an old CPU)."""
    import tensorflow as tf  # noqa: PLC0415

    a = tf.constant(np.random.default_rng(0).random((size, size), dtype=np.float32))
    inputs = {d: tf.cast(a, getattr(tf, d)) for d in dtypes}
    product = tf.function(lambda m: tf.reduce_sum(tf.cast(tf.linalg.matmul(m, m), tf.float32)))  # a scalar back

    def once(dtype: str) -> float:
        start = time.perf_counter()
        product(inputs[dtype]).numpy()  # .numpy(): waits for the device
        return time.perf_counter() - start

    first = {d: (once(d), once(d))[1] for d in dtypes}  # the first call traces and picks kernels: not timed
    per_round = sum(first.values())
    calls = 3 if 2 * 3 * per_round <= budget else 1
    repeats = max(2, min(repeats, int(budget / (calls * per_round))))
    return (lambda dtype: min(once(dtype) for _ in range(calls))), repeats


def mixed_precision_choice(size: int = 1024, repeats: int = 5, *, num_gpus: int | None = None,
                           time_matmul: Callable[[str], float] | None = None,
                           budget: float = 2.0) -> tuple[str | None, str]:
    """The Keras mixed-precision policy to use here, chosen by measurement, and why in one line.

    The candidate is ``mixed_float16`` on GPUs and ``mixed_bfloat16`` on CPUs. TensorFlow's ``size`` x
    ``size`` matmul in the 16-bit type and in float32 is timed on the default device, in turn (the order
    alternating), ``repeats`` times each, each timing the best of a few calls; the policy is chosen only
    when the 16-bit GFLOP/s range lies wholly above the float32 range
    (:func:`course_utils.verdicts.separate`), else ``None``. ``why``, e.g. "bfloat16 matmul 155-165 vs
    float32 290-305 GFLOP/s: slower here, mixed precision not tried".

    ``budget``: seconds the timings may take after the first calls (repeats are cut to fit, at least 2);
    ``num_gpus`` (default: TensorFlow's logical GPUs) and ``time_matmul`` (``dtype -> seconds`` of one
    timing, default TensorFlow's) can be given, e.g. by a test. A 16-bit matmul that TensorFlow cannot run
    here gives ``None``, with the error in ``why``. Unlike :func:`mixed_precision_policy`'s flags, this measures
    the kernels training will use (a matmul, not a whole step: convolutions may differ)."""
    if size < 16 or repeats < 2:
        raise ValueError(f"need size >= 16 and repeats >= 2 (the range rule), got size={size}, repeats={repeats}")
    if num_gpus is None:
        import tensorflow as tf  # noqa: PLC0415

        num_gpus = len(tf.config.list_logical_devices("GPU"))
    policy, half = ("mixed_float16", "float16") if num_gpus else ("mixed_bfloat16", "bfloat16")
    if time_matmul is None:
        import tensorflow as tf  # noqa: PLC0415

        try:
            time_matmul, repeats = _tf_matmul_timer(size, (half, "float32"), repeats, budget)
        except (tf.errors.OpError, TypeError, ValueError) as error:  # no 16-bit kernel here: nothing to measure
            return None, f"{half} matmul failed here ({type(error).__name__}): mixed precision not tried"
    seconds: dict[str, list[float]] = {half: [], "float32": []}
    for r in range(repeats):
        for dtype in (half, "float32") if r % 2 == 0 else ("float32", half):
            seconds[dtype].append(time_matmul(dtype))
    rates = {d: [2.0 * size**3 / s / 1e9 for s in found] for d, found in seconds.items()}
    ours, theirs = (min(rates[half]), max(rates[half])), (min(rates["float32"]), max(rates["float32"]))
    side = verdicts.separate(ours, theirs)
    d = verdicts.decimals(*((ours[0], theirs[1]) if side > 0 else (ours[1], theirs[0]))) if side else 0
    measured = (f"{half} matmul {ours[0]:,.{d}f}-{ours[1]:,.{d}f} vs float32 {theirs[0]:,.{d}f}-{theirs[1]:,.{d}f} "
                f"GFLOP/s ({size}x{size}, {repeats} repeats)")
    if side > 0:
        return policy, f"{measured}: faster here, {policy} chosen"
    said = "slower here" if side < 0 else "not faster here (ranges overlap)"
    return None, f"{measured}: {said}, mixed precision not tried"
